package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/queueindex"
)

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string { return "mem" }

func (m *memSink) Cancel() error { m.cancelled = true; return nil }

func (m *memSink) Close() error { return nil }

// persistSnapshot takes a snapshot of f and persists it into memory.
func persistSnapshot(t testing.TB, f *FSM) *memSink {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	return sink
}

// snapshotRoundTrip persists a snapshot of f and restores it into a new FSM.
func snapshotRoundTrip(t *testing.T, f *FSM) (*FSM, *memSink) {
	t.Helper()
	sink := persistSnapshot(t, f)
	// A restart: the same index, which the restore cuts back to the snapshot.
	f2 := newFSM(nil, f.idx)
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
	if err := newFSM(nil, nil).Restore(io.NopCloser(bytes.NewReader(bad))); !errors.Is(err, ErrCorruptCommand) {
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
	// Held locks.
	h.f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: EncodeLock("g", "m", []QueueRef{{Topic: "t", Queue: 1}}, time.Unix(1000, 0), time.Minute)})
	snap, _ = h.f.Snapshot()
	sink.Reset()
	snap.Persist(&sink)
	f.Add(sink.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		f := newFSM(nil, nil)
		if f.Restore(io.NopCloser(bytes.NewReader(data))) != nil { // must not panic
			return
		}
		// Whatever restores must answer a produce without panicking.
		f.Apply(&raft.Log{Index: f.Applied() + 1, Type: raft.LogCommand, Data: raftlog.EncodeBatch(
			&raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: append(msgs(0, "a"), msgs(1, "b")...)})})
	})
}

// A restart over a queue index with a damaged record below the snapshot
// (one cut short under a running writer, which then wrote past it) still
// restores the snapshot: the queue is indexed from its end on and
// peers serve what lies below.
func TestRestoreOverDamagedQueueIndex(t *testing.T) {
	dir := t.TempDir()
	idx, err := queueindex.Open(dir, queueindex.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	f := newFSM(nil, idx)
	if res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCreateTopic("t", 1, false)}); res != nil {
		t.Fatal(res)
	}
	for i := uint64(2); i <= 101; i++ {
		req := &raftlog.Request{Topic: "t", Messages: []raftlog.Message{{Queue: 0, Body: []byte("m")}}}
		if _, ok := f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: raftlog.EncodeBatch(req)}).([]*ProduceResult); !ok {
			t.Fatalf("entry %d not applied", i)
		}
	}
	sink := persistSnapshot(t, f)
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "0", "*.idx"))
	if len(files) != 1 {
		t.Fatalf("index files %v, want one", files)
	}
	// Zero the last two bytes of a record among the last ones, which the
	// restart reads back: its checksum fails.
	fh, err := os.OpenFile(files[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte{0, 0}, 50*queueindex.RecordLen+queueindex.RecordLen-2)
	fh.Close()

	idx2, err := queueindex.Open(dir, queueindex.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer idx2.Close()
	f2 := newFSM(nil, idx2)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatalf("restore over a damaged queue index: %v", err)
	}
	ti, err := f2.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	if q := ti.Queues[0]; q.Min != 0 || q.Max != 100 || q.Held != 100 {
		t.Fatalf("queue after the restore: %+v, want 0..100 held from 100 (peers serve below)", q)
	}
	// Entries after the snapshot are indexed as before.
	req := &raftlog.Request{Topic: "t", Messages: []raftlog.Message{{Queue: 0, Body: []byte("m")}}}
	f2.Apply(&raft.Log{Index: 102, Type: raft.LogCommand, Data: raftlog.EncodeBatch(req)})
	locs, _, err := f2.Locate("t", 0, 100, 1)
	if err != nil || len(locs) != 1 || locs[0].LogIndex != 102 {
		t.Fatalf("offset 100 after the restore: %v %v", locs, err)
	}
}

// A node that installs a snapshot indexes only from its end on, except the
// schedule queues: their waiting messages come with the snapshot, so that
// as leader it still delivers them.
func TestSnapshotCarriesWaitingScheduleRecords(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic(ScheduleTopic, ScheduleQueues, true))
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	for range 3 {
		h.produce(&raftlog.Request{Topic: ScheduleTopic, Messages: msgs(3, "d")})
		h.produce(&raftlog.Request{Topic: "t", Messages: msgs(0, "m")})
	}
	sink := persistSnapshot(t, h.f)
	// A new node: an empty index of its own.
	f2 := newFSM(nil, nil)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	locs, rng, err := f2.Locate(ScheduleTopic, 3, 0, 10)
	if err != nil || len(locs) != 3 || rng.Held != 0 {
		t.Fatalf("schedule queue 3 after the install: %v %+v %v, want its 3 waiting records", locs, rng, err)
	}
	if _, rng, _ := f2.Locate("t", 0, 0, 10); rng.Held != 3 {
		t.Fatalf("topic t after the install: %+v, want it indexed from its end (3)", rng)
	}
}
