package broker

import (
	"fmt"
	"sort"
	"time"

	"github.com/raftmq/raftmq/election"
)

// Damage is a damaged entry this node met in its own log: a checksum that
// did not match when the entry was read from disk (raftlog), or when the
// FSM was to apply it (store). Such a node must not serve that data, lead,
// be handed leadership or be promoted; it keeps voting and acknowledging
// appends, so it still counts for a quorum, until an operator repairs it.
type Damage struct {
	Index  uint64 // log index of the damaged entry
	Source string // "log" (read from disk) or "state machine" (apply)
	Err    string
	Since  time.Time
}

// Damaged returns the damage this node met, if any. It is sticky until
// the node restarts.
func (b *Broker) Damaged() (Damage, bool) {
	if d := b.damage.Load(); d != nil {
		return *d, true
	}
	return Damage{}, false
}

// RepairSteps tells an operator how to repair this node.
func (b *Broker) RepairSteps() string {
	d, ok := b.Damaged()
	if !ok {
		return ""
	}
	return fmt.Sprintf("this node met a damaged entry at log index %d (%s: %s). It serves no reads and will not lead, except to hand leadership over when no other node can be elected; "+
		"the other nodes hold the entry. To repair: restart it (a log damaged on disk makes it refuse to start, naming the entry), then "+
		"run `raftmq member remove %s --force` against the group, stop it, move its data directory away, start it empty with --join "+
		"and run `raftmq member add %s@<its raft address>`", d.Index, d.Source, d.Err, b.cfg.NodeID, b.cfg.NodeID)
}

// checkDamage polls the log and the FSM for damage they found (they tell no
// one themselves, so that their callers never wait on the broker).
func (b *Broker) checkDamage() {
	if b.damage.Load() != nil {
		return
	}
	var d *Damage
	if idx, err := b.fsm.Damaged(); idx != 0 {
		d = &Damage{Index: idx, Source: "state machine", Err: errString(err)}
	}
	if idx, err := b.rlog.Damaged(); idx != 0 && (d == nil || idx < d.Index) {
		d = &Damage{Index: idx, Source: "log", Err: errString(err)}
	}
	if d == nil {
		return
	}
	d.Since = time.Now()
	if !b.damage.CompareAndSwap(nil, d) {
		return
	}
	b.log.Error("node damaged: "+b.RepairSteps(), "index", d.Index, "source", d.Source)
	b.node.NeverCampaign()
	b.node.CampaignWhen(b.stuckWithoutLeader)
	b.handOverIfLeader()
}

// leaderlessHandOver is how long a damaged node waits without a leader
// before it campaigns: healthy elections take well under a second, so by
// then the healthy voters have failed to win, most likely because this
// node's log is ahead of theirs and it refused them its vote.
const leaderlessHandOver = 2 * time.Second

// stuckWithoutLeader reports whether the group has had no leader for
// leaderlessHandOver: a damaged node then campaigns, and when elected it
// hands leadership to a healthy voter (handOverIfLeader) once that voter
// holds its log.
func (b *Broker) stuckWithoutLeader() bool {
	return b.leader.leaderless() >= leaderlessHandOver
}

func errString(err error) string {
	if err == nil {
		return "damaged"
	}
	return err.Error()
}

// handOverIfLeader starts handing leadership to a healthy follower when
// this damaged node leads: it cannot replicate the damaged entry, and as
// leader it would answer for state it may not hold.
func (b *Broker) handOverIfLeader() {
	if b.damage.Load() == nil || b.node.Role() != election.Leader || !b.handingOver.CompareAndSwap(false, true) {
		return
	}
	b.goFunc(func() {
		defer b.handingOver.Store(false)
		for b.node.Role() == election.Leader && !b.closed.Load() {
			target := b.healthyVoter()
			if target == "" {
				// The FSM may have stopped before it learnt the other
				// nodes' API addresses, so their state is unknown: raft
				// picks the most caught-up follower.
				b.log.Warn("damaged leader: no follower known to be healthy; handing leadership to the most caught-up one")
			}
			if err := b.node.Transfer(target); err != nil {
				b.log.Warn("damaged leader: leadership transfer failed", "to", target, "error", err)
			} else {
				b.log.Info("damaged leader handed leadership over", "to", target)
				return
			}
			select {
			case <-b.stop:
				return
			case <-time.After(time.Second):
			}
		}
	})
}

// healthyVoter is the voter (not this node) that answered recently, is
// not damaged and has applied the most ("" when none).
func (b *Broker) healthyVoter() string {
	servers, err := b.node.Servers()
	if err != nil {
		return ""
	}
	type cand struct {
		id      string
		applied uint64
	}
	var cs []cand
	for _, s := range servers {
		if !s.Voter || s.ID == b.cfg.NodeID {
			continue
		}
		p, ok := b.view.Get(s.ID)
		if !ok || time.Since(p.LastOK) > b.fresh() || p.State.Damaged {
			continue
		}
		cs = append(cs, cand{s.ID, p.State.Applied})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].applied > cs[j].applied })
	if len(cs) == 0 {
		return ""
	}
	return cs[0].id
}
