package broker

import (
	"time"

	"github.com/raftmq/raftmq/broker/route"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
)

// NodeState is what nodes tell each other a few times a second, once a
// second at rest (pace.go; package route routes reads by it).
type NodeState = route.NodeState

// NodeState returns this node's state.
func (b *Broker) NodeState() NodeState {
	st := b.node.Stats()
	load := b.load.Value()
	d, damaged := b.Damaged()
	var reason string
	if damaged {
		reason = b.RepairSteps()
	}
	return NodeState{
		ID:            b.cfg.NodeID,
		Role:          string(st.Role),
		Term:          st.Term,
		Applied:       b.fsm.Applied(),
		Commit:        st.CommitIndex,
		Last:          st.LastIndex,
		First:         b.rlog.FirstIndex(),
		Load:          load,
		Loaded:        load >= b.cfg.LoadThreshold,
		LeaderID:      st.LeaderID,
		Damaged:       damaged,
		DamagedIndex:  d.Index,
		DamagedReason: reason,

		ServedAsLeader:   b.served.leader.Load(),
		ServedAsFollower: b.served.follower.Load(),
		BatchReadVersion: uint32(raftlog.ReadVersion),
	}
}

// peerView turns what this node knows of node id into a NodeView.
func (b *Broker) peerView(id string) route.NodeView {
	v := route.NodeView{ID: id}
	if n, ok := b.fsm.Node(id); ok {
		v.Addr = n.ClientAddr
	}
	if id == b.cfg.NodeID {
		st := b.NodeState()
		v.Applied, v.First, v.Load, v.Loaded, v.Healthy = st.Applied, st.First, st.Load, st.Loaded, !st.Damaged
		if v.Addr == "" {
			v.Addr = b.cfg.ClientAddr
		}
		return v
	}
	p, ok := b.view.Get(id)
	if !ok {
		return v
	}
	v.Applied, v.First, v.Load, v.Loaded = p.State.Applied, p.State.First, p.State.Load, p.State.Loaded
	v.Healthy = time.Since(p.LastOK) <= b.fresh() && !p.State.Damaged &&
		(p.State.Role == string(election.Follower) || p.State.Role == string(election.Leader))
	return v
}
