package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/broker/load"
	"github.com/raftmq/raftmq/election"
)

// brokersInProcess counts the live brokers of this process: they share its
// CPU time (in-process test groups), which the load meter divides.
var brokersInProcess atomic.Int32

// produceQueueFill is the produce queue's fill (0..1), a part of the load.
func (b *Broker) produceQueueFill() float64 {
	return b.batch.QueueFill()
}

// SetLoadOverride fixes the load signal at v (NaN restores measuring). It is
// a hook for tests and for operators who want to push reads to followers.
func (b *Broker) SetLoadOverride(v float64) { b.load.SetOverride(v) }

// stateLoop polls the other nodes, chooses the batch version this node
// writes by what they read (batchversion.go), keeps this node registered,
// samples load and moves leadership to the preferred leader, every
// StatePeriod or, at rest, more slowly (pace.go).
func (b *Broker) stateLoop() {
	t := time.NewTimer(b.cfg.StatePeriod)
	defer t.Stop()
	var lastRegister, lastPreferred time.Time
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.pace.wake:
		}
		b.load.Sample(b.batch.InflightFill())
		b.checkDamage()
		// One read of the configuration serves the poll and the batch
		// version: raft answers it on its main goroutine.
		servers, err := b.node.Servers()
		var peers []string
		if err == nil {
			peers = b.pollPeers(servers)
		}
		b.setBatchVersion(servers)
		if b.fsm.GroupID() != "" {
			b.recordGroupID()
		} else if b.node.Ready() { // a ready leader names the group
			b.goFunc(b.nameGroup)
		}
		b.sampleProgress()
		t.Reset(b.pace.next(b.digests(peers), b.cfg.StatePeriod))
		if time.Since(lastRegister) > 500*time.Millisecond && b.needsRegister() {
			lastRegister = time.Now()
			b.goFunc(b.registerWithLeader)
		}
		if b.cfg.PreferredLeader != "" && time.Since(lastPreferred) > 2*time.Second && b.preferredReady() {
			lastPreferred = time.Now()
			b.log.Info("handing leadership to the preferred leader", "to", b.cfg.PreferredLeader)
			if err := b.node.Transfer(b.cfg.PreferredLeader); err != nil {
				b.log.Warn("transfer to preferred leader failed", "to", b.cfg.PreferredLeader, "error", err)
			}
		}
	}
}

// pollPeers asks every other member of servers (the configuration) for
// its NodeState at once, records the answers in the view and tells the load
// meter how many of the group's nodes share this host. It returns the ids
// of the members it asked.
func (b *Broker) pollPeers(servers []election.Server) []string {
	ids := map[string]bool{}
	var others, asked []string
	var wg sync.WaitGroup
	for _, s := range servers {
		ids[s.ID] = true
		if s.ID == b.cfg.NodeID {
			continue
		}
		n, ok := b.fsm.Node(s.ID)
		if !ok || n.PeerAddr == "" {
			continue
		}
		others = append(others, n.PeerAddr)
		asked = append(asked, s.ID)
		wg.Add(1)
		go func(id, addr string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(b.ctx, 2*b.cfg.StatePeriod)
			defer cancel()
			applied := b.fsm.Applied()
			st, err := b.peers.NodeState(ctx, addr)
			st.ReceivedAt, st.PollerApplied = time.Now(), applied
			b.view.Set(id, st, err)
		}(s.ID, n.PeerAddr)
	}
	wg.Wait()
	b.view.Retain(ids)
	b.load.SetSharing(load.SameHost(b.cfg.PeerAddr, others))
	return asked
}

// digests is what the pace compares between rounds: this node's state and
// what the round heard from the peers it asked.
func (b *Broker) digests(peers []string) []digest {
	d := make([]digest, 0, 1+len(peers))
	d = append(d, digestOf(b.NodeState(), true))
	for _, id := range peers {
		p, _ := b.view.Get(id)
		d = append(d, digestOf(p.State, p.Err == ""))
	}
	return d
}

// preferredReady reports whether this ready leader should hand leadership
// to the preferred leader: it answered recently, is not damaged and has
// applied within 16 entries of this node.
func (b *Broker) preferredReady() bool {
	pref := b.cfg.PreferredLeader
	if pref == b.cfg.NodeID || !b.node.Ready() {
		return false
	}
	p, ok := b.view.Get(pref)
	if !ok || time.Since(p.LastOK) > b.fresh() || p.State.Damaged {
		return false
	}
	return p.State.Applied+16 >= b.fsm.Applied()
}
