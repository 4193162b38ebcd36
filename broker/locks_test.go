package broker

import (
	"context"
	"errors"
	"testing"
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
	// A new group's first leader grants at once, and records that it did.
	if got, lease, err := b.LockQueues(ctx, "g", "m", []QueueRef{{Topic: "t", Queue: 1}}); err != nil || lease != DefaultLockLease || len(got) != 1 {
		t.Errorf("lock: %v, lease %s, %v", got, lease, err)
	}
	if f.LockTerm() != 1 {
		t.Errorf("lock term %d after the first grant, want 1", f.LockTerm())
	}
}
