package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/store"
)

// countingState counts the index lookups a pull makes.
type countingState struct {
	State
	locates atomic.Int32
}

func (c *countingState) Locate(topic string, q int32, offset uint64, limit int) ([]store.Location, store.QueueRange, error) {
	c.locates.Add(1)
	return c.State.Locate(topic, q, offset, limit)
}

func newCountingBroker(t *testing.T) (*Broker, *fakeReplica, *countingState) {
	t.Helper()
	f := newFakeReplica("n1")
	cs := &countingState{State: f}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClientAddr, cfg.RetentionAge = "n1", "n1:9000", 0
	b, err := New(cfg, Replica{Writer: f, State: cs, Leadership: f, Membership: f, Snapshots: f}, f, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, f, cs
}

// TestPullLooksTheIndexUpOnce: whatever a pull finds, it looks its offset
// up in the queue index once, and the routing facts (the entry of the
// consumer's next offset) come from that lookup.
func TestPullLooksTheIndexUpOnce(t *testing.T) {
	b, f, cs := newCountingBroker(t)
	for i := 0; i < 4; i++ {
		produce(t, b, ProduceRequest{Topic: "t", Messages: inQueue(0, "a", "b")})
	}
	ctx := context.Background()
	pulls := []struct {
		name string
		req  PullRequest
	}{
		{"a part of the queue (the next offset's entry is not read)", PullRequest{Topic: "t", Offset: 1, MaxMessages: 2}},
		{"to the end", PullRequest{Topic: "t", Offset: 0}},
		{"at the tail", PullRequest{Topic: "t", Offset: 8}},
		{"past the end", PullRequest{Topic: "t", Offset: 9}},
		{"an unknown topic", PullRequest{Topic: "u"}},
	}
	for _, p := range pulls {
		before := cs.locates.Load()
		b.Pull(ctx, p.req)
		if n := cs.locates.Load() - before; n != 1 {
			t.Errorf("leader, %s: %d index lookups, want 1", p.name, n)
		}
	}
	f.RegisterNode(ctx, store.NodeInfo{ID: "n2", ClientAddr: "n2:9000", PeerAddr: "n2:9001"})
	f.setRole(election.Follower, false, "n2")
	for _, p := range pulls {
		before := cs.locates.Load()
		b.Pull(ctx, p.req)
		if n := cs.locates.Load() - before; n != 1 {
			t.Errorf("follower, %s: %d index lookups, want 1", p.name, n)
		}
	}
}

// TestLeaderOnlyCallsWaitForALeader: while no leader is known a leader-only
// call waits (here until its context ends) and answers not-leader; once a
// leader is known it is named at once, and a leader elected during the
// wait serves the call.
func TestLeaderOnlyCallsWaitForALeader(t *testing.T) {
	b, f := newFakeBroker(t)
	f.RegisterNode(context.Background(), store.NodeInfo{ID: "n2", ClientAddr: "n2:9000", PeerAddr: "n2:9001"})
	f.setRole(election.Follower, false, "")
	start := time.Now() // before the context, whose deadline counts from its creation
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := b.ListTopics(ctx)
	if !errors.Is(err, ErrNotLeader) || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("list topics with no leader: %v after %v, want not-leader after the context's end", err, time.Since(start))
	}

	f.setRole(election.Follower, false, "n2")
	start = time.Now()
	var nl *NotLeaderError
	if _, err := b.ListGroups(context.Background()); !errors.As(err, &nl) || nl.PeerAddr != "n2:9001" || time.Since(start) > 5*time.Second {
		t.Fatalf("list groups on a follower: %v after %v, want at once a NotLeaderError naming n2", err, time.Since(start))
	}

	f.setRole(election.Follower, false, "")
	go func() {
		time.Sleep(100 * time.Millisecond)
		f.setRole(election.Leader, true, "n1")
	}()
	if _, err := b.DescribeTopic(context.Background(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("describe topic while a leader is elected: %v, want the new leader's answer (not found)", err)
	}
}
