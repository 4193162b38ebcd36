package broker

import (
	"sync"
	"time"

	"github.com/raftmq/raftmq/election"
)

// NodeState is what nodes tell each other a few times a second.
type NodeState struct {
	ID         string
	Role       string
	Term       uint64
	Applied    uint64 // last index applied to the FSM
	Commit     uint64
	Last       uint64
	First      uint64 // lowest index whose bodies this node holds
	Load       float64
	Loaded     bool
	LeaderID   string
	ReceivedAt time.Time // set by the receiver
	// PollerApplied is the receiver's own applied index when it asked
	// (set by the receiver): Applied >= PollerApplied means the node had
	// everything the asker had applied by then, however busy the group is.
	PollerApplied uint64
	// Damaged: the node met a damaged entry (DamagedIndex) and must not be
	// sent readers, handed leadership or promoted.
	Damaged       bool
	DamagedIndex  uint64
	DamagedReason string
}

// NodeState returns this node's state.
func (b *Broker) NodeState() NodeState {
	st := b.node.Stats()
	load := b.load.value(b)
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
	}
}

type peerState struct {
	state  NodeState
	lastOK time.Time
	err    string
}

// caughtUp reports whether the peer answered recently and had applied,
// within 16 entries, what the asking node had applied when it asked.
// Comparing with the asker's applied index now would rarely hold under a
// steady write load, as the answer is up to a state period old. Only an
// answer heard after since counts: a node removed, wiped and added again
// under the same id leaves the state of its earlier incarnation in the
// view, which would promote it empty.
func (p peerState) caughtUp(now, since time.Time, fresh time.Duration) bool {
	return p.lastOK.After(since) && now.Sub(p.lastOK) <= fresh && !p.state.Damaged && p.state.Applied+16 >= p.state.PollerApplied
}

// clusterView holds the latest state heard from every other node.
type clusterView struct {
	mu    sync.Mutex
	peers map[string]*peerState
}

func newClusterView() *clusterView { return &clusterView{peers: map[string]*peerState{}} }

func (v *clusterView) set(id string, st NodeState, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.peers[id]
	if p == nil {
		p = &peerState{}
		v.peers[id] = p
	}
	if err != nil {
		p.err = err.Error()
		return
	}
	p.state, p.lastOK, p.err = st, st.ReceivedAt, ""
}

func (v *clusterView) get(id string) (peerState, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p, ok := v.peers[id]
	if !ok {
		return peerState{}, false
	}
	return *p, true
}

func (v *clusterView) retain(ids map[string]bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.peers {
		if !ids[id] {
			delete(v.peers, id)
		}
	}
}

// fresh is how recent a peer's state must be to count as healthy.
func (b *Broker) fresh() time.Duration { return 5 * b.cfg.StatePeriod }

// peerView turns what this node knows of node id into a NodeView.
func (b *Broker) peerView(id string) NodeView {
	v := NodeView{ID: id}
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
	p, ok := b.view.get(id)
	if !ok {
		return v
	}
	v.Applied, v.First, v.Load, v.Loaded = p.state.Applied, p.state.First, p.state.Load, p.state.Loaded
	v.Healthy = time.Since(p.lastOK) <= b.fresh() && !p.state.Damaged &&
		(p.state.Role == string(election.Follower) || p.state.Role == string(election.Leader))
	return v
}
