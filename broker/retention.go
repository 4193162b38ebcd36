package broker

import (
	"time"

	"github.com/raftmq/raftmq/broker/retention"
	"github.com/raftmq/raftmq/election"
)

// newRetention builds the node's retention (package retention) over its
// log, state machine and writes.
func (b *Broker) newRetention() *retention.Manager {
	period := b.cfg.RetentionCheck
	if period <= 0 {
		period = DefaultConfig().RetentionCheck
	}
	cfg := retention.Config{Age: b.cfg.RetentionAge, Bytes: b.cfg.RetentionBytes, Check: period, WriteTimeout: b.cfg.WriteTimeout}
	return retention.New(cfg, b.log, b.rlog, b.fsm, b.w, b.node, retention.Hooks{
		Leading: func() bool { return b.node.Role() == election.Leader && b.node.Ready() },
		Keep:    b.retentionKeep,
		Cut:     func(why string) { b.m.retentionCuts.WithLabelValues(why).Inc() },
	})
}

// retentionLoop runs retention until the broker stops.
func (b *Broker) retentionLoop() { b.retention.Run(b.ctx) }

// retentionKeep lowers a retention cut below every staged delayed message
// that has not been delivered and every undecided half message, and keeps what a follower still needs while
// it is healthy or was heard from within the grace period (a restart):
// deleting it would make the leader send it a snapshot, and it would drop
// its whole log. 0 keeps everything for now.
func (b *Broker) retentionKeep(cut uint64, now time.Time) uint64 {
	cut = b.scheduleCut(cut)
	cut = b.txnCut(cut)
	servers, _ := b.node.Servers()
	for _, s := range servers {
		if s.ID == b.cfg.NodeID {
			continue
		}
		v := b.peerView(s.ID)
		p, heard := b.view.Get(s.ID)
		if heard && p.State.Damaged {
			continue // stopped applying for good: it is repaired by a wipe, not by waiting
		}
		recent := heard && now.Sub(p.LastOK) <= b.cfg.RetentionGrace
		if (v.Healthy || recent) && v.Applied+1 < cut {
			return 0
		}
	}
	return cut
}
