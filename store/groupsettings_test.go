package store

import "testing"

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
