package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/raftlog"
)

// queueMax is the next offset of each queue of topic t.
func queueMax(t *testing.T, f *FSM) []uint64 {
	t.Helper()
	ti, err := f.Topic("t")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, len(ti.Queues))
	for i, q := range ti.Queues {
		out[i] = q.Max
	}
	return out
}

func mustAcks(t *testing.T, res *ProduceResult, queues []uint32) []Ack {
	t.Helper()
	if res.Err != nil {
		t.Fatalf("result: %v", res.Err)
	}
	acks, err := res.Acks(queues)
	if err != nil {
		t.Fatalf("acks: %v", err)
	}
	return acks
}

// Defect: a request with another body under a seen (producer id, sequence)
// was answered dup=true and never stored. It is refused, stores nothing, and
// the remembered result stays for the true retry.
func TestReusedSequenceDifferentBodyRefused(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	orig := &raftlog.Request{ProducerID: "p", Seq: 5, Topic: "t", Messages: msgs(0, "x")}
	first := mustAcks(t, h.produce(orig)[0], []uint32{0})

	res := h.produce(&raftlog.Request{ProducerID: "p", Seq: 5, Topic: "t", Messages: msgs(0, "y")})[0]
	if !errors.Is(res.Err, ErrSequenceReused) || res.Duplicate {
		t.Fatalf("other body under a seen sequence: %+v", res)
	}
	for _, want := range []string{`producer "p"`, "sequence 5", "nothing of it was stored"} {
		if !strings.Contains(res.Err.Error(), want) {
			t.Errorf("error %q does not say %q", res.Err, want)
		}
	}
	if got := queueMax(t, h.f); got[0] != 1 {
		t.Fatalf("queue holds %d messages after the refusal, want 1", got[0])
	}
	// The true retry still gets the first attempt's ack.
	retry := h.produce(orig)[0]
	if !retry.Duplicate || fmt.Sprint(mustAcks(t, retry, []uint32{0})) != fmt.Sprint(first) {
		t.Fatalf("retry after a refusal: %+v, want the acks %v", retry, first)
	}
	// Inside one entry: the first request under a sequence is stored, a
	// second one with other content is refused and skipped.
	res2 := h.produce(
		&raftlog.Request{ProducerID: "p", Seq: 6, Topic: "t", Messages: msgs(0, "y")},
		&raftlog.Request{ProducerID: "p", Seq: 6, Topic: "t", Messages: msgs(0, "z")},
	)
	if res2[0].Err != nil || !errors.Is(res2[1].Err, ErrSequenceReused) {
		t.Fatalf("one entry: %v / %v", res2[0].Err, res2[1].Err)
	}
	if got := queueMax(t, h.f); got[0] != 2 {
		t.Fatalf("queue holds %d messages, want 2", got[0])
	}
	locs, _, _ := h.f.Locate("t", 0, 1, 10)
	if len(locs) != 1 || locs[0].Count != 1 || fmt.Sprint(locs[0].Skip) != "[1]" {
		t.Fatalf("index of the entry: %+v", locs)
	}
	// Other topic, other queue, key, tag or properties are other requests too.
	h.mustMeta(EncodeCreateTopic("u", 2, false))
	others := []*raftlog.Request{
		{ProducerID: "p", Seq: 5, Topic: "u", Messages: msgs(0, "x")},
		{ProducerID: "p", Seq: 5, Topic: "t", Messages: []raftlog.Message{{Queue: 0, Key: "k", Body: []byte("x")}}},
		{ProducerID: "p", Seq: 5, Topic: "t", Messages: []raftlog.Message{{Queue: 0, Tag: "g", Body: []byte("x")}}},
		{ProducerID: "p", Seq: 5, Topic: "t", Messages: []raftlog.Message{{Queue: 0, Properties: map[string]string{"a": "b"}, Body: []byte("x")}}},
	}
	for i, r := range others {
		if res := h.produce(r)[0]; !errors.Is(res.Err, ErrSequenceReused) {
			t.Errorf("variant %d: %+v", i, res)
		}
	}
}

// Defect: a request with more messages under a seen sequence got acks built
// from the first attempt's bases, naming other producers' offsets and offsets
// not yet written. It is refused; and Acks itself refuses to name them.
func TestReusedSequenceMoreMessagesRefused(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	res := h.produce(
		&raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: msgs(0, "a")},
		&raftlog.Request{ProducerID: "other", Seq: 1, Topic: "t", Messages: msgs(0, "b")},
	)
	before := queueMax(t, h.f)
	for _, r := range []*raftlog.Request{
		{ProducerID: "p", Seq: 1, Topic: "t", Messages: msgs(0, "a", "b")},                     // would ack other's offset 1
		{ProducerID: "p", Seq: 1, Topic: "t", Messages: msgs(0, "a", "b", "c")},                // and offset 2, not written
		{ProducerID: "p", Seq: 1, Topic: "t", Messages: append(msgs(0, "a"), msgs(1, "c")...)}, // a queue it never used
		{ProducerID: "p", Seq: 1, Topic: "t", Messages: nil},                                   // fewer
	} {
		got := h.produce(r)[0]
		if !errors.Is(got.Err, ErrSequenceReused) {
			t.Fatalf("%d messages under a seen sequence: %+v", len(r.Messages), got)
		}
		if len(r.Messages) > 1 && !strings.Contains(got.Err.Error(), fmt.Sprintf("held 1 messages (entry 2), this request holds %d", len(r.Messages))) {
			t.Errorf("error does not name the counts: %v", got.Err)
		}
	}
	if after := queueMax(t, h.f); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("queues went from %v to %v", before, after)
	}
	// Acks never names an offset outside the request's own messages.
	for _, qs := range [][]uint32{{0, 0}, {0, 1}, {}} {
		if _, err := res[0].Acks(qs); !errors.Is(err, ErrMismatchedRetry) {
			t.Errorf("acks for queues %v: %v", qs, err)
		}
	}
	r := &ProduceResult{LogIndex: 9, Count: 2, Bases: []QueueBase{{Queue: 0, Count: 1, Base: 4}, {Queue: 1, Count: 1, Base: 7}}}
	if _, err := r.Acks([]uint32{0, 0}); !errors.Is(err, ErrMismatchedRetry) {
		t.Errorf("two acks in a queue that got one: %v", err)
	}
	if a := mustAcks(t, r, []uint32{1, 0}); a[0].Offset != 7 || a[1].Offset != 4 {
		t.Errorf("acks %+v", a)
	}
}

// A retry re-stamped by the broker (a message sent with Timestamp 0 gets the
// receiving leader's clock) is the same request: dup=true with the first acks.
func TestRetryWithNewTimestampIsDuplicate(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	req := func(ts int64) *raftlog.Request {
		return &raftlog.Request{ProducerID: "p", Seq: 3, Topic: "t", Messages: []raftlog.Message{
			{Queue: 1, Timestamp: ts, Key: "k", Tag: "tag", Properties: map[string]string{"a": "1", "b": "2"}, Body: []byte("one")},
			{Queue: 0, Timestamp: ts, Body: []byte("two")},
			{Queue: 1, Timestamp: ts + 1, Body: []byte("three")},
		}}
	}
	h.produce(&raftlog.Request{ProducerID: "q", Seq: 1, Topic: "t", Messages: msgs(1, "before")})
	first := h.produce(req(1000))[0]
	firstAcks := mustAcks(t, first, queuesOf(req(0)))
	retry := h.produce(req(2000))[0]
	if !retry.Duplicate {
		t.Fatalf("re-stamped retry: %+v", retry)
	}
	if got := mustAcks(t, retry, queuesOf(req(0))); fmt.Sprint(got) != fmt.Sprint(firstAcks) {
		t.Fatalf("retry acks %v, first acks %v", got, firstAcks)
	}
	if firstAcks[0].Offset != 1 || firstAcks[1].Offset != 0 || firstAcks[2].Offset != 2 {
		t.Fatalf("first acks %v", firstAcks)
	}
	if got := queueMax(t, h.f); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("queues %v after a retry", got)
	}
}

// The dedupe table of a format-1 snapshot (written by the code before
// digests; testdata/snapshot-format1.bin holds topic t with 2 queues, entry
// 2 = producer p seq 1 [q0 "a", q1 "b", q1 "c"], entry 3 = p seq 2 [q0 "d"])
// restores: its results have no digest, so a retry is accepted when its
// messages fit what the remembered entry appended to its queues, and refused
// otherwise. The mark survives a format-2 snapshot.
func TestRestoreFormat1Snapshot(t *testing.T) {
	data, err := os.ReadFile("testdata/snapshot-format1.bin")
	if err != nil {
		t.Fatal(err)
	}
	f := newFSM(nil, nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatalf("restore format 1: %v", err)
	}
	if got := queueMax(t, f); fmt.Sprint(got) != "[2 2]" {
		t.Fatalf("queues %v", got)
	}
	check := func(f *FSM, idx uint64) {
		t.Helper()
		h := &harness{t: t, f: f, idx: idx}
		p1 := &raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: append(msgs(0, "a"), msgs(1, "b", "c")...)}
		res := h.produce(p1)[0]
		if !res.Duplicate {
			t.Fatalf("retry of a format-1 result: %+v", res)
		}
		if a := mustAcks(t, res, queuesOf(p1)); fmt.Sprint(a) != fmt.Sprint([]Ack{
			{Queue: 0, Offset: 0, Index: 2, Ordinal: 0}, {Queue: 1, Offset: 0, Index: 2, Ordinal: 1}, {Queue: 1, Offset: 1, Index: 2, Ordinal: 2}}) {
			t.Fatalf("acks %v", a)
		}
		for _, r := range []*raftlog.Request{
			{ProducerID: "p", Seq: 2, Topic: "t", Messages: msgs(0, "d", "e")}, // past entry 3 in queue 0
			{ProducerID: "p", Seq: 1, Topic: "t", Messages: msgs(0, "a", "b")}, // past entry 2 in queue 0
			{ProducerID: "p", Seq: 2, Topic: "t", Messages: msgs(1, "d")},      // a queue it never used
		} {
			if res := h.produce(r)[0]; !errors.Is(res.Err, ErrSequenceReused) {
				t.Fatalf("request that does not fit a format-1 result: %+v", res)
			}
		}
		if got := queueMax(t, f); fmt.Sprint(got) != "[2 2]" {
			t.Fatalf("queues %v", got)
		}
		// A new request is remembered with its digest.
		res = h.produce(&raftlog.Request{ProducerID: "p", Seq: 3, Topic: "t", Messages: msgs(1, "n")})[0]
		if res.Err != nil || res.Digest == 0 {
			t.Fatalf("new request: %+v", res)
		}
		if res := h.produce(&raftlog.Request{ProducerID: "p", Seq: 3, Topic: "t", Messages: msgs(1, "N")})[0]; !errors.Is(res.Err, ErrSequenceReused) {
			t.Fatalf("reused new sequence: %+v", res)
		}
	}
	sink := persistSnapshot(t, f)
	check(f, 3)
	// A restart: the same index, which the restore cuts back to the snapshot.
	f2 := newFSM(nil, f.idx)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatalf("restore a current snapshot written from format 1: %v", err)
	}
	check(f2, 3)
}

// A format-2 result whose counts do not add up is refused at restore: Acks
// would otherwise trust them.
func TestRestoreRefusesInconsistentCounts(t *testing.T) {
	for _, r := range []snapResult{
		{Count: 2, Bases: []QueueBase{{Queue: 0, Count: 1}}},
		{NoDigest: true, Count: 1, Bases: []QueueBase{{Queue: 0, Count: 1}}},
	} {
		if err := checkSnapResult(&r); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	if err := checkSnapResult(&snapResult{Count: 3, Bases: []QueueBase{{Queue: 0, Count: 1}, {Queue: 2, Count: 2}}}); err != nil {
		t.Errorf("consistent result refused: %v", err)
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
