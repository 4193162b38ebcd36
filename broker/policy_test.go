package broker

import (
	"strings"
	"testing"
)

// TestSuggest covers every rule and every reason of Suggest.
func TestSuggest(t *testing.T) {
	leader := NodeView{ID: "n1", Addr: "a1", Healthy: true, Applied: 100, Load: 0.2}
	loaded := leader
	loaded.Loaded, loaded.Load = true, 0.9
	f2 := NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, Load: 0.3}
	f3 := NodeView{ID: "n3", Addr: "a3", Healthy: true, Applied: 100, Load: 0.3}
	behind := func(f NodeView, applied uint64) NodeView { f.Applied = applied; return f }
	const cold = 1000
	onLeader := func(self NodeView, need uint64, behindBytes uint64, fs ...NodeView) RouteInput {
		return RouteInput{SelfIsLeader: true, Self: self, Followers: fs, NeedIndex: need, BehindBytes: behindBytes, ColdBytes: cold, MaxLag: 20, Topic: "t"}
	}
	onFollower := func(self, l NodeView, need uint64) RouteInput {
		return RouteInput{Self: self, Leader: l, NeedIndex: need, ColdBytes: cold, MaxLag: 20}
	}
	with := func(in RouteInput, f func(*RouteInput)) RouteInput { f(&in); return in }
	cases := []struct {
		name       string
		in         RouteInput
		wantNode   string // "-": no node
		wantReason Reason
	}{
		// The leader.
		{"leader: hot reader stays on an idle leader", onLeader(leader, 90, 10, f2, f3), "n1", ReasonLeaderNotLoaded},
		{"rule 1: loaded leader sends a reader to a follower that has the data", onLeader(loaded, 90, 10, f2), "n2", ReasonLeaderLoaded},
		{"rule 1: loaded leader skips a follower without the data", onLeader(loaded, 90, 10, behind(f2, 50), f3), "n3", ReasonLeaderLoaded},
		{"rule 2: loaded leader keeps a reader whose burst no follower applied yet", onLeader(loaded, 100, 0, behind(f2, 95), behind(f3, 98)), "n1", ReasonFollowersBehind},
		{"rule 2: a reader at the tail of a loaded leader stays while followers trail", with(onLeader(loaded, 100, 0, behind(f2, 99)), func(in *RouteInput) { in.AtTail = true }), "n1", ReasonFollowersBehind},
		{"loaded leader with a lagging follower uses the other one", onLeader(loaded, 60, 10, behind(f2, 70), f3), "n3", ReasonLeaderLoaded},
		{"loaded leader with only a lagging follower keeps the reader", onLeader(loaded, 60, 10, behind(f2, 70)), "n1", ReasonFollowersBehind},
		{"cold read goes to a follower (RocketMQ's rule)", onLeader(leader, 90, 5000, f2), "n2", ReasonColdRead},
		{"cold read on a loaded leader says loaded", onLeader(loaded, 90, 5000, f2), "n2", ReasonLeaderLoaded},
		{"cold read skips a follower without the body", onLeader(leader, 90, 5000, NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, First: 95}, f3), "n3", ReasonColdRead},
		{"leader without the body sends the reader where it is", onLeader(NodeView{ID: "n1", Addr: "a1", Healthy: true, Applied: 100, First: 95}, 90, 10, NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, First: 95}, f3), "n3", ReasonLeaderDeleted},
		{"leader whose log lost the body (LocalNotHeld)", with(onLeader(leader, 90, 10, f2), func(in *RouteInput) { in.Local = LocalNotHeld }), "n2", ReasonLeaderDeleted},
		{"leader whose log lost the body, no follower has it", with(onLeader(leader, 90, 10, NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, First: 95}), func(in *RouteInput) { in.Local = LocalNotHeld }), "n1", ReasonFollowersBehind},
		{"unhealthy (dead) follower: the loaded leader keeps the reader", onLeader(loaded, 90, 10, NodeView{ID: "n2", Addr: "a2", Applied: 100}), "n1", ReasonNoFollower},
		{"no follower at all: a cold reader stays", onLeader(leader, 90, 5000), "n1", ReasonNoFollower},
		{"follower with no address is skipped", onLeader(loaded, 90, 10, NodeView{ID: "n2", Healthy: true, Applied: 100}), "n1", ReasonNoFollower},
		{"a loaded follower busier than the leader is skipped", onLeader(loaded, 90, 10, NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, Loaded: true, Load: 1.5}), "n1", ReasonNoFollower},
		{"a loaded follower less busy than the leader still helps", onLeader(loaded, 90, 10, NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, Loaded: true, Load: 0.85}), "n2", ReasonLeaderLoaded},
		{"below the retained minimum the leader answers itself", with(onLeader(loaded, 90, 10, f2), func(in *RouteInput) { in.Local = LocalBelowMin }), "n1", ReasonOffsetMoved},

		// A follower.
		{"follower keeps a reader it can serve", onFollower(f2, leader, 90), "n2", ReasonFollowerServes},
		{"follower keeps a reader at the tail while the leader is loaded", with(onFollower(f2, loaded, 100), func(in *RouteInput) { in.AtTail = true }), "n2", ReasonFollowerServes},
		{"follower returns a caught-up reader to an idle leader", with(onFollower(f2, leader, 100), func(in *RouteInput) { in.AtTail = true }), "n1", ReasonCaughtUp},
		{"lagging follower returns the reader", with(onFollower(f2, loaded, 90), func(in *RouteInput) { in.SelfLag = 50 }), "n1", ReasonFollowerLagging},
		{"rule 2: follower that has not applied the offset returns the reader", onFollower(behind(f2, 80), loaded, 90), "n1", ReasonNotApplied},
		{"follower without the topic yet", with(onFollower(f2, loaded, 0), func(in *RouteInput) { in.Local = LocalNoTopic }), "n1", ReasonNotApplied},
		{"follower behind the offset (past its end)", with(onFollower(f2, loaded, 0), func(in *RouteInput) { in.Local = LocalPastEnd }), "n1", ReasonNotApplied},
		{"follower below its minimum", with(onFollower(f2, loaded, 0), func(in *RouteInput) { in.Local = LocalBelowMin }), "n1", ReasonNotHeld},
		{"follower whose log lost the body", with(onFollower(f2, loaded, 90), func(in *RouteInput) { in.Local = LocalNotHeld }), "n1", ReasonNotHeld},
		{"follower that indexes a body below its first index", onFollower(NodeView{ID: "n2", Addr: "a2", Applied: 100, First: 95}, leader, 90), "n1", ReasonNotHeld},
		{"damaged follower sends the reader to the leader", with(onFollower(f2, leader, 90), func(in *RouteInput) { in.Local = LocalDamaged }), "n1", ReasonDamaged},
		{"follower with no leader serves what it has", onFollower(f2, NodeView{}, 90), "n2", ReasonNoLeader},
		{"follower with no leader and nothing to serve names no node", with(onFollower(f2, NodeView{}, 0), func(in *RouteInput) { in.Local = LocalPastEnd }), "-", ReasonNoLeader},
	}
	seen := map[Reason]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Suggest(c.in)
			seen[got.Reason] = true
			if got.Reason != c.wantReason {
				t.Fatalf("reason %s, want %s (%+v)", got.Reason, c.wantReason, got)
			}
			switch {
			case c.wantNode == "-" && (got.NodeID != "" || got.Addr != ""):
				t.Fatalf("names node %q %q, want none", got.NodeID, got.Addr)
			case c.wantNode != "-" && got.NodeID != c.wantNode:
				t.Fatalf("node %q, want %q", got.NodeID, c.wantNode)
			case c.wantNode != "-" && got.Addr == "":
				t.Fatalf("suggestion without an address: %+v", got)
			}
		})
	}
	for _, r := range Reasons() {
		if !seen[r] {
			t.Errorf("no case yields reason %s", r)
		}
	}
}

// TestReasonNames: every reason has a distinct lower-case name (a metric
// label) and a sentence.
func TestReasonNames(t *testing.T) {
	names := map[string]bool{}
	for _, r := range Reasons() {
		n := r.String()
		if n == "" || n == "unknown" || strings.ToLower(n) != n || strings.ContainsAny(n, " -") || names[n] {
			t.Errorf("reason %d: bad or repeated name %q", r, n)
		}
		names[n] = true
		if r.Text() == "" {
			t.Errorf("reason %s has no text", n)
		}
	}
	if Reason(99).String() != "unknown" {
		t.Error("out-of-range reason is not unknown")
	}
}

// TestSuggestSpreadsConsumers: readers of a topic's queues are spread
// evenly over the followers, round robin by queue, and a queue's readers
// stick to one follower.
func TestSuggestSpreadsConsumers(t *testing.T) {
	in := RouteInput{SelfIsLeader: true, Self: NodeView{ID: "n1", Addr: "a1", Applied: 9}, BehindBytes: 10, ColdBytes: 1, Topic: "orders", MaxLag: 100,
		Followers: []NodeView{{ID: "n3", Addr: "a3", Healthy: true, Applied: 9}, {ID: "n2", Addr: "a2", Healthy: true, Applied: 9}}}
	seen := map[string]int{}
	prev := ""
	for q := int32(0); q < 100; q++ {
		in.Queue = q
		first := Suggest(in).NodeID
		if again := Suggest(in).NodeID; again != first {
			t.Fatalf("queue %d moved from %s to %s", q, first, again)
		}
		if first == prev {
			t.Fatalf("queues %d and %d both go to %s: not round robin", q-1, q, first)
		}
		prev = first
		seen[first]++
	}
	if seen["n2"] != 50 || seen["n3"] != 50 {
		t.Fatalf("unbalanced: %v", seen)
	}
}
