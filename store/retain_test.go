package store

import (
	"bytes"
	"io"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/raftmq/raftmq/store/queueindex"
)

// replay applies src's entries after l's last one, up to index to.
func (l *logged) replay(src *logged, to uint64) {
	l.t.Helper()
	for l.idx < to {
		src.log.mu.Lock()
		data := src.log.data[l.idx+1]
		src.log.mu.Unlock()
		if e, ok := l.apply(data).(error); ok {
			l.t.Fatalf("entry %d: %v", l.idx, e)
		}
	}
}

// restore restores sink, a snapshot at index at, into l's FSM.
func (l *logged) restore(sink *memSink, at uint64) {
	l.t.Helper()
	if err := l.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		l.t.Fatal(err)
	}
	l.idx = at
}

// ranges is the range of each of topic t's queues.
func (l *logged) ranges() []QueueRange {
	l.t.Helper()
	ti, err := l.f.Topic("t")
	if err != nil {
		l.t.Fatal(err)
	}
	return ti.Queues
}

// minsAt is each queue's minimum after a cut below log index below, from
// the locations of a node whose index holds every queue from an entry
// below below on: the first message of an entry at or above below, or the
// queue's end.
func minsAt(l *logged, below uint64) []uint64 {
	l.t.Helper()
	var out []uint64
	for q := range int32(len(l.ranges())) {
		locs, rng, err := l.locations(q)
		if err != nil || (rng.Held != rng.Min && (len(locs) == 0 || locs[0].LogIndex >= below)) {
			l.t.Fatalf("queue %d: %+v %v: want it held from below log index %d", q, rng, err, below)
		}
		m := rng.Max
		for _, loc := range locs {
			if loc.LogIndex >= below {
				m = loc.Base
				break
			}
		}
		out = append(out, m)
	}
	return out
}

func mins(rs []QueueRange) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.Min)
	}
	return out
}

// installed is a group of two nodes: lead applied every entry (its index
// holds every queue whole) and inst installed lead's snapshot at index
// 301, so its index holds what the entries after it store; both applied
// 601 entries to topic "t" of 3 queues.
func installed(t *testing.T) (lead, inst *logged) {
	lead, inst = newLogged(t), newLogged(t)
	lead.apply(EncodeCreateTopic("t", 3, false))
	var seq uint64
	lead.fill(300, &seq)
	inst.restore(persistSnapshot(t, lead.f), lead.idx)
	lead.fill(300, &seq)
	inst.replay(lead, lead.idx)
	for q, r := range inst.ranges() {
		if r.Held <= r.Min {
			t.Fatalf("queue %d of the node that installed the snapshot: %+v, want its index to lack the head", q, r)
		}
	}
	return lead, inst
}

// A retention cut below the first entry a node's index holds (the node
// installed a snapshot) moves every node's queue minimums alike, to the
// true minimums: the leader decides them from its index and the command
// carries them, where each node's own index would put that node's at its
// index's floor, above the messages the group still holds.
func TestRetainMinimumsAgreeWhenAnIndexLacksItsHead(t *testing.T) {
	lead, inst := installed(t)
	const below = 200 // below the snapshot (301)
	want := minsAt(lead, below)
	cut := EncodeRetainMins(below, lead.f.RetainMins(below))
	for _, l := range []*logged{lead, inst} {
		if res := l.apply(cut); res != nil {
			t.Fatalf("retain: %v", res)
		}
	}
	if got := mins(lead.ranges()); !reflect.DeepEqual(got, want) {
		t.Fatalf("the leader's minimums %v, want %v", got, want)
	}
	if got := mins(inst.ranges()); !reflect.DeepEqual(got, want) {
		t.Fatalf("the minimums of the node that installed a snapshot %v, the leader's %v", got, want)
	}
	// A snapshot of either carries the same minimums.
	f2, _ := snapshotRoundTrip(t, inst.f)
	defer f2.Close()
	if ti, _ := f2.Topic("t"); !reflect.DeepEqual(mins(ti.Queues), want) {
		t.Fatalf("after a snapshot round trip: %v, want %v", mins(ti.Queues), want)
	}
}

// A leader whose index lacks a queue's head below the cut cannot tell the
// queue's new minimum: it leaves the queue out and every node keeps its
// minimum (too low is moved by a later cut; too high would hide messages).
// Once a cut passes the first entry its index holds whole (the snapshot it
// installed, or when that is not known, its first record), it tells them.
func TestRetainLeaderLackingTheHeadLeavesTheQueueOut(t *testing.T) {
	for _, heldAbove := range []string{"known", "not known"} {
		t.Run(heldAbove, func(t *testing.T) {
			lead, inst := installed(t)
			if heldAbove == "not known" {
				inst.f.mu.Lock()
				for _, q := range inst.f.topics["t"].queues {
					q.heldAbove = 0
				}
				inst.f.mu.Unlock()
			}
			before := mins(lead.ranges())
			mins200 := inst.f.RetainMins(200)
			if len(mins200.Topics) != 0 {
				t.Fatalf("minimums listed by a leader whose index starts above the cut: %+v", mins200.Topics)
			}
			cut := EncodeRetainMins(200, mins200)
			for _, l := range []*logged{lead, inst} {
				if res := l.apply(cut); res != nil {
					t.Fatalf("retain: %v", res)
				}
				if got := mins(l.ranges()); !reflect.DeepEqual(got, before) {
					t.Fatalf("minimums %v after a cut that listed none, were %v", got, before)
				}
			}
			const below = 450 // above the snapshot (301) and the first records after it
			want := minsAt(lead, below)
			cut = EncodeRetainMins(below, inst.f.RetainMins(below))
			for _, l := range []*logged{lead, inst} {
				if res := l.apply(cut); res != nil {
					t.Fatalf("retain: %v", res)
				}
				if got := mins(l.ranges()); !reflect.DeepEqual(got, want) {
					t.Fatalf("minimums %v after a cut below %d, want %v", got, below, want)
				}
			}
		})
	}
}

// A retain written by an older version carries no minimums: each node
// takes them from its own index, as before, so that a log replays into
// the state it made then (a node whose index lacks the head moves to its
// index's floor).
func TestRetainWithoutMinimumsAppliesAsBefore(t *testing.T) {
	lead, inst := installed(t)
	want := minsAt(lead, 200)
	for _, l := range []*logged{lead, inst} {
		if res := l.apply(EncodeRetain(200)); res != nil {
			t.Fatalf("retain: %v", res)
		}
	}
	if got := mins(lead.ranges()); !reflect.DeepEqual(got, want) {
		t.Fatalf("the leader's minimums %v, want %v", got, want)
	}
	for q, r := range inst.ranges() {
		if r.Min != r.Held || r.Min <= want[q] {
			t.Fatalf("queue %d of the node that installed a snapshot: %+v, want its minimum at its index's floor, above %d", q, r, want[q])
		}
	}
	// A retain with minimums of topics gone or created since its leader
	// looked changes nothing of them.
	stale := &RetainMins{At: 1, Topics: []TopicMins{{Topic: "gone", Mins: []uint64{5}}, {Topic: "t", Mins: []uint64{1 << 40, 1 << 40, 1 << 40}}}}
	lead.apply(EncodeDeleteTopic("t"))
	lead.apply(EncodeCreateTopic("t", 3, false))
	if res := lead.apply(EncodeRetainMins(lead.idx, stale)); res != nil {
		t.Fatal(res)
	}
	if got := mins(lead.ranges()); !reflect.DeepEqual(got, []uint64{0, 0, 0}) {
		t.Fatalf("a recreated topic's minimums %v after a retain listing its predecessor", got)
	}
}

// A node that restarts from a snapshot older than the last cut, over a
// queue index that lost its files, cannot rebuild the queue's head at
// once: its log is deleted up to the cut, and its restored floor is below
// that. Once the cut applies again it rebuilds the head from the log, and
// holds the queue from the group's minimum, every offset where the
// leader has it.
func TestRestartBelowTheLastCutRebuildsTheHeadOnceTheCutApplies(t *testing.T) {
	lead, node := newLogged(t), newLogged(t)
	lead.apply(EncodeCreateTopic("t", 3, false))
	var seq uint64
	lead.fill(300, &seq)
	node.replay(lead, lead.idx)
	sink := persistSnapshot(t, node.f) // at 301, floor 0
	const below = 250
	lead.apply(EncodeRetainMins(below, lead.f.RetainMins(below))) // 302
	lead.fill(100, &seq)
	node.replay(lead, lead.idx)
	// The node deletes its log below the cut (its snapshot covers it) and
	// stops; its index files of queue 0 are lost.
	node.log.mu.Lock()
	node.log.first = below
	node.log.mu.Unlock()
	if err := node.f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range node.files(0) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	ix, err := queueindex.Open(node.dir, rebuildOpts)
	if err != nil {
		t.Fatal(err)
	}
	node.f = newFSM(node.f.log, ix)
	node.f.startSnap = 301
	node.f.StartRebuilds(node.log)
	node.restore(sink, 301)
	// The head's rebuild is refused: the restored floor (0) is below the
	// log's first entry.
	deadline := time.Now().Add(10 * time.Second)
	for {
		node.f.mu.RLock()
		later := node.f.topics["t"].queues[0].headLater.Load()
		node.f.mu.RUnlock()
		if later {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the head's rebuild was not refused in 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	node.replay(lead, lead.idx)
	node.waitRebuilt(1)
	for q := range int32(3) {
		want, wrng, err := lead.locations(q)
		if err != nil {
			t.Fatal(err)
		}
		got, grng, err := node.locations(q)
		if err != nil {
			t.Fatal(err)
		}
		if grng != wrng || !reflect.DeepEqual(got, want) {
			t.Fatalf("queue %d: range %+v, the leader's %+v; same locations: %v", q, grng, wrng, reflect.DeepEqual(got, want))
		}
	}
}
