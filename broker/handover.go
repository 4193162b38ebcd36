package broker

import (
	"sync"
	"time"

	"github.com/raftmq/raftmq/election"
)

// A leader whose log starts above an entry that still matters (a waiting
// delayed message, an undecided half message, a message sent back by id)
// cannot read it: it installed a snapshot past it, as a wiped and re-added
// member does. Such a leader hands leadership to a voter that holds the
// entry, which then does the work; the entry is never needed from a node
// that lacks it.

// handOverEvery spaces the hand-over attempts of handOverFor.
const handOverEvery = 10 * time.Second

// lackingHandOver is when handOverFor last tried.
type lackingHandOver struct {
	mu sync.Mutex
	at time.Time
}

// handOverFor hands leadership to a healthy voter that holds log entry
// index, when this leader no longer holds it. It tries at most once per
// handOverEvery; with no such voter it does nothing (the work waits).
func (b *Broker) handOverFor(index uint64) {
	if b.node.Role() != election.Leader {
		return
	}
	b.lacking.mu.Lock()
	if time.Since(b.lacking.at) < handOverEvery {
		b.lacking.mu.Unlock()
		return
	}
	b.lacking.at = time.Now()
	b.lacking.mu.Unlock()
	to := b.holderVoter(index)
	if to == "" {
		b.log.Warn("this leader no longer holds a log entry that is still needed, and no healthy voter does", "index", index)
		return
	}
	if err := b.node.Transfer(to); err != nil {
		b.log.Warn("handing leadership to a node that holds a log entry this leader lacks failed", "to", to, "index", index, "error", err)
		return
	}
	b.log.Info("handed leadership to a node that holds a log entry this leader lacks", "to", to, "index", index)
}

// holderVoter is the voter (not this node) that answered recently, is not
// damaged, holds the bodies of log entry index and has applied the most
// ("" when none).
func (b *Broker) holderVoter(index uint64) string {
	servers, err := b.node.Servers()
	if err != nil {
		return ""
	}
	best, applied := "", uint64(0)
	for _, s := range servers {
		if !s.Voter || s.ID == b.cfg.NodeID {
			continue
		}
		p, ok := b.view.Get(s.ID)
		if !ok || time.Since(p.LastOK) > b.fresh() || p.State.Damaged || p.State.First == 0 || p.State.First > index || p.State.Applied < index {
			continue
		}
		if best == "" || p.State.Applied > applied {
			best, applied = s.ID, p.State.Applied
		}
	}
	return best
}
