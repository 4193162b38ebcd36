package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/store"
)

// Orderly consumption locks (RocketMQ's LOCK_BATCH_MQ / UNLOCK_BATCH_MQ)
// are replicated state (store/locks.go): the leader validates a call and
// writes it as one command stamped with its clock; the state machine grants
// and answers. A member is told it holds a lock only once the grant is
// committed, so a new leader knows every holder and renews them at once,
// and no other member is granted the queue before the lock expires. Each
// LockQueues, a renewal included, is one Raft write (RocketMQ clients
// renew every 20 s per consumer).

// DefaultLockLease is RocketMQ's broker-side lock lease
// (REBALANCE_LOCK_MAX_LIVE_TIME 60 s).
const DefaultLockLease = 60 * time.Second

// QueueRef names one queue of a topic.
type QueueRef = store.QueueRef

// MaxLockQueues bounds the queues of one LockQueues or UnlockQueues call.
const MaxLockQueues = 4096

func (b *Broker) lockLease() time.Duration {
	if b.cfg.LockLease > 0 {
		return b.cfg.LockLease
	}
	return DefaultLockLease
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
	held, err := b.w.LockQueues(ctx, group, member, queues, time.Now(), lease)
	if err != nil {
		return nil, 0, b.replicaErr(err)
	}
	return held, lease, nil
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
	if err := b.w.UnlockQueues(ctx, group, member, queues, time.Now()); err != nil {
		return b.replicaErr(err)
	}
	return nil
}
