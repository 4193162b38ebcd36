package remoting

import (
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
)

func TestPhysicalOffsetNamesTheMessage(t *testing.T) {
	for _, c := range []struct {
		index uint64
		ord   uint32
	}{{1, 0}, {12345, 7}, {1<<39 - 1, 1<<24 - 1}} {
		id := messageIDOf(c.index, c.ord)
		p := physicalOffset(id)
		if p <= 0 && c.index > 0 {
			t.Fatalf("%s: physical offset %d", id, p)
		}
		if back := messageID(p); back != id {
			t.Fatalf("%s -> %d -> %s", id, p, back)
		}
	}
	if physicalOffset("short") != 0 || physicalOffset("ZZZZZZZZZZZZZZZZZZZZZZZZ") != 0 {
		t.Fatal("a malformed id got an offset")
	}
}

func messageIDOf(index uint64, ord uint32) string { return messageID(int64(index<<24 | uint64(ord))) }

func TestNumbering(t *testing.T) {
	ids := numbering("n2", []string{"n3", "n1", "n2"})
	if ids["n2"] != 0 || ids["n1"] != 1 || ids["n3"] != 2 {
		t.Fatalf("%v", ids)
	}
	v := &view{self: "n1", leader: "n2", ids: ids}
	if v.brokerID("n3") != 2 || v.brokerID("") != 0 || v.brokerID("unknown") != 0 || v.isLeader() {
		t.Fatalf("view %+v", v)
	}
}

func TestConsumersFollowTheirConnection(t *testing.T) {
	c := newClients(time.Minute)
	if !c.heard("g", "client-1", 1, nil) {
		t.Fatal("a new member must be bound to its connection")
	}
	if c.heard("g", "client-1", 1, nil) {
		t.Fatal("the same connection again is not a move")
	}
	// It reconnects: bound to the new connection, so the old one's close
	// leaves it and the new one's drops it.
	if !c.heard("g", "client-1", 2, nil) {
		t.Fatal("a heartbeat on another connection must rebind the member")
	}
	c.closed(1)
	if got := c.list("g"); len(got) != 1 {
		t.Fatalf("after the old connection closed: %v", got)
	}
	c.closed(2)
	if got := c.list("g"); len(got) != 0 {
		t.Fatalf("after its connection closed: %v", got)
	}
	short := newClients(time.Millisecond)
	short.heard("g", "c", 1, nil)
	time.Sleep(5 * time.Millisecond)
	if got := short.list("g"); len(got) != 0 {
		t.Fatalf("silent member kept: %v", got)
	}
}

func TestLiveFollowers(t *testing.T) {
	now := time.Now()
	st := broker.Status{LeaderID: "n1", Nodes: []broker.NodeStatus{
		{ID: "n1", LastSeen: now},
		{ID: "n3", LastSeen: now.Add(-time.Second)},
		{ID: "n2", LastSeen: now.Add(-liveGrace - time.Second)}, // silent: dead or hung
		{ID: "n4"}, // never heard
		{ID: "n5", LastSeen: now, Damaged: true},
		{ID: "n0", LastSeen: now.Add(-time.Millisecond)},
	}}
	if got := liveFollowers(st, now, now.Add(-liveGrace-time.Second)); !slices.Equal(got, []string{"n0", "n3"}) {
		t.Fatalf("live %v, want [n0 n3]", got)
	}
	// A new leader counts the followers it has not heard from yet.
	if got := liveFollowers(st, now, now.Add(-time.Second)); !slices.Equal(got, []string{"n0", "n3", "n4"}) {
		t.Fatalf("live %v for a new leader, want [n0 n3 n4]", got)
	}
	v1 := &view{leader: "n1", term: 2, ids: map[string]int64{"n1": 0}, live: []string{"n3"}, liveSeen: true}
	v2 := &view{leader: "n1", term: 2, ids: map[string]int64{"n1": 0}, live: []string{"n0", "n3"}, liveSeen: true}
	if v1.same(v2) || !v1.same(v1) {
		t.Fatal("a change of the live followers is a change of the view (the leader registers again at once)")
	}
}

// After a leader change pull responses suggest nodes by the previous
// leader's numbering, which clients keep until their route poll: never the
// old leader's 0 for another node.
func TestSuggestionsKeepThePreviousNumbering(t *testing.T) {
	old := numbering("n1", []string{"n1", "n2", "n3"})
	now := numbering("n2", []string{"n1", "n2", "n3"})
	v := &view{self: "n3", leader: "n2", ids: now, prevIDs: old, graceUntil: time.Now().Add(time.Minute)}
	if got := v.suggestID("n2"); got != 1 {
		t.Fatalf("new leader n2 suggested as %d during the grace; want 1 (its id under n1)", got)
	}
	if got := v.suggestID("n3"); got != 2 {
		t.Fatalf("n3 suggested as %d; want 2", got)
	}
	if got := v.retryID(); got != 1 {
		t.Fatalf("retry suggests %d; want the leader's old id 1", got)
	}
	if !v.oldLeader("n1") || v.oldLeader("n2") || v.oldLeader("n3") {
		t.Fatal("oldLeader: want n1 only")
	}
	v.graceUntil = time.Now().Add(-time.Second)
	if v.oldLeader("n1") {
		t.Fatal("n1 still the old leader after the grace")
	}
	if got := v.suggestID("n2"); got != 0 {
		t.Fatalf("new leader suggested as %d after the grace; want 0", got)
	}
	v.leader = ""
	if got := v.retryID(); got != 2 {
		t.Fatalf("retry without a leader suggests %d; want this node (2)", got)
	}
}
