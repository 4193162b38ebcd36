package broker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftmq/raftmq/store"
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

// DefaultLockLease is RocketMQ's broker-side lock lease
// (REBALANCE_LOCK_MAX_LIVE_TIME 60 s).
const DefaultLockLease = 60 * time.Second

// QueueRef names one queue of a topic.
type QueueRef struct {
	Topic string
	Queue int32
}

type lockHolder struct {
	member  string
	expires time.Time
}

type lockTable struct {
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

// MaxLockQueues bounds the queues of one LockQueues or UnlockQueues call.
const MaxLockQueues = 4096

func (b *Broker) lockLease() time.Duration {
	if b.cfg.LockLease > 0 {
		return b.cfg.LockLease
	}
	return DefaultLockLease
}

// checkTermLocked resets the table when this node leads in a new term.
func (lt *lockTable) checkTermLocked(term uint64, inherited bool, now time.Time, lease time.Duration) {
	if lt.locks == nil || lt.term != term {
		lt.term = term
		lt.locks = map[string]map[QueueRef]lockHolder{}
		lt.graceUntil = time.Time{}
		if inherited {
			lt.graceUntil = now.Add(lease / 2)
		}
	}
}

func validateLock(group, member string, queues []QueueRef) error {
	if err := store.ValidateName("group", group); err != nil {
		return storeErr(err)
	}
	if member == "" || len(member) > 255 {
		return invalid("member id must be 1..255 bytes")
	}
	if len(queues) > MaxLockQueues {
		return invalid("%d queues in one call, at most %d", len(queues), MaxLockQueues)
	}
	for _, q := range queues {
		if err := store.ValidateName("topic", q.Topic); err != nil {
			return storeErr(err)
		}
	}
	return nil
}

// LockQueues takes or renews member's locks on queues and returns the ones
// it holds now, and the lease (leader only).
func (b *Broker) LockQueues(ctx context.Context, group, member string, queues []QueueRef) ([]QueueRef, time.Duration, error) {
	if err := validateLock(group, member, queues); err != nil {
		return nil, 0, err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return nil, 0, err
	}
	for _, q := range queues {
		if n := b.fsm.QueueCount(q.Topic); n == 0 {
			return nil, 0, fmt.Errorf("%w: topic %q", ErrNotFound, q.Topic)
		} else if q.Queue < 0 || int(q.Queue) >= n {
			return nil, 0, invalid("queue %d of topic %q with %d queues", q.Queue, q.Topic, n)
		}
	}
	lease := b.lockLease()
	term := b.node.Stats().Term
	inherited, err := b.markLockTerm(ctx, term)
	if err != nil {
		return nil, 0, err
	}
	return b.locks.lock(term, inherited, time.Now(), lease, group, member, queues), lease, nil
}

// markLockTerm records, once per term and before any grant of it, that this
// term's leader grants locks, and reports whether an earlier term's leader
// did (then this term waits). Concurrent first calls of a term wait for one
// answer: one that went ahead after the term was recorded would take it for
// the first term ever and skip the wait.
func (b *Broker) markLockTerm(ctx context.Context, term uint64) (bool, error) {
	lt := &b.locks
	lt.termMu.Lock()
	defer lt.termMu.Unlock()
	if lt.markedTerm == term {
		return lt.inherited, nil
	}
	prev := b.fsm.LockTerm()
	if prev < term {
		if err := b.w.MarkLockTerm(ctx, term); err != nil {
			return false, b.replicaErr(err)
		}
	}
	// prev == term: this node recorded the term before it lost its table
	// (it cannot tell what it granted then): wait as well.
	lt.markedTerm, lt.inherited = term, prev != 0
	return lt.inherited, nil
}

// lock grants member the queues it may hold at now, in term; inherited says
// whether an earlier term's leader granted locks (then the first call of
// the term starts the wait).
func (lt *lockTable) lock(term uint64, inherited bool, now time.Time, lease time.Duration, group, member string, queues []QueueRef) []QueueRef {
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
			continue // see the package comment above: a new leader waits
		case ok && now.Before(h.expires):
			continue // another member holds it
		}
		g[q] = lockHolder{member: member, expires: now.Add(lease)}
		out = append(out, q)
	}
	return out
}

// UnlockQueues releases member's locks on queues; locks it does not hold
// are left alone (leader only).
func (b *Broker) UnlockQueues(ctx context.Context, group, member string, queues []QueueRef) error {
	if err := validateLock(group, member, queues); err != nil {
		return err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	b.locks.unlock(b.node.Stats().Term, time.Now(), group, member, queues)
	return nil
}

// unlock drops member's locks on queues.
func (lt *lockTable) unlock(term uint64, now time.Time, group, member string, queues []QueueRef) {
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
