package store

import (
	"errors"
	"testing"

	"github.com/raftmq/raftmq/raftlog"
)

// txnHarness has a topic "t" of 2 queues and four half messages (offsets
// 0..3) in the half queue.
func txnHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	h.mustMeta(EncodeCreateTopic(TxnHalfTopic, 1, false))
	for i, b := range []string{"h0", "h1", "h2", "h3"} {
		res := h.produce(&raftlog.Request{ProducerID: "user-" + b, Seq: 1, Topic: TxnHalfTopic, Messages: msgs(TxnHalfQueue, b)})
		if res[0].Err != nil || res[0].Bases[0].Base != uint64(i) {
			t.Fatalf("half message %d: %v %+v", i, res[0].Err, res[0].Bases)
		}
	}
	return h
}

func commitReq(off uint64, topic string, queue uint32, body string) *raftlog.Request {
	return &raftlog.Request{ProducerID: TxnProducer(TxnHalfQueue), Seq: off, Topic: topic, Messages: msgs(queue, body)}
}

func (h *harness) rollback(off uint64) error {
	err, _ := h.apply(EncodeTxnRollback(off)).(error)
	return err
}

// A commit stores its message once in its real topic and queue; a second
// commit, a rollback after it, or a commit after a rollback is a no-op; a
// rolled back half message is never stored; offsets never held cannot be
// decided; the cursor moves over decided runs and the decided set above it
// holds only what is decided past an undecided one.
func TestTxnDecideOnce(t *testing.T) {
	h := txnHarness(t)
	if res := h.produce(commitReq(1, "t", 1, "h1")); res[0].Err != nil {
		t.Fatalf("commit: %v", res[0].Err)
	}
	// A repeat (a new leader resending it), in the same entry too.
	res := h.produce(commitReq(1, "t", 1, "h1"), commitReq(2, "t", 0, "h2"), commitReq(2, "t", 0, "h2"))
	if !errors.Is(res[0].Err, ErrTxnDecided) || res[1].Err != nil || !errors.Is(res[2].Err, ErrTxnDecided) {
		t.Fatalf("repeated commits: %v %v %v", res[0].Err, res[1].Err, res[2].Err)
	}
	if err := h.rollback(1); !errors.Is(err, ErrTxnDecided) {
		t.Fatalf("rollback after commit: %v", err)
	}
	if err := h.rollback(3); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if err := h.rollback(3); !errors.Is(err, ErrTxnDecided) {
		t.Fatalf("second rollback: %v", err)
	}
	if res := h.produce(commitReq(3, "t", 0, "h3")); !errors.Is(res[0].Err, ErrTxnDecided) {
		t.Fatalf("commit after rollback: %v", res[0].Err)
	}
	for _, off := range []uint64{4, 100} {
		if res := h.produce(commitReq(off, "t", 0, "x")); !errors.Is(res[0].Err, ErrTxnDecided) {
			t.Fatalf("commit of offset %d never held: %v", off, res[0].Err)
		}
		if err := h.rollback(off); !errors.Is(err, ErrTxnDecided) {
			t.Fatalf("rollback of offset %d never held: %v", off, err)
		}
	}
	// A commit is one message.
	two := &raftlog.Request{ProducerID: TxnProducer(TxnHalfQueue), Seq: 0, Topic: "t", Messages: msgs(0, "a", "b")}
	if res := h.produce(two); res[0].Err == nil {
		t.Fatal("a commit of two messages was applied")
	}
	ti, _ := h.f.Topic("t")
	if ti.Queues[0].Max != 1 || ti.Queues[1].Max != 1 {
		t.Fatalf("topic t holds %d+%d messages, want 1+1 (h2 in queue 0, h1 in queue 1)", ti.Queues[0].Max, ti.Queues[1].Max)
	}
	st := h.f.TxnState()
	if st.Below != 0 || st.Next != 4 || len(st.Decided) != 3 || st.Pending() != 1 || st.IsDecided(0) || !st.IsDecided(3) {
		t.Fatalf("state %+v (pending %d), want offset 0 alone undecided", st, st.Pending())
	}
	if h.f.TxnFloor() == 0 {
		t.Fatal("no retention floor while half message 0 is undecided")
	}
	// Deciding 0 moves the cursor over the whole run and empties the set.
	if err := h.rollback(0); err != nil {
		t.Fatal(err)
	}
	st = h.f.TxnState()
	if st.Below != 4 || len(st.Decided) != 0 || st.Pending() != 0 || h.f.TxnFloor() != 0 {
		t.Fatalf("state %+v, floor %d; want all decided", st, h.f.TxnFloor())
	}
	hi, _ := h.f.Topic(TxnHalfTopic)
	if hi.Queues[0].Min != 4 {
		t.Fatalf("half queue starts at %d, want 4 (decided ones dropped)", hi.Queues[0].Min)
	}
	if _, ok := h.f.producers[TxnProducer(TxnHalfQueue)]; ok {
		t.Fatal("the commit producer is in the dedupe table")
	}
	// Users may not name another half queue.
	if _, ok := parseTxnProducer(txnProducerPrefix + "1"); ok {
		t.Fatal("half queue 1 parsed")
	}
}

// Decisions survive a snapshot: after a restore a decided offset stays
// decided (a commit is not delivered twice), an undecided one can still be
// decided, and the restored state is the same.
func TestTxnDecisionsInSnapshot(t *testing.T) {
	h := txnHarness(t)
	if res := h.produce(commitReq(2, "t", 0, "h2")); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	if err := h.rollback(0); err != nil {
		t.Fatal(err)
	}
	want := h.f.TxnState()
	f2, _ := snapshotRoundTrip(t, h.f)
	if got := f2.TxnState(); got.Below != want.Below || got.Next != want.Next || len(got.Decided) != 1 || got.Decided[0] != 2 {
		t.Fatalf("restored state %+v, want %+v", got, want)
	}
	h.f = f2
	if res := h.produce(commitReq(2, "t", 0, "h2")); !errors.Is(res[0].Err, ErrTxnDecided) {
		t.Fatalf("commit after restore: %v", res[0].Err)
	}
	if err := h.rollback(0); !errors.Is(err, ErrTxnDecided) {
		t.Fatalf("rollback after restore: %v", err)
	}
	if res := h.produce(commitReq(1, "t", 1, "h1")); res[0].Err != nil {
		t.Fatalf("commit of an undecided one after restore: %v", res[0].Err)
	}
	ti, _ := f2.Topic("t")
	if ti.Queues[0].Max != 1 || ti.Queues[1].Max != 1 {
		t.Fatalf("topic t holds %d+%d, want 1+1", ti.Queues[0].Max, ti.Queues[1].Max)
	}
	if st := f2.TxnState(); st.Below != 3 || st.Pending() != 1 {
		t.Fatalf("state %+v, want cursor 3 and offset 3 pending", st)
	}
	// A snapshot with no decisions carries none, and a corrupt one is refused.
	if (&txnState{}).snap() != nil {
		t.Fatal("empty state snapshots something")
	}
	if err := (&txnState{}).load(&snapTxn{Below: 5, Decided: []uint64{4}}); !errors.Is(err, ErrCorruptCommand) {
		t.Fatalf("decided offset below the cursor: %v", err)
	}
}
