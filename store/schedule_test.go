package store

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/raftmq/raftmq/raftlog"
)

// stageHarness has a topic "t" of 2 queues and the schedule topic with
// five messages staged in delay level 1's queue (schedule queue 0).
func stageHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	h.mustMeta(EncodeCreateTopic(ScheduleTopic, ScheduleQueues, false))
	res := h.produce(&raftlog.Request{ProducerID: "user", Seq: 1, Topic: ScheduleTopic, Messages: msgs(0, "a", "b", "c", "d", "e")})
	if res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	return h
}

func deliveryReq(q uint32, seq uint64, topic string, queue uint32, bodies ...string) *raftlog.Request {
	return &raftlog.Request{ProducerID: ScheduleProducer(q), Seq: seq, Topic: topic, Messages: msgs(queue, bodies...)}
}

// TestScheduleCursorCAS: a delivery applies only at the cursor and moves
// it by its message count; a repeat, an overlap, a gap or one past what the
// queue holds is a no-op that stores nothing, also inside one entry.
func TestScheduleCursorCAS(t *testing.T) {
	h := stageHarness(t)
	res := h.produce(deliveryReq(0, 0, "t", 1, "a", "b"))
	if res[0].Err != nil || h.f.ScheduleCursors()[0] != 2 {
		t.Fatalf("first delivery: %v, cursor %d", res[0].Err, h.f.ScheduleCursors()[0])
	}
	// A new leader repeating it, an overlap, a gap, beyond the end: no-ops.
	for _, r := range []*raftlog.Request{
		deliveryReq(0, 0, "t", 1, "a", "b"),
		deliveryReq(0, 1, "t", 1, "b", "c"),
		deliveryReq(0, 3, "t", 1, "d"),
		deliveryReq(0, 2, "t", 1, "c", "d", "e", "f"),
		deliveryReq(1, 0, "t", 1, "x"), // queue 1 holds nothing
	} {
		res := h.produce(r)
		if !errors.Is(res[0].Err, ErrScheduleStale) {
			t.Fatalf("delivery %d+%d of queue %s: %v, want stale", r.Seq, len(r.Messages), r.ProducerID, res[0].Err)
		}
	}
	// Two in one entry chain at the cursor; the third of the entry is stale.
	res = h.produce(deliveryReq(0, 2, "t", 1, "c"), deliveryReq(0, 3, "t", 1, "d", "e"), deliveryReq(0, 3, "t", 1, "d", "e"))
	if res[0].Err != nil || res[1].Err != nil || !errors.Is(res[2].Err, ErrScheduleStale) {
		t.Fatalf("chained deliveries: %v %v %v", res[0].Err, res[1].Err, res[2].Err)
	}
	if c := h.f.ScheduleCursors()[0]; c != 5 {
		t.Fatalf("cursor %d, want 5", c)
	}
	ti, _ := h.f.Topic("t")
	if ti.Queues[1].Max != 5 {
		t.Fatalf("topic t queue 1 holds %d messages, want 5 (each staged message once)", ti.Queues[1].Max)
	}
	// The schedule queue's index keeps only what waits: its records below
	// the cursor are gone and its range starts at the cursor.
	st, _ := h.f.Topic(ScheduleTopic)
	if st.Queues[0] != (QueueRange{Min: 5, Max: 5, Held: 5}) || h.f.topics[ScheduleTopic].queues[0].ix.Floor() != 5 {
		t.Fatalf("schedule queue 0: range %+v, index from %d; want 5..5 and from 5", st.Queues[0], h.f.topics[ScheduleTopic].queues[0].ix.Floor())
	}
	// A delivery into a topic that is gone moves the cursor and stores nothing.
	h.produce(&raftlog.Request{ProducerID: "user", Seq: 2, Topic: ScheduleTopic, Messages: msgs(3, "z")})
	res = h.produce(deliveryReq(3, 0, "gone", 0, "z"))
	if !errors.Is(res[0].Err, ErrUnknownTopic) || h.f.ScheduleCursors()[3] != 1 {
		t.Fatalf("delivery to a missing topic: %v, cursor %d", res[0].Err, h.f.ScheduleCursors()[3])
	}
	// Deliveries are not remembered by the dedupe table.
	if _, ok := h.f.producers[ScheduleProducer(0)]; ok {
		t.Fatal("a schedule producer is in the dedupe table")
	}
}

// TestScheduleFloorAndRetention: the floor is the entry of the oldest
// waiting message, 0 when none waits.
func TestScheduleFloorAndRetention(t *testing.T) {
	h := stageHarness(t) // staged in entry 3
	if f := h.f.ScheduleFloor(); f != 3 {
		t.Fatalf("floor %d, want 3", f)
	}
	h.produce(&raftlog.Request{ProducerID: "user", Seq: 2, Topic: ScheduleTopic, Messages: msgs(1, "later")}) // entry 4
	h.produce(deliveryReq(0, 0, "t", 0, "a", "b", "c", "d", "e"))                                             // entry 5
	if f := h.f.ScheduleFloor(); f != 4 {
		t.Fatalf("floor %d after queue 0 was delivered, want 4", f)
	}
	h.produce(deliveryReq(1, 0, "t", 0, "later")) // entry 6
	if f := h.f.ScheduleFloor(); f != 0 {
		t.Fatalf("floor %d with nothing waiting, want 0", f)
	}
}

// TestScheduleSnapshotRoundTrip: cursors and delivery records survive a
// snapshot, and a restored FSM refuses the deliveries the old one did.
func TestScheduleSnapshotRoundTrip(t *testing.T) {
	h := stageHarness(t)
	h.produce(deliveryReq(0, 0, "t", 1, "a", "b", "c"))
	f2, _ := snapshotRoundTrip(t, h.f)
	if f2.ScheduleCursors() != h.f.ScheduleCursors() {
		t.Fatalf("cursors %v, want %v", f2.ScheduleCursors(), h.f.ScheduleCursors())
	}
	st1, _ := h.f.Topic(ScheduleTopic)
	st2, _ := f2.Topic(ScheduleTopic)
	if st1.Queues[0] != st2.Queues[0] || st2.Queues[0].Min != 3 {
		t.Fatalf("schedule queue 0: %+v, restored %+v; want it to start at the cursor 3", st1.Queues[0], st2.Queues[0])
	}
	h2 := &harness{t: t, f: f2, idx: h.idx}
	if res := h2.produce(deliveryReq(0, 0, "t", 1, "a")); !errors.Is(res[0].Err, ErrScheduleStale) {
		t.Fatalf("repeat after restore: %v", res[0].Err)
	}
	if res := h2.produce(deliveryReq(0, 3, "t", 1, "d", "e")); res[0].Err != nil || f2.ScheduleCursors()[0] != 5 {
		t.Fatalf("next delivery after restore: %v", res[0].Err)
	}
	if f := f2.ScheduleFloor(); f != 0 {
		t.Fatalf("floor %d after everything left, want 0", f)
	}
	// A state without deliveries writes no schedule section; an older
	// snapshot (format 1, no schedule) still loads with every cursor 0.
	if snapState := stageHarness(t).f; snapState.sched.snap() != nil {
		t.Fatal("a schedule section without deliveries")
	}
	old, err := os.ReadFile("testdata/snapshot-format1.bin")
	if err != nil {
		t.Fatal(err)
	}
	f3 := newFSM(nil, nil)
	if err := f3.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatal(err)
	}
	if f3.ScheduleCursors() != [ScheduleQueues]uint64{} {
		t.Fatal("cursors from a snapshot without a schedule")
	}
}

func TestScheduleProducerNames(t *testing.T) {
	for q := uint32(0); q < ScheduleQueues; q++ {
		if got, ok := parseScheduleProducer(ScheduleProducer(q)); !ok || got != q {
			t.Fatalf("queue %d: parsed %d %v", q, got, ok)
		}
	}
	for _, id := range []string{"", "p", "%SCHEDULE%", "%SCHEDULE%x", "%SCHEDULE%-1", "%SCHEDULE%52"} {
		if _, ok := parseScheduleProducer(id); ok {
			t.Fatalf("%q parsed as a schedule producer", id)
		}
	}
}
