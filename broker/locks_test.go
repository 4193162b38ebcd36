package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/raftmq/raftmq/store"
)

func TestLockQueuesBadInput(t *testing.T) {
	b, f := newFakeBroker(t)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		group, member string
		qs            []QueueRef
		want          error
	}{
		{"", "m", nil, ErrInvalidArgument},
		{"g", "", nil, ErrInvalidArgument},
		{"g", "m", []QueueRef{{Topic: "t", Queue: 2}}, ErrInvalidArgument},
		{"g", "m", []QueueRef{{Topic: "t", Queue: -1}}, ErrInvalidArgument},
		{"g", "m", []QueueRef{{Topic: "nope", Queue: 0}}, ErrNotFound},
		{"g", "m", []QueueRef{{Topic: "bad name!", Queue: 0}}, ErrInvalidArgument},
	} {
		if _, _, err := b.LockQueues(ctx, tc.group, tc.member, tc.qs); !errors.Is(err, tc.want) {
			t.Errorf("lock %q %q %v: %v, want %v", tc.group, tc.member, tc.qs, err, tc.want)
		}
	}
	// Granted once written: the holder renews, another member waits, an
	// unlock frees the queue.
	q := []QueueRef{{Topic: "t", Queue: 1}}
	if got, lease, err := b.LockQueues(ctx, "g", "m", q); err != nil || lease != DefaultLockLease || len(got) != 1 {
		t.Errorf("lock: %v, lease %s, %v", got, lease, err)
	}
	if got, _, err := b.LockQueues(ctx, "g", "m", q); err != nil || len(got) != 1 {
		t.Errorf("renewal: %v, %v", got, err)
	}
	if got, _, err := b.LockQueues(ctx, "g", "other", q); err != nil || len(got) != 0 {
		t.Errorf("another member: %v, %v, want nothing granted", got, err)
	}
	if err := b.UnlockQueues(ctx, "g", "m", q); err != nil {
		t.Fatal(err)
	}
	if got, _, err := b.LockQueues(ctx, "g", "other", q); err != nil || len(got) != 1 {
		t.Errorf("another member after the unlock: %v, %v", got, err)
	}
	// A write that fails (raft refused it) grants nothing.
	f.fail(store.ErrNotLeader)
	if got, _, err := b.LockQueues(ctx, "g", "other", q); err == nil || len(got) != 0 {
		t.Errorf("lock with a failing write: %v, %v", got, err)
	}
}
