package replica

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"unsafe"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
)

type harness struct {
	t   *testing.T
	f   *fsm
	idx uint64
}

func newHarness(t *testing.T) *harness { return &harness{t: t, f: newFSM(nil)} }

func (h *harness) apply(data []byte) interface{} {
	h.idx++
	return h.f.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: data})
}

func (h *harness) mustMeta(data []byte) {
	h.t.Helper()
	if res := h.apply(data); res != nil {
		h.t.Fatalf("meta command: %v", res)
	}
}

func (h *harness) produce(reqs ...*raftlog.Request) []*ProduceResult {
	h.t.Helper()
	res, ok := h.apply(raftlog.EncodeBatch(reqs...)).([]*ProduceResult)
	if !ok {
		h.t.Fatalf("batch result %T", res)
	}
	return res
}

func msgs(queue uint32, bodies ...string) []raftlog.Message {
	var out []raftlog.Message
	for _, b := range bodies {
		out = append(out, raftlog.Message{Queue: queue, Body: []byte(b)})
	}
	return out
}

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
	if a, _ := res[1].Acks([]uint32{0}); a[0].Offset != 2 || a[0].ID != raftlog.MessageID(2, 3) {
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

func TestDedupeRetryGetsSameAck(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	first := h.produce(&raftlog.Request{ProducerID: "p", Seq: 5, Topic: "t", Messages: msgs(0, "x")})
	// A retry in a later entry, and a duplicate inside one entry.
	res := h.produce(
		&raftlog.Request{ProducerID: "p", Seq: 5, Topic: "t", Messages: msgs(0, "x")},
		&raftlog.Request{ProducerID: "p", Seq: 6, Topic: "t", Messages: msgs(0, "y")},
		&raftlog.Request{ProducerID: "p", Seq: 6, Topic: "t", Messages: msgs(0, "y")},
	)
	if !res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate {
		t.Fatalf("duplicate flags %v %v %v", res[0].Duplicate, res[1].Duplicate, res[2].Duplicate)
	}
	a, _ := first[0].Acks([]uint32{0})
	b, _ := res[0].Acks([]uint32{0})
	if a[0] != b[0] {
		t.Fatalf("retry ack %+v, first ack %+v", b, a)
	}
	if _, err := res[0].Acks([]uint32{1}); !errors.Is(err, ErrMismatchedRetry) {
		t.Fatalf("retry to another queue: %v", err)
	}
	ti, _ := h.f.Topic("t")
	if ti.Queues[0].Max != 2 {
		t.Fatalf("queue holds %d messages, want 2", ti.Queues[0].Max)
	}
	locs, _, _ := h.f.Locate("t", 0, 1, 10)
	if len(locs) != 1 || fmt.Sprint(locs[0].Skip) != "[0 2]" {
		t.Fatalf("skip list %+v", locs)
	}
}

func TestDedupeWindowRefusesStaleSequences(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	for s := uint64(1); s <= DedupeWindow+10; s++ {
		h.produce(&raftlog.Request{ProducerID: "p", Seq: s, Topic: "t", Messages: msgs(0, "m")})
	}
	res := h.produce(&raftlog.Request{ProducerID: "p", Seq: 3, Topic: "t", Messages: msgs(0, "old")})
	if !errors.Is(res[0].Err, ErrStaleSequence) {
		t.Fatalf("stale seq: %v", res[0].Err)
	}
	res = h.produce(&raftlog.Request{ProducerID: "p", Seq: DedupeWindow + 5, Topic: "t", Messages: msgs(0, "m")})
	if !res[0].Duplicate {
		t.Fatal("recent seq not deduplicated")
	}
}

func TestRejectsUnknownTopicAndBadQueue(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	res := h.produce(
		&raftlog.Request{Topic: "nope", Messages: msgs(0, "a")},
		&raftlog.Request{Topic: "t", Messages: msgs(5, "b")},
		&raftlog.Request{Topic: "t", Messages: msgs(1, "c")},
	)
	if !errors.Is(res[0].Err, ErrUnknownTopic) || !errors.Is(res[1].Err, ErrInvalidQueue) || res[2].Err != nil {
		t.Fatalf("errors %v / %v / %v", res[0].Err, res[1].Err, res[2].Err)
	}
	if err, _ := h.apply(EncodeCreateTopic("t", 3, false)).(error); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("recreate: %v", err)
	}
	if h.apply(EncodeCreateTopic("t", 2, true)) != nil {
		t.Fatal("if-not-exists with same queues should succeed")
	}
	for _, name := range []string{"", "a b", "x/y", string(make([]byte, 200))} {
		if err, _ := h.apply(EncodeCreateTopic(name, 1, false)).(error); !errors.Is(err, ErrInvalidName) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if err, _ := h.apply([]byte{99, 1, 2}).(error); !errors.Is(err, ErrCorruptCommand) {
		t.Fatalf("unknown command: %v", err)
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

// snapshotRoundTrip persists a snapshot of f and restores it into a new FSM.
func snapshotRoundTrip(t *testing.T, f *fsm) (*fsm, *memSink) {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	f2 := newFSM(nil)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	return f2, sink
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	h.mustMeta(EncodeRegisterNode(NodeInfo{ID: "n1", ClientAddr: "a:1", PeerAddr: "a:1"}))
	first := &raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: append(msgs(0, "a"), msgs(1, "b", "c")...)}
	h.produce(first, first)
	h.mustMeta(EncodeCommitOffsets("g", []OffsetEntry{{Topic: "t", Queue: 1, Offset: 2}}))
	f2, sink := snapshotRoundTrip(t, h.f)
	if fmt.Sprint(f2.Topics()) != fmt.Sprint(h.f.Topics()) {
		t.Fatalf("topics %v vs %v", f2.Topics(), h.f.Topics())
	}
	if f2.Offsets("g", "t")[1] != 2 {
		t.Fatal("offsets lost")
	}
	if n, ok := f2.Node("n1"); !ok || n.ClientAddr != "a:1" {
		t.Fatal("node registry lost")
	}
	l1, _, _ := h.f.Locate("t", 0, 0, 10)
	l2, _, _ := f2.Locate("t", 0, 0, 10)
	if fmt.Sprint(l1) != fmt.Sprint(l2) {
		t.Fatalf("index %v vs %v", l1, l2)
	}
	// The dedupe table survives with its digests: a retry after restore is
	// still a duplicate, another request under its sequence is refused.
	h2 := &harness{t: t, f: f2, idx: h.idx}
	if res := h2.produce(first); !res[0].Duplicate {
		t.Fatal("dedupe table lost in snapshot")
	}
	if res := h2.produce(&raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: append(msgs(0, "a"), msgs(1, "b", "C")...)}); !errors.Is(res[0].Err, ErrSequenceReused) {
		t.Fatalf("digest lost in snapshot: other content under a seen sequence gave %+v", res[0])
	}
	// A damaged snapshot is refused.
	bad := append([]byte{}, sink.Bytes()...)
	bad[len(bad)/2] ^= 1
	if err := newFSM(nil).Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, ErrCorruptCommand) {
		t.Fatalf("damaged snapshot: %v", err)
	}
	// CheckSnapshot (a node's start-up check) accepts what Restore accepts.
	if err := CheckSnapshot(bytes.NewReader(sink.Bytes())); err != nil {
		t.Fatalf("check of a good snapshot: %v", err)
	}
	if err := CheckSnapshot(bytes.NewReader(bad)); !errors.Is(err, ErrCorruptCommand) {
		t.Fatalf("check of a damaged snapshot: %v", err)
	}
}

func FuzzCheckCommand(f *testing.F) {
	f.Add(EncodeCreateTopic("t", 4, true))
	f.Add(EncodeCommitOffsets("g", []OffsetEntry{{Topic: "t", Queue: 1, Offset: 9}}))
	f.Add(EncodeRegisterNode(NodeInfo{ID: "n", ClientAddr: "x:1"}))
	f.Add(EncodeRetain(3))
	f.Add(raftlog.EncodeBatch(&raftlog.Request{Topic: "t", Messages: msgs(0, "a")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckCommand(data)
		// Whatever passes the check must apply without panicking.
		h := newHarness(t)
		h.apply(EncodeCreateTopic("t", 4, false))
		res := h.apply(data)
		if err == nil {
			if e, ok := res.(error); ok && errors.Is(e, ErrCorruptCommand) {
				t.Fatalf("check passed but apply says corrupt: %v", e)
			}
		}
	})
}

func FuzzRestore(f *testing.F) {
	h := newHarness(&testing.T{})
	h.f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCreateTopic("t", 2, false)})
	snap, _ := h.f.Snapshot()
	var sink memSink
	snap.Persist(&sink)
	f.Add(sink.Bytes())
	// A dedupe table in both formats.
	if old, err := os.ReadFile("testdata/snapshot-format1.bin"); err == nil {
		f.Add(old)
	}
	h.f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: raftlog.EncodeBatch(
		&raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: append(msgs(0, "a"), msgs(1, "b")...)})})
	snap, _ = h.f.Snapshot()
	sink.Reset()
	snap.Persist(&sink)
	f.Add(sink.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		f := newFSM(nil)
		if f.Restore(io.NopCloser(bytes.NewReader(data))) != nil { // must not panic
			return
		}
		// Whatever restores must answer a produce without panicking.
		f.Apply(&raft.Log{Index: f.Applied() + 1, Type: raft.LogCommand, Data: raftlog.EncodeBatch(
			&raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: append(msgs(0, "a"), msgs(1, "b")...)})})
	})
}

// The index holds one record per Raft entry and queue for as long as the
// log is kept (until retention drops it), so its size is memory per entry.
func TestRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(record{}); got > 32 {
		t.Errorf("index record is %d bytes, want at most 32", got)
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
	want := []QueueRange{{Min: 3, Max: 4}, {Min: 1, Max: 1}, {Min: 0, Max: 1}}
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
