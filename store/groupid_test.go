package store

import (
	"strings"
	"testing"
)

// TestGroupIDSetOnceAndSnapshotted: the first group id applied wins on
// every node, a later one changes nothing, a bad one is refused, and a
// snapshot carries it.
func TestGroupIDSetOnceAndSnapshotted(t *testing.T) {
	h := newHarness(t)
	if id := h.f.GroupID(); id != "" {
		t.Fatalf("a new FSM has group id %q", id)
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxGroupIDLen+1)} {
		if err, _ := h.apply(EncodeSetGroupID(bad)).(error); err == nil {
			t.Fatalf("group id %q applied", bad)
		}
	}
	h.mustMeta(EncodeSetGroupID("first"))
	h.mustMeta(EncodeSetGroupID("second"))
	if id := h.f.GroupID(); id != "first" {
		t.Fatalf("group id %q, want the first one set", id)
	}
	f2, _ := snapshotRoundTrip(t, h.f)
	if id := f2.GroupID(); id != "first" {
		t.Fatalf("after restore group id %q, want first", id)
	}
}
