package store

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/queueindex"
)

func TestApplyAssignsDenseOffsetsPerQueue(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	res := h.produce(
		&raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: append(msgs(0, "a", "b"), msgs(1, "c")...)},
		&raftlog.Request{ProducerID: "p", Seq: 2, Topic: "t", Messages: msgs(0, "d")},
	)
	acks, _ := res[0].Acks([]uint32{0, 0, 1})
	if acks[0].Offset != 0 || acks[1].Offset != 1 || acks[2].Offset != 0 {
		t.Fatalf("acks %+v", acks)
	}
	if a, _ := res[1].Acks([]uint32{0}); a[0].Offset != 2 || a[0].ID() != raftlog.MessageID(2, 3) {
		t.Fatalf("second request ack %+v", a)
	}
	ti, _ := h.f.Topic("t")
	if ti.Queues[0].Max != 3 || ti.Queues[1].Max != 1 {
		t.Fatalf("ranges %+v", ti.Queues)
	}
	locs, _, err := h.f.Locate("t", 0, 1, 10)
	if err != nil || len(locs) != 1 || locs[0].Count != 3 || locs[0].LogIndex != 2 {
		t.Fatalf("locate %+v %v", locs, err)
	}
}

// The snapshot's size depends on topics and queues, not on the entries
// applied: the index records stay in the queue index.
func TestSnapshotSizeDoesNotGrowWithEntries(t *testing.T) {
	size := func(entries int) int {
		h := newHarness(t)
		h.mustMeta(EncodeCreateTopic("t", 4, false))
		for i := range entries {
			h.produce(&raftlog.Request{Topic: "t", Messages: msgs(uint32(i%4), "m")})
		}
		var buf bytes.Buffer
		snap, err := h.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := writeSnapshot(&buf, snap.(*fsmSnapshot).state); err != nil {
			t.Fatal(err)
		}
		return buf.Len()
	}
	small, large := size(10), size(20000)
	// The queues' ranges and the applied index are varints: a few bytes.
	if large > small+32 {
		t.Errorf("snapshot after 20,000 entries is %d bytes, after 10 %d: it grows with the entries", large, small)
	}
}

// Retain drops the index below a log index: each queue's minimum moves to
// its first remaining message (to its end when none remains), reads below
// it find nothing, offsets keep counting, and the floor survives a snapshot.
func TestRetainMovesQueueMinimums(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 3, false))                                                  // index 1
	h.produce(&raftlog.Request{Topic: "t", Messages: append(msgs(0, "a", "b"), msgs(1, "c")...)}) // 2
	h.produce(&raftlog.Request{Topic: "t", Messages: msgs(0, "d")})                               // 3
	h.produce(&raftlog.Request{Topic: "t", Messages: append(msgs(0, "e"), msgs(2, "f")...)})      // 4
	h.mustMeta(EncodeRetain(4))                                                                   // 5
	ti, _ := h.f.Topic("t")
	want := []QueueRange{{Min: 3, Max: 4, Held: 3}, {Min: 1, Max: 1, Held: 1}, {Min: 0, Max: 1, Held: 0}}
	if fmt.Sprint(ti.Queues) != fmt.Sprint(want) {
		t.Fatalf("ranges after retain below 4: %v, want %v", ti.Queues, want)
	}
	if locs, rng, err := h.f.Locate("t", 0, 1, 10); err != nil || len(locs) != 0 || rng.Min != 3 {
		t.Fatalf("locate below the minimum: %v %v %v", locs, rng, err)
	}
	if locs, _, _ := h.f.Locate("t", 0, 3, 10); len(locs) != 1 || locs[0].LogIndex != 4 {
		t.Fatalf("locate at the minimum: %v", locs)
	}
	if h.f.LogFloor() != 4 {
		t.Fatalf("floor %d", h.f.LogFloor())
	}
	// A lower or equal floor changes nothing; offsets go on from the end.
	h.mustMeta(EncodeRetain(2))
	res := h.produce(&raftlog.Request{Topic: "t", Messages: msgs(1, "g")})
	if a, _ := res[0].Acks([]uint32{1}); a[0].Offset != 1 {
		t.Fatalf("offset after retain: %+v", a)
	}
	if h.f.LogFloor() != 4 {
		t.Fatalf("floor went down to %d", h.f.LogFloor())
	}
	f2, _ := snapshotRoundTrip(t, h.f)
	if f2.LogFloor() != 4 || fmt.Sprint(f2.Topics()) != fmt.Sprint(h.f.Topics()) {
		t.Fatalf("after restore: floor %d, topics %v", f2.LogFloor(), f2.Topics())
	}
	if f2.Applied() != h.idx {
		t.Fatalf("applied after restore %d, want %d", f2.Applied(), h.idx)
	}
}

// A disk that fails an index write stops applying at that entry and tells
// onFatal (the server exits to be restarted), instead of serving offsets
// the index does not hold.
func TestIndexWriteFailureIsFatal(t *testing.T) {
	dir := t.TempDir()
	idx, err := queueindex.Open(dir, queueindex.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	f := newFSM(nil, idx)
	var fatal []error
	f.onFatal = func(err error) { fatal = append(fatal, err) }
	if res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCreateTopic("t", 1, false)}); res != nil {
		t.Fatal(res)
	}
	// The topic's directory is gone: its first index file cannot be made.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	req := &raftlog.Request{Topic: "t", Messages: msgs(0, "m")}
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: raftlog.EncodeBatch(req)})
	if len(fatal) != 1 {
		t.Fatalf("onFatal called %d times, want once", len(fatal))
	}
	if at, _ := f.Damaged(); at != 2 {
		t.Fatalf("damaged at %d, want the entry the index could not take (2)", at)
	}
}
