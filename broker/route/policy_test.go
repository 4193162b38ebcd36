package route

import (
	"strings"
	"testing"
)

// TestSuggest covers every rule of Suggest: each answer and each reason at
// least once, and the edge cases of the follower set (none, all lagging,
// dead, data below a follower's log floor).
func TestSuggest(t *testing.T) {
	leader := NodeView{ID: "n1", Addr: "a1", Healthy: true, Applied: 100, Load: 0.2}
	loaded := leader
	loaded.Loaded, loaded.Load = true, 0.9
	f2 := NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, Load: 0.3}
	f3 := NodeView{ID: "n3", Addr: "a3", Healthy: true, Applied: 100, Load: 0.3}
	behind := func(f NodeView, applied uint64) NodeView { f.Applied = applied; return f }
	floor := func(f NodeView, first uint64) NodeView { f.First = first; return f }
	dead := func(f NodeView) NodeView { f.Healthy = false; return f }
	const cold = 1000
	onLeader := func(self NodeView, need uint64, behindBytes uint64, fs ...NodeView) Input {
		return Input{SelfIsLeader: true, Self: self, Followers: fs, NeedIndex: need, BehindBytes: behindBytes, ColdBytes: cold, MaxLag: 20, Topic: "t"}
	}
	onFollower := func(self, l NodeView, need uint64) Input {
		return Input{Self: self, Leader: l, NeedIndex: need, ColdBytes: cold, MaxLag: 20}
	}
	with := func(in Input, f func(*Input)) Input { f(&in); return in }
	local := func(in Input, l Local) Input { in.Local = l; return in }
	atTail := func(in Input) Input { in.AtTail = true; return in }
	readsOnFollowers := func(in *Input) { in.ReadsOnFollowers = true }
	const (
		serve   = AnswerServe
		retry   = AnswerRetryElsewhere
		moved   = AnswerOffsetMoved
		unavail = AnswerUnavailable
	)
	cases := []struct {
		name       string
		in         Input
		wantAnswer Answer
		wantNode   string // "-": no node
		wantReason Reason
	}{
		// The leader.
		{"leader: hot reader stays on an idle leader", onLeader(leader, 90, 10, f2, f3), serve, "n1", ReasonLeaderNotLoaded},
		{"leader: idle leader without followers keeps a hot reader", onLeader(leader, 90, 10), serve, "n1", ReasonLeaderNotLoaded},
		{"rule 1: loaded leader sends a reader to a follower that has the data", onLeader(loaded, 90, 10, f2), serve, "n2", ReasonLeaderLoaded},
		{"rule 1: loaded leader skips a follower without the data", onLeader(loaded, 90, 10, behind(f2, 50), f3), serve, "n3", ReasonLeaderLoaded},
		{"rule 2: loaded leader keeps a reader whose burst no follower applied yet", onLeader(loaded, 100, 0, behind(f2, 95), behind(f3, 98)), serve, "n1", ReasonFollowersBehind},
		{"rule 2: a reader at the tail of a loaded leader stays while followers trail", atTail(onLeader(loaded, 100, 0, behind(f2, 99))), serve, "n1", ReasonFollowersBehind},
		{"loaded leader with a lagging follower uses the other one", onLeader(loaded, 60, 10, behind(f2, 70), f3), serve, "n3", ReasonLeaderLoaded},
		{"loaded leader with only a lagging follower keeps the reader", onLeader(loaded, 60, 10, behind(f2, 70)), serve, "n1", ReasonFollowersBehind},
		{"loaded leader whose followers all lag more than MaxLag keeps the reader", onLeader(loaded, 60, 10, behind(f2, 70), behind(f3, 79)), serve, "n1", ReasonFollowersBehind},
		{"a follower exactly MaxLag behind still serves", onLeader(loaded, 60, 10, behind(f2, 80)), serve, "n2", ReasonLeaderLoaded},
		{"cold read goes to a follower (RocketMQ's rule)", onLeader(leader, 90, 5000, f2), serve, "n2", ReasonColdRead},
		{"just at the cold threshold is not cold", onLeader(leader, 90, cold, f2), serve, "n1", ReasonLeaderNotLoaded},
		{"cold read on a loaded leader says loaded", onLeader(loaded, 90, 5000, f2), serve, "n2", ReasonLeaderLoaded},
		{"cold read skips a follower whose log floor is above the data", onLeader(leader, 90, 5000, floor(f2, 95), f3), serve, "n3", ReasonColdRead},
		{"cold read with every follower's floor above the data stays", onLeader(leader, 90, 5000, floor(f2, 95), floor(f3, 91)), serve, "n1", ReasonFollowersBehind},
		{"a follower whose floor is the needed entry holds it", onLeader(leader, 90, 5000, floor(f2, 90)), serve, "n2", ReasonColdRead},
		{"leader without the body sends the reader where it is", onLeader(floor(leader, 95), 90, 10, floor(f2, 95), f3), serve, "n3", ReasonLeaderDeleted},
		{"leader whose log lost the body (LocalNotHeld) sends the reader away", local(onLeader(leader, 90, 10, f2), LocalNotHeld), retry, "n2", ReasonLeaderDeleted},
		{"leader whose log lost the body, no follower has it: unavailable", local(onLeader(leader, 90, 10, floor(f2, 95)), LocalNotHeld), unavail, "n1", ReasonFollowersBehind},
		{"leader whose log lost the body, no follower at all: unavailable", local(onLeader(leader, 90, 10), LocalNotHeld), unavail, "n1", ReasonNoFollower},
		{"dead follower: the loaded leader keeps the reader", onLeader(loaded, 90, 10, dead(f2)), serve, "n1", ReasonNoFollower},
		{"dead follower is skipped for a live one", onLeader(loaded, 90, 10, dead(f2), f3), serve, "n3", ReasonLeaderLoaded},
		{"no follower at all: a cold reader stays", onLeader(leader, 90, 5000), serve, "n1", ReasonNoFollower},
		{"follower with no address is skipped", onLeader(loaded, 90, 10, NodeView{ID: "n2", Healthy: true, Applied: 100}), serve, "n1", ReasonNoFollower},
		{"a loaded follower busier than the leader is skipped", onLeader(loaded, 90, 10, NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, Loaded: true, Load: 1.5}), serve, "n1", ReasonNoFollower},
		{"a loaded follower less busy than the leader still helps", onLeader(loaded, 90, 10, NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 100, Loaded: true, Load: 0.85}), serve, "n2", ReasonLeaderLoaded},
		{"below the retained minimum the leader answers offset moved", local(onLeader(loaded, 90, 10, f2), LocalBelowMin), moved, "n1", ReasonOffsetMoved},
		{"the leader without the topic: not found", local(onLeader(leader, 0, 0, f2), LocalNoTopic), AnswerNotFound, "-", ReasonUnspecified},
		{"past the leader's end: out of range", local(onLeader(leader, 0, 0, f2), LocalPastEnd), AnswerOutOfRange, "-", ReasonUnspecified},
		{"reads on followers: the leader sends a hot reader to a follower that has the data", with(onLeader(leader, 90, 10, behind(f2, 85), f3), readsOnFollowers), serve, "n3", ReasonFollowerReads},
		{"reads on followers: a loaded leader says loaded", with(onLeader(loaded, 90, 10, f2), readsOnFollowers), serve, "n2", ReasonLeaderLoaded},
		{"reads on followers: the leader keeps a reader no follower has the data of", with(onLeader(leader, 99, 10, behind(f2, 95)), readsOnFollowers), serve, "n1", ReasonFollowersBehind},
		{"reads on followers: the leader keeps a reader when no follower is healthy", with(onLeader(leader, 90, 10, dead(f2)), readsOnFollowers), serve, "n1", ReasonNoFollower},
		{"a damaged leader serves nothing and names no node", local(onLeader(leader, 90, 10, f2), LocalDamaged), unavail, "-", ReasonDamaged},

		// A follower.
		{"follower keeps a reader it can serve", onFollower(f2, leader, 90), serve, "n2", ReasonFollowerServes},
		{"follower keeps a reader at the tail while the leader is loaded", atTail(onFollower(f2, loaded, 100)), serve, "n2", ReasonFollowerServes},
		{"follower returns a caught-up reader to an idle leader", atTail(onFollower(f2, leader, 100)), serve, "n1", ReasonCaughtUp},
		{"lagging follower returns the reader", with(onFollower(f2, loaded, 90), func(in *Input) { in.SelfLag = 50 }), serve, "n1", ReasonFollowerLagging},
		{"a follower exactly MaxLag behind keeps the reader", with(onFollower(f2, loaded, 90), func(in *Input) { in.SelfLag = 20 }), serve, "n2", ReasonFollowerServes},
		{"rule 2: follower that has not applied the offset returns the reader", onFollower(behind(f2, 80), loaded, 90), serve, "n1", ReasonNotApplied},
		{"follower without the topic yet", local(onFollower(f2, loaded, 0), LocalNoTopic), retry, "n1", ReasonNotApplied},
		{"follower behind the offset (past its end)", local(onFollower(f2, loaded, 0), LocalPastEnd), retry, "n1", ReasonNotApplied},
		{"follower below its minimum never says offset moved", local(onFollower(f2, loaded, 0), LocalBelowMin), retry, "n1", ReasonNotHeld},
		{"follower whose log lost the body", local(onFollower(f2, loaded, 90), LocalNotHeld), retry, "n1", ReasonNotHeld},
		{"follower whose log floor is above the next entry", onFollower(floor(f2, 95), leader, 90), serve, "n1", ReasonNotHeld},
		{"damaged follower sends the reader to the leader", local(onFollower(f2, leader, 90), LocalDamaged), retry, "n1", ReasonDamaged},
		{"damaged follower with no leader known: unavailable", local(onFollower(f2, NodeView{}, 90), LocalDamaged), unavail, "-", ReasonNoLeader},
		{"damaged follower that thinks it leads: unavailable", local(onFollower(f2, f2, 90), LocalDamaged), unavail, "-", ReasonNoLeader},
		{"follower with no leader serves what it has", onFollower(f2, NodeView{}, 90), serve, "n2", ReasonNoLeader},
		{"follower whose leader has no address serves what it has", onFollower(f2, NodeView{ID: "n1"}, 90), serve, "n2", ReasonNoLeader},
		{"follower with no leader and nothing to serve names no node", local(onFollower(f2, NodeView{}, 0), LocalPastEnd), retry, "-", ReasonNoLeader},
	}
	reasons := map[Reason]bool{}
	answers := map[Answer]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Suggest(c.in)
			got := d.Suggestion
			reasons[got.Reason], answers[d.Answer] = true, true
			if d.Answer != c.wantAnswer {
				t.Fatalf("answer %d, want %d (%+v)", d.Answer, c.wantAnswer, d)
			}
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
		if !reasons[r] {
			t.Errorf("no case yields reason %s", r)
		}
	}
	for a := AnswerServe; a <= AnswerUnavailable; a++ {
		if !answers[a] {
			t.Errorf("no case yields answer %d", a)
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
	in := Input{SelfIsLeader: true, Self: NodeView{ID: "n1", Addr: "a1", Applied: 9}, BehindBytes: 10, ColdBytes: 1, Topic: "orders", MaxLag: 100,
		Followers: []NodeView{{ID: "n3", Addr: "a3", Healthy: true, Applied: 9}, {ID: "n2", Addr: "a2", Healthy: true, Applied: 9}}}
	seen := map[string]int{}
	prev := ""
	for q := int32(0); q < 100; q++ {
		in.Queue = q
		first := Suggest(in).Suggestion.NodeID
		if again := Suggest(in).Suggestion.NodeID; again != first {
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

// TestReadsOnFollowers: with ReadsOnFollowers (RocketMQ's pulls) the leader
// sends a consumer at the tail to a healthy follower at most MaxLag behind,
// whatever its load, and a consumer behind the tail to a healthy follower
// that has applied the entry it needs; a follower keeps either, so the
// leader holds no reader a follower can serve. It keeps one only when no
// follower has the data.
func TestReadsOnFollowers(t *testing.T) {
	leader := NodeView{ID: "n1", Addr: "a1", Healthy: true, Applied: 100, Load: 0.2}
	f2 := NodeView{ID: "n2", Addr: "a2", Healthy: true, Applied: 95, Load: 0.3}
	f3 := NodeView{ID: "n3", Addr: "a3", Healthy: true, Applied: 70, Load: 0.3}
	in := Input{SelfIsLeader: true, Self: leader, Followers: []NodeView{f2, f3}, NeedIndex: 100, AtTail: true, ColdBytes: 1000, MaxLag: 20, Topic: "t", ReadsOnFollowers: true}
	if d := Suggest(in); d.Answer != AnswerServe || d.Suggestion.NodeID != "n2" || d.Suggestion.Reason != ReasonCaughtUp {
		t.Fatalf("leader, consumer at the tail: %+v; want served, sent to n2 (n3 lags more than MaxLag)", d)
	}
	in.Followers = []NodeView{f3}
	if d := Suggest(in); d.Suggestion.NodeID != "n1" {
		t.Fatalf("leader whose only follower lags: %+v; want it keeps the consumer", d)
	}
	in.Followers, in.AtTail, in.NeedIndex = []NodeView{f2, f3}, false, 90
	if d := Suggest(in); d.Answer != AnswerServe || d.Suggestion.NodeID != "n2" || d.Suggestion.Reason != ReasonFollowerReads {
		t.Fatalf("leader, consumer behind: %+v; want served, sent to n2, the follower that has applied index 90 (n3 lags)", d)
	}
	in.NeedIndex = 98
	if d := Suggest(in); d.Suggestion.NodeID != "n1" || d.Suggestion.Reason != ReasonFollowersBehind {
		t.Fatalf("leader, consumer behind what any follower applied: %+v; want it stays (followers behind)", d)
	}
	in.NeedIndex, in.Self.Loaded = 90, true
	if d := Suggest(in); d.Suggestion.NodeID != "n2" || d.Suggestion.Reason != ReasonLeaderLoaded {
		t.Fatalf("loaded leader, consumer behind: %+v; want sent to n2 (leader loaded)", d)
	}
	in.Self.Loaded, in.ReadsOnFollowers = false, false
	if d := Suggest(in); d.Suggestion.NodeID != "n1" || d.Suggestion.Reason != ReasonLeaderNotLoaded {
		t.Fatalf("leader without ReadsOnFollowers, consumer behind: %+v; want it stays (hot data, leader not loaded)", d)
	}
	behind := Input{Self: f2, Leader: leader, NeedIndex: 90, SelfLag: 5, ColdBytes: 1000, MaxLag: 20, ReadsOnFollowers: true}
	if d := Suggest(behind); d.Answer != AnswerServe || d.Suggestion.NodeID != "n2" || d.Suggestion.Reason != ReasonFollowerServes {
		t.Fatalf("follower, consumer behind the tail: %+v; want kept here", d)
	}
	fin := Input{Self: f2, Leader: leader, NeedIndex: 100, AtTail: true, SelfLag: 5, ColdBytes: 1000, MaxLag: 20, ReadsOnFollowers: true}
	if d := Suggest(fin); d.Answer != AnswerServe || d.Suggestion.NodeID != "n2" || d.Suggestion.Reason != ReasonFollowerServes {
		t.Fatalf("follower, consumer at the tail: %+v; want kept here", d)
	}
	fin.ReadsOnFollowers = false
	if d := Suggest(fin); d.Suggestion.NodeID != "n1" {
		t.Fatalf("follower without ReadsOnFollowers, consumer at the tail: %+v; want sent to the leader", d)
	}
	fin.ReadsOnFollowers, fin.SelfLag = true, 50
	if d := Suggest(fin); d.Suggestion.NodeID != "n1" || d.Suggestion.Reason != ReasonFollowerLagging {
		t.Fatalf("lagging follower, consumer at the tail: %+v; want sent to the leader", d)
	}
}
