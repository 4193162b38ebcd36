package replica

import (
	"testing"

	"github.com/raftmq/raftmq/raftlog"
)

// TestMaxReconsumeReplicatedAndSnapshotted: a group's max reconsume times is
// state machine state: set by its command, refused out of range (nothing
// changed), and carried by a snapshot.
func TestMaxReconsumeReplicatedAndSnapshotted(t *testing.T) {
	h := newHarness(t)
	if _, ok := h.f.MaxReconsumeTimes("g"); ok {
		t.Fatal("a new FSM has a setting")
	}
	h.mustMeta(EncodeSetMaxReconsume("g", 5))
	h.mustMeta(EncodeSetMaxReconsume("zero", 0))
	if err, _ := h.apply(EncodeSetMaxReconsume("g", 65)).(error); err == nil {
		t.Fatal("max reconsume 65 applied")
	}
	if n, ok := h.f.MaxReconsumeTimes("g"); !ok || n != 5 {
		t.Fatalf("g: %d %v, want 5", n, ok)
	}
	f2, _ := snapshotRoundTrip(t, h.f)
	if n, ok := f2.MaxReconsumeTimes("g"); !ok || n != 5 {
		t.Fatalf("after restore g: %d %v, want 5", n, ok)
	}
	if n, ok := f2.MaxReconsumeTimes("zero"); !ok || n != 0 {
		t.Fatalf("after restore zero: %d %v, want set to 0", n, ok)
	}
	if got := f2.SettingsGroups(); len(got) != 2 {
		t.Fatalf("settings groups %v", got)
	}
}

// TestEntryLocation: the index record of an entry in a queue is found by
// log index, and an entry that stored nothing in the queue is not.
func TestEntryLocation(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	r1 := &raftlog.Request{Topic: "t", Messages: msgs(0, "a", "b")}
	h.produce(r1)
	idx1 := h.idx
	r2 := &raftlog.Request{Topic: "t", Messages: msgs(1, "c")}
	h.produce(r2)
	if l, ok, err := h.f.EntryLocation("t", 0, idx1); err != nil || !ok || l.Base != 0 || l.Count != 2 {
		t.Fatalf("entry %d queue 0: %+v %v %v", idx1, l, ok, err)
	}
	if _, ok, _ := h.f.EntryLocation("t", 1, idx1); ok {
		t.Fatal("entry 1 found in queue 1, where it stored nothing")
	}
	if _, _, err := h.f.EntryLocation("nope", 0, idx1); err == nil {
		t.Fatal("unknown topic: no error")
	}
}

// TestLockTermReplicatedAndSnapshotted: the last term whose leader granted
// orderly locks only grows, and a snapshot carries it.
func TestLockTermReplicatedAndSnapshotted(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeLockTerm(3))
	h.mustMeta(EncodeLockTerm(2))
	if got := h.f.LockTerm(); got != 3 {
		t.Fatalf("lock term %d, want 3", got)
	}
	f2, _ := snapshotRoundTrip(t, h.f)
	if got := f2.LockTerm(); got != 3 {
		t.Fatalf("after restore: lock term %d, want 3", got)
	}
}
