package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/raftlog"
)

// TestNumberProducerOnlyWhenEveryMemberReadsVersion3: a group writing
// version 3 hands out numbers in order; one writing an earlier version
// refuses at once, unless this node has just started and some member has
// not said what it reads yet: then it waits for it, a bounded time.
func TestNumberProducerOnlyWhenEveryMemberReadsVersion3(t *testing.T) {
	// A state loop that waits an hour before its first round: the test
	// sets what the rounds would.
	f := newFakeReplica("n1")
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClientAddr, cfg.RetentionAge, cfg.StatePeriod = "n1", "n1:9000", 0, time.Hour
	b, err := New(cfg, Replica{Writer: f, State: f, Leadership: f, Membership: f, Snapshots: f}, f, f)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.SetBatchVersion(raftlog.BatchV3)
	for want := uint64(0); want < 2; want++ {
		if n, err := b.NumberProducer(ctx); err != nil || n != want {
			t.Fatalf("number %d, %v; want %d", n, err, want)
		}
	}

	f.SetBatchVersion(raftlog.BatchV2)
	b.batchUnheard.Store(false) // every member answered: one reads version 2
	start := time.Now()
	if _, err := b.NumberProducer(ctx); !errors.Is(err, ErrFailedPrecondition) || time.Since(start) > time.Second {
		t.Fatalf("a member reads version 2: %v after %s, want ErrFailedPrecondition at once", err, time.Since(start))
	}

	b.batchUnheard.Store(true) // a member has not answered yet
	b.created = time.Now().Add(-time.Minute)
	start = time.Now()
	if _, err := b.NumberProducer(ctx); !errors.Is(err, ErrFailedPrecondition) || time.Since(start) > time.Second {
		t.Fatalf("a member silent for a minute: %v after %s, want ErrFailedPrecondition at once", err, time.Since(start))
	}

	b.created = time.Now() // a node just started: it waits for the member
	go func() {
		time.Sleep(200 * time.Millisecond)
		f.SetBatchVersion(raftlog.BatchV3)
	}()
	if n, err := b.NumberProducer(ctx); err != nil || n != 2 {
		t.Fatalf("once the member answered: number %d, %v; want 2", n, err)
	}
}
