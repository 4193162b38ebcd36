package store

import (
	"context"
	"fmt"
	"time"
)

// Orderly-consumption locks (RocketMQ's LOCK_BATCH_MQ / UNLOCK_BATCH_MQ) are
// state machine state: a member of a consumer group holds a queue's lock
// while it consumes the queue in order. Every grant is a command in the
// log, answered only once committed, so a leader knows every holder its
// predecessors told of a lock and goes on renewing them at once.
//
// A lock command carries the leader's wall clock (At) and the lease; apply
// reads no clock of its own, so every node grants the same queues. A queue
// is granted when it is free, when its holder's lock expired at At, or when
// the asking member holds it already (a renewal: the expiry moves to
// At+lease, never back). Expired holders of the group are dropped whenever
// a lock or unlock command of the group applies, and a deleted topic or
// group takes its locks along, so the table stays within the groups'
// queues.
//
// Expiry is judged on the clock of the leader that writes the command, so
// two leaders' clocks may differ by as much as a member leaves unused of
// its lease: RocketMQ's client trusts a lock for 30 s of the 60 s lease
// after it asked, raftmq's SDK for half the lease.

const (
	opLock   = "lock"
	opUnlock = "unlock"
	// opLockTerm (lock_term) is a command that older versions wrote (the
	// last term whose leader granted a lock); it still decodes and
	// changes nothing.
	opLockTerm = "lock_term"
)

// QueueRef names one queue of a topic.
type QueueRef struct {
	Topic string `json:"topic"`
	Queue int32  `json:"queue"`
}

type lockHolder struct {
	member  string
	expires int64 // unix nanoseconds, the clock of the leader that granted or renewed it
}

// lockGrant is the state machine's answer to a lock command.
type lockGrant struct{ granted []QueueRef }

// EncodeLock encodes a command that grants member of group the queues it
// may hold at (the leader's clock), each for lease from then.
func EncodeLock(group, member string, queues []QueueRef, at time.Time, lease time.Duration) []byte {
	return encodeMeta(&metaCmd{Op: opLock, Group: group, Member: member, LockQueues: queues, At: at.UnixNano(), Lease: int64(lease)})
}

// EncodeUnlock encodes a command that releases member's locks on queues;
// the locks it does not hold are left alone.
func EncodeUnlock(group, member string, queues []QueueRef, at time.Time) []byte {
	return encodeMeta(&metaCmd{Op: opUnlock, Group: group, Member: member, LockQueues: queues, At: at.UnixNano()})
}

// EncodeLockTerm encodes the lock_term command older versions wrote (tests
// apply it to show that it still applies).
func EncodeLockTerm(term uint64) []byte {
	return encodeMeta(&metaCmd{Op: opLockTerm, Term: term})
}

// applyLocksLocked applies the lock commands; ok is false for any other op.
func (f *FSM) applyLocksLocked(c *metaCmd) (res interface{}, ok bool) {
	switch c.Op {
	case opLockTerm:
		return nil, true
	case opLock:
		if err := ValidateName("group", c.Group); err != nil {
			return err, true
		}
		g := f.lockGroupLocked(c.Group, c.At)
		grant := &lockGrant{}
		for _, q := range c.LockQueues {
			if t := f.topics[q.Topic]; t == nil || q.Queue < 0 || int(q.Queue) >= len(t.queues) {
				continue // deleted since the leader checked it
			}
			h, held := g[q]
			if held && h.member != c.Member && h.expires > c.At {
				continue // another member holds it
			}
			exp := c.At + c.Lease
			if held && h.member == c.Member {
				exp = max(exp, h.expires)
			}
			g[q] = lockHolder{member: c.Member, expires: exp}
			grant.granted = append(grant.granted, q)
		}
		f.dropEmptyLockGroupLocked(c.Group)
		return grant, true
	case opUnlock:
		if err := ValidateName("group", c.Group); err != nil {
			return err, true
		}
		g := f.lockGroupLocked(c.Group, c.At)
		for _, q := range c.LockQueues {
			if h, ok := g[q]; ok && h.member == c.Member {
				delete(g, q)
			}
		}
		f.dropEmptyLockGroupLocked(c.Group)
		return nil, true
	}
	return nil, false
}

// lockGroupLocked returns group's table, without the holders expired at
// at, creating it if needed.
func (f *FSM) lockGroupLocked(group string, at int64) map[QueueRef]lockHolder {
	g := f.locks[group]
	if g == nil {
		g = map[QueueRef]lockHolder{}
		f.locks[group] = g
	}
	for q, h := range g {
		if h.expires <= at {
			delete(g, q)
		}
	}
	return g
}

func (f *FSM) dropEmptyLockGroupLocked(group string) {
	if len(f.locks[group]) == 0 {
		delete(f.locks, group)
	}
}

// dropTopicLocksLocked drops every lock on a deleted topic's queues.
func (f *FSM) dropTopicLocksLocked(topic string) {
	for group, g := range f.locks {
		for q := range g {
			if q.Topic == topic {
				delete(g, q)
			}
		}
		f.dropEmptyLockGroupLocked(group)
	}
}

// LockHolder is the member holding a queue's lock in group and when the
// lock expires by the clock of the leader that granted it (ok false: none
// is recorded; an expired one may be until the group's next lock command).
func (f *FSM) LockHolder(group string, q QueueRef) (member string, expires time.Time, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h, ok := f.locks[group][q]
	if !ok {
		return "", time.Time{}, false
	}
	return h.member, time.Unix(0, h.expires), true
}

// snapLock is one held lock in a snapshot.
type snapLock struct {
	Group, Member string
	Queue         QueueRef
	Expires       int64
}

func (f *FSM) captureLocksLocked() []snapLock {
	var out []snapLock
	for group, g := range f.locks {
		for q, h := range g {
			out = append(out, snapLock{Group: group, Member: h.member, Queue: q, Expires: h.expires})
		}
	}
	return out
}

func (f *FSM) loadLocksLocked(ls []snapLock) {
	for _, l := range ls {
		g := f.locks[l.Group]
		if g == nil {
			g = map[QueueRef]lockHolder{}
			f.locks[l.Group] = g
		}
		g[l.Queue] = lockHolder{member: l.Member, expires: l.Expires}
	}
}

// LockQueues grants member of group the queues it may hold now: each that
// is free, expired or member's already, for lease from now (by this
// node's clock, carried in the command). It returns the queues granted,
// once the grant is committed and applied here. Each call is one Raft
// write, a renewal included (it moves the expiry): RocketMQ clients renew
// every 20 s per consumer, which costs little.
func (s *Store) LockQueues(ctx context.Context, group, member string, queues []QueueRef, now time.Time, lease time.Duration) ([]QueueRef, error) {
	resp, err := s.applyMetaAnswer(ctx, EncodeLock(group, member, queues, now, lease))
	if err != nil {
		return nil, fmt.Errorf("lock queues of group %q for %q: %w", group, member, err)
	}
	g, ok := resp.(*lockGrant)
	if !ok {
		return nil, fmt.Errorf("internal: the state machine answered %T to a lock", resp)
	}
	return g.granted, nil
}

// UnlockQueues releases member's locks on queues of group; the locks it
// does not hold are left alone.
func (s *Store) UnlockQueues(ctx context.Context, group, member string, queues []QueueRef, now time.Time) error {
	if err := s.applyMeta(ctx, EncodeUnlock(group, member, queues, now)); err != nil {
		return fmt.Errorf("unlock queues of group %q for %q: %w", group, member, err)
	}
	return nil
}
