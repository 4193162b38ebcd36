package broker

import "testing"

func TestSuggest(t *testing.T) {
	leader := NodeView{ID: "n1", Addr: "a1", Healthy: true, Applied: 100}
	f2 := NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100}
	f3 := NodeView{ID: "n3", Addr: "a3", Healthy: true, Applied: 100}
	loaded := leader
	loaded.Loaded = true
	const cold = 1000
	cases := []struct {
		name       string
		in         RouteInput
		wantNode   string
		wantReason string
	}{
		{"leader: hot reader stays", RouteInput{SelfIsLeader: true, Self: leader, Followers: []NodeView{f2, f3}, NeedIndex: 90, BehindBytes: 10, ColdBytes: cold},
			"n1", ReasonHot},
		{"leader: cold reader goes to a follower", RouteInput{SelfIsLeader: true, Self: leader, Followers: []NodeView{f2, f3}, NeedIndex: 90, BehindBytes: 5000, ColdBytes: cold, Topic: "t"},
			"", ReasonCold},
		{"leader: loaded leader sends hot reader away", RouteInput{SelfIsLeader: true, Self: loaded, Followers: []NodeView{f2}, NeedIndex: 90, ColdBytes: cold},
			"n2", ReasonLoaded},
		{"leader: follower that lacks the data is skipped", RouteInput{SelfIsLeader: true, Self: loaded, Followers: []NodeView{{ID: "n2", Addr: "a2", Healthy: true, Applied: 50}, f3}, NeedIndex: 90, ColdBytes: cold},
			"n3", ReasonLoaded},
		{"leader: unhealthy follower is skipped", RouteInput{SelfIsLeader: true, Self: loaded, Followers: []NodeView{{ID: "n2", Addr: "a2", Applied: 100}}, NeedIndex: 90, ColdBytes: cold},
			"n1", ReasonNoFollower},
		{"leader: loaded follower is skipped", RouteInput{SelfIsLeader: true, Self: loaded, Followers: []NodeView{{ID: "n2", Addr: "a2", Healthy: true, Loaded: true, Applied: 100}}, NeedIndex: 90, ColdBytes: cold},
			"n1", ReasonNoFollower},
		{"leader: follower with no address is skipped", RouteInput{SelfIsLeader: true, Self: loaded, Followers: []NodeView{{ID: "n2", Healthy: true, Applied: 100}}, NeedIndex: 90, ColdBytes: cold},
			"n1", ReasonNoFollower},
		{"leader: dead follower costs nothing", RouteInput{SelfIsLeader: true, Self: leader, Followers: nil, NeedIndex: 90, BehindBytes: 5000, ColdBytes: cold},
			"n1", ReasonNoFollower},
		{"follower: keeps a cold reader", RouteInput{Self: f2, Leader: leader, NeedIndex: 90, BehindBytes: 5000, ColdBytes: cold, MaxLag: 10},
			"n2", ReasonStayFollower},
		{"follower: caught-up reader returns to an idle leader", RouteInput{Self: f2, Leader: leader, NeedIndex: 100, AtTail: true, ColdBytes: cold, MaxLag: 10},
			"n1", ReasonCaughtUp},
		{"follower: caught-up reader stays while the leader is loaded", RouteInput{Self: f2, Leader: loaded, NeedIndex: 100, AtTail: true, ColdBytes: cold, MaxLag: 10},
			"n2", ReasonStayFollower},
		{"follower: lagging follower sends reader to the leader", RouteInput{Self: f2, Leader: loaded, NeedIndex: 90, SelfLag: 50, ColdBytes: cold, MaxLag: 10},
			"n1", ReasonLagging},
		{"follower: lacking the offset sends reader to the leader", RouteInput{Self: NodeView{ID: "n2", Addr: "a2", Applied: 80}, Leader: loaded, NeedIndex: 90, ColdBytes: cold, MaxLag: 100},
			"n1", ReasonMissing},
		{"leader: hot reader goes where the deleted body still is", RouteInput{SelfIsLeader: true, Self: NodeView{ID: "n1", Addr: "a1", Healthy: true, Applied: 100, First: 95}, Followers: []NodeView{{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, First: 95}, f3}, NeedIndex: 90, ColdBytes: cold},
			"n3", ReasonDeleted},
		{"leader: cold reader skips a follower without the body", RouteInput{SelfIsLeader: true, Self: leader, Followers: []NodeView{{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, First: 95}, f3}, NeedIndex: 90, BehindBytes: 5000, ColdBytes: cold},
			"n3", ReasonCold},
		{"follower: without the body sends the reader to the leader", RouteInput{Self: NodeView{ID: "n2", Addr: "a2", Applied: 100, First: 95}, Leader: leader, NeedIndex: 90, BehindBytes: 5000, ColdBytes: cold, MaxLag: 100},
			"n1", ReasonMissing},
		{"follower: no leader known keeps serving", RouteInput{Self: f2, NeedIndex: 90, ColdBytes: cold, MaxLag: 10},
			"n2", ReasonNoLeader},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Suggest(c.in)
			if got.Reason != c.wantReason {
				t.Fatalf("reason %q, want %q (%+v)", got.Reason, c.wantReason, got)
			}
			if c.wantNode != "" && got.NodeID != c.wantNode {
				t.Fatalf("node %q, want %q", got.NodeID, c.wantNode)
			}
			if got.NodeID != "" && got.Addr == "" {
				t.Fatalf("suggestion without an address: %+v", got)
			}
		})
	}
}

// TestSuggestSpreadsConsumers: cold readers of a topic's queues are spread
// evenly over the followers, round robin by queue, and a queue's readers
// stick to one follower.
func TestSuggestSpreadsConsumers(t *testing.T) {
	in := RouteInput{SelfIsLeader: true, Self: NodeView{ID: "n1", Addr: "a1"}, BehindBytes: 10, ColdBytes: 1, Topic: "orders",
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
