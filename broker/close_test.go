package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
)

// TestCloseEndsCallsInFlight: Close returns at once while a long poll and a
// produce waiting for a leader are in flight, and both end with
// ErrShutdown instead of running out their waits (30 s and 3 s).
func TestCloseEndsCallsInFlight(t *testing.T) {
	b, f := newFakeBroker(t)
	if _, err := b.CreateTopic(context.Background(), "t", 1, false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pulled := make(chan error, 1)
	go func() {
		_, err := b.Pull(ctx, PullRequest{Topic: "t", Queue: 0, Offset: 0, Wait: MaxPullWait})
		pulled <- err
	}()
	// No leader known: the produce waits for one (leaderWait).
	f.setRole(election.Follower, false, "")
	produced := make(chan error, 1)
	go func() {
		_, err := b.Produce(ctx, ProduceRequest{Topic: "t", Messages: inQueue(0, "m")})
		produced <- err
	}()
	// Neither call can finish by itself within this time.
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-pulled:
		t.Fatalf("the long poll ended before Close: %v", err)
	case err := <-produced:
		t.Fatalf("the produce ended before Close: %v", err)
	default:
	}

	start := time.Now()
	b.Close()
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("Close took %v with calls in flight, want at most 100ms", took)
	}
	for name, ch := range map[string]chan error{"pull": pulled, "produce": produced} {
		select {
		case err := <-ch:
			if !errors.Is(err, ErrShutdown) {
				t.Errorf("%s after Close: %v, want ErrShutdown", name, err)
			}
		case <-time.After(time.Second):
			t.Errorf("%s still in flight 1s after Close", name)
		}
	}
}

// TestNoGoroutineAfterClose: after Close the broker listens to no role
// change and starts no goroutine; a second Close returns at once.
func TestNoGoroutineAfterClose(t *testing.T) {
	b, f := newFakeBroker(t)
	b.Close()
	f.mu.Lock()
	n := len(f.listeners)
	f.mu.Unlock()
	if n != 0 {
		t.Errorf("%d role-change listeners left after Close, want 0", n)
	}
	f.setRole(election.Leader, true, "n1") // would start registerSelf
	if b.goFunc(func() { t.Error("a goroutine ran after Close") }) {
		t.Error("goFunc started a goroutine after Close")
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := b.ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("root context after Close: %v, want cancelled", err)
	}
}

// TestSubmitAfterCloseDoesNotHang: a delivery handed to the batcher as the
// broker closes (the scheduler's last round, a transaction decision) may
// land in the batcher's queue after the batcher stopped, where nothing
// answers it; its wait must end with the broker instead of hanging the
// caller, and with it Close, which waits for the scheduler.
func TestSubmitAfterCloseDoesNotHang(t *testing.T) {
	b, _ := newFakeBroker(t)
	b.Close()
	for i := 0; i < 20; i++ { // a queued request and the closed stop race: each is picked about half the time
		_, wait, err := b.submit(nil, raftlog.Request{Topic: "t", Messages: []raftlog.Message{{Queue: 0, Body: []byte("m")}}})
		if err != nil {
			if !errors.Is(err, ErrShutdown) {
				t.Fatalf("submit after Close: %v, want ErrShutdown", err)
			}
			continue
		}
		done := make(chan error, 1)
		go func() { _, err := wait(); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrUnknownOutcome) && !errors.Is(err, ErrShutdown) {
				t.Fatalf("wait after Close: %v, want ErrUnknownOutcome or ErrShutdown", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a delivery queued after Close is still waiting for its answer 10s later")
		}
	}
}
