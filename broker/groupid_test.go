package broker

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/election"
)

// TestReadyLeaderNamesTheGroup: a group without an id gets a random one
// from its leader once that is ready, never from a follower; Status shows
// it, and the leader of a named group keeps the name.
func TestReadyLeaderNamesTheGroup(t *testing.T) {
	b, f := newFakeBroker(t)
	f.setRole(election.Follower, false, "n2")
	time.Sleep(100 * time.Millisecond)
	b.nameGroup()
	if id := b.GroupID(); id != "" {
		t.Fatalf("a follower named the group %q", id)
	}
	f.setRole(election.Leader, true, "n1")
	deadline := time.Now().Add(10 * time.Second)
	for b.GroupID() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	id := b.GroupID()
	if len(id) != 32 {
		t.Fatalf("group id %q after the leader was ready, want 32 hex characters", id)
	}
	if st, err := b.Status(); err != nil || st.GroupID != id {
		t.Fatalf("status group id %q (%v), want %q", st.GroupID, err, id)
	}
	f.setRole(election.Leader, true, "n1")
	b.nameGroup()
	if got := b.GroupID(); got != id {
		t.Fatalf("a named group was renamed %q -> %q", id, got)
	}
}
