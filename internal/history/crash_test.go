package history

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/raftlog"
)

// crashHistory is handHistory with the last op (w1 seq 5, acknowledged at
// 910 ms, the two newest messages of queue 1) gone from the group: from
// the final log, every node, the disk, and delivered before it went.
func crashHistory(durability string, crashes ...MajorityCrash) *History {
	h := withDisk(handHistory())
	last := h.Ops[len(h.Ops)-1]
	h.Final[1] = h.Final[1][:len(h.Final[1])-len(last.Messages)]
	for n := range h.Nodes {
		h.Nodes[n] = copyLog(h.Final)
	}
	for _, a := range last.Acks {
		delete(h.Disk, a.ID)
	}
	for i := range h.Deliveries { // received just after the ack
		if d := &h.Deliveries[i]; d.Queue == 1 && d.Offset >= uint64(len(h.Final[1])) {
			d.At = last.Complete + 5*time.Millisecond
		}
	}
	h.Durability = durability
	h.MajorityCrashes = crashes
	return h
}

func TestCheckLossAroundMajorityCrash(t *testing.T) {
	const ackedAt = 910 * time.Millisecond
	crash := func(at, bound, recovered time.Duration) MajorityCrash {
		return MajorityCrash{Nodes: []string{"n1", "n2"}, At: at, Bound: bound, Recovered: recovered}
	}
	for _, tc := range []struct {
		name       string
		durability string
		crashes    []MajorityCrash
		ok         bool
	}{
		{"quorum-memory, acknowledged inside the window before a majority crash", raftlog.QuorumMemory,
			[]MajorityCrash{crash(time.Second, 200*time.Millisecond, 1500*time.Millisecond)}, true},
		{"quorum-memory, acknowledged before the window of a majority crash", raftlog.QuorumMemory,
			[]MajorityCrash{crash(time.Second, 50*time.Millisecond, 1500*time.Millisecond)}, false},
		{"quorum-memory, acknowledged after the group recovered from a majority crash", raftlog.QuorumMemory,
			[]MajorityCrash{crash(800*time.Millisecond, 200*time.Millisecond, 900*time.Millisecond)}, false},
		{"quorum-memory, only a minority crashed", raftlog.QuorumMemory, nil, false},
		{"quorum-fsync, a majority crash", raftlog.QuorumFsync,
			[]MajorityCrash{crash(time.Second, 200*time.Millisecond, 1500*time.Millisecond)}, false},
		{"durability unset is quorum-fsync", "",
			[]MajorityCrash{crash(time.Second, 200*time.Millisecond, 1500*time.Millisecond)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := crashHistory(tc.durability, tc.crashes...)
			if got := h.Ops[len(h.Ops)-1].Complete; got != ackedAt {
				t.Fatalf("the lost op was acknowledged at %s, the cases assume %s", got, ackedAt)
			}
			r := Check(h)
			if r.OK() != tc.ok {
				t.Fatalf("OK=%v, want %v: %s %v", r.OK(), tc.ok, r.Summary(), r.Violations)
			}
			if !tc.ok {
				if r.Counts[VLost] != 2 || r.Lost != 2 || r.CrashLost != 0 {
					t.Fatalf("want 2 lost messages and none allowed: %s", r.Summary())
				}
				return
			}
			if r.Lost != 0 || r.CrashLost != 2 || r.CrashDeliveries != 2 {
				t.Fatalf("want 2 messages lost in the crash and their 2 deliveries allowed: %s", r.Summary())
			}
			if want := ackedAt - time.Second; r.CrashLostFirst != want || r.CrashLostLast != want {
				t.Fatalf("lost messages acked %s..%s around the crash, want %s", r.CrashLostFirst, r.CrashLostLast, want)
			}
		})
	}
}

// A majority crash excuses a lost message, never a misplaced or
// duplicated one.
func TestCheckMajorityCrashExcusesNoMisplacedOrDuplicate(t *testing.T) {
	c := MajorityCrash{Nodes: []string{"n1", "n2"}, At: time.Second, Bound: 200 * time.Millisecond, Recovered: 1500 * time.Millisecond}
	h := crashHistory(raftlog.QuorumMemory, c)
	// The survivor of the lost op: its own copy sits twice.
	dup := h.Final[1][len(h.Final[1])-1]
	dup.Offset++
	h.Final[1] = append(h.Final[1], dup)
	for n := range h.Nodes {
		h.Nodes[n] = copyLog(h.Final)
	}
	r := Check(h)
	if r.Counts[VDuplicate] == 0 {
		t.Fatalf("a duplicate after a majority crash passed: %s", r.Summary())
	}

	h = crashHistory(raftlog.QuorumMemory, c)
	// An op acknowledged in the window that survived, at another offset
	// than its ack said.
	op := &h.Ops[len(h.Ops)-2] // w0 seq 5, acknowledged at 810 ms, queue 0
	op.Acks[1].Offset++
	r = Check(h)
	if r.Counts[VMisplaced]+r.Counts[VAckPosition] == 0 {
		t.Fatalf("a misplaced message after a majority crash passed: %s", r.Summary())
	}
}

// A node that kept entries a majority crash took from the group may serve
// them after the group recovered, until it reports that raft replaced
// them; after that report, or from a node that reported none, such a
// delivery is a violation.
func TestCheckCrashDeliveriesUntilTheServingNodesCut(t *testing.T) {
	c := MajorityCrash{Nodes: []string{"n1", "n2"}, At: time.Second, Bound: 200 * time.Millisecond, Recovered: 1500 * time.Millisecond}
	for _, tc := range []struct {
		name string
		cuts []NodeCut
		ok   bool
	}{
		{"served before the serving node reported its cut", []NodeCut{{Node: "n3", At: 3 * time.Second}}, true},
		{"served after the serving node reported its cut", []NodeCut{{Node: "n3", At: 1800 * time.Millisecond}}, false},
		{"served by a node that reported no cut", []NodeCut{{Node: "n1", At: 3 * time.Second}}, false},
		{"served by a node whose only cut came before the crash", []NodeCut{{Node: "n3", At: 500 * time.Millisecond}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := crashHistory(raftlog.QuorumMemory, c)
			h.Cuts = tc.cuts
			late := 0
			for i := range h.Deliveries {
				if d := &h.Deliveries[i]; d.Queue == 1 && d.Offset >= uint64(len(h.Final[1])) {
					d.At, d.ServedBy, d.ServedByLeader = 2*time.Second, "n3", false
					late++
				}
			}
			if late == 0 {
				t.Fatal("the history has no delivery of the lost entries")
			}
			r := Check(h)
			if r.OK() != tc.ok {
				t.Fatalf("OK=%v, want %v: %s %v", r.OK(), tc.ok, r.Summary(), r.Violations)
			}
			if !tc.ok && r.Counts[VDelivery] != late {
				t.Fatalf("want %d delivery violations: %s", late, r.Summary())
			}
		})
	}
}
