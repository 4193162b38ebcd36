package groups

import (
	"context"
	"sync"
	"time"
)

// Orderly consumption locks (RocketMQ's LOCK_BATCH_MQ / UNLOCK_BATCH_MQ): a
// member of a group holds a queue's lock while it consumes the queue in
// order, so that during a rebalance the queue's next owner cannot start
// before the previous one has finished its batch and unlocked. The table is
// soft state on the leader, like group membership; a lock lapses when not
// renewed within LockLease (RocketMQ's 60 s).
//
// On a leader change the new leader's table is empty and it does not know
// who held what. The SDK trusts a lock for half the lease after its last
// successful renewal; a new leader whose predecessors granted locks (the
// replicated lock term says whether any did: store/locks.go) therefore
// grants no lock for half a lease after it first answers LockQueues, by
// which time every member that held a lock under an old leader has stopped
// consuming in its name. Orderly consumption pauses for that long after a
// leader change; it never runs on two members at once because of one. A
// group whose leaders never granted a lock (a new group) grants at once.

// QueueRef names one queue of a topic.
type QueueRef struct {
	Topic string
	Queue int32
}

// LockState is the replicated lock term: the latest term whose leader
// granted locks.
type LockState interface {
	LockTerm() uint64
}

// LockWriter records a term's first grant.
type LockWriter interface {
	MarkLockTerm(ctx context.Context, term uint64) error
}

type lockHolder struct {
	member  string
	expires time.Time
}

// Locks is the leader's table of orderly-consumption locks. The zero value
// is an empty table.
type Locks struct {
	// termMu serializes the first LockQueues of a term, which records the
	// term (a Raft write) and decides whether this term waits.
	termMu     sync.Mutex
	markedTerm uint64
	inherited  bool

	mu         sync.Mutex
	term       uint64
	graceUntil time.Time
	locks      map[string]map[QueueRef]lockHolder // group -> queue -> holder
}

// checkTermLocked resets the table when this node leads in a new term.
func (lt *Locks) checkTermLocked(term uint64, inherited bool, now time.Time, lease time.Duration) {
	if lt.locks == nil || lt.term != term {
		lt.term = term
		lt.locks = map[string]map[QueueRef]lockHolder{}
		lt.graceUntil = time.Time{}
		if inherited {
			lt.graceUntil = now.Add(lease / 2)
		}
	}
}

// MarkTerm records, once per term and before any grant of it, that this
// term's leader grants locks, and reports whether an earlier term's leader
// did (then this term waits). Concurrent first calls of a term wait for one
// answer: one that went ahead after the term was recorded would take it for
// the first term ever and skip the wait.
// The error is the state's or the write's, unmapped.
func (lt *Locks) MarkTerm(ctx context.Context, term uint64, fsm LockState, w LockWriter) (bool, error) {
	lt.termMu.Lock()
	defer lt.termMu.Unlock()
	if lt.markedTerm == term {
		return lt.inherited, nil
	}
	prev := fsm.LockTerm()
	if prev < term {
		if err := w.MarkLockTerm(ctx, term); err != nil {
			return false, err
		}
	}
	// prev == term: this node recorded the term before it lost its table
	// (it cannot tell what it granted then): wait as well.
	lt.markedTerm, lt.inherited = term, prev != 0
	return lt.inherited, nil
}

// Lock grants member the queues it may hold at now, in term; inherited says
// whether an earlier term's leader granted locks (then the first call of
// the term starts the wait).
func (lt *Locks) Lock(term uint64, inherited bool, now time.Time, lease time.Duration, group, member string, queues []QueueRef) []QueueRef {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.checkTermLocked(term, inherited, now, lease)
	g := lt.locks[group]
	if g == nil {
		g = map[QueueRef]lockHolder{}
		lt.locks[group] = g
	}
	var out []QueueRef
	for _, q := range queues {
		h, ok := g[q]
		switch {
		case ok && h.member == member && now.Before(h.expires):
		case now.Before(lt.graceUntil):
			continue // see the comment at the top of this file: a new leader waits
		case ok && now.Before(h.expires):
			continue // another member holds it
		}
		g[q] = lockHolder{member: member, expires: now.Add(lease)}
		out = append(out, q)
	}
	return out
}

// Unlock drops member's locks on queues.
func (lt *Locks) Unlock(term uint64, now time.Time, group, member string, queues []QueueRef) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.term != term {
		return // a table of another term: nothing of it is held now
	}
	g := lt.locks[group]
	for _, q := range queues {
		if h, ok := g[q]; ok && h.member == member {
			delete(g, q)
		}
	}
}
