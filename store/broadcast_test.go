package store

import (
	"errors"
	"fmt"
	"testing"
)

// TestMemberOffsets: a broadcasting member's offsets are kept apart from its
// group's and from every other member's, survive a snapshot, and a key that
// is not a group or a group's member is refused.
func TestMemberOffsets(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	h.mustMeta(EncodeCommitOffsets("g", []OffsetEntry{{Topic: "t", Queue: 0, Offset: 1}}))
	h.mustMeta(EncodeCommitOffsets(MemberKey("g", "host@1"), []OffsetEntry{{Topic: "t", Queue: 0, Offset: 5}}))
	h.mustMeta(EncodeCommitOffsets(MemberKey("g", "a/b"), []OffsetEntry{{Topic: "t", Queue: 1, Offset: 7}}))
	check := func(f *FSM) {
		t.Helper()
		for key, want := range map[string]string{"g": "map[0:1]", MemberKey("g", "host@1"): "map[0:5]", MemberKey("g", "a/b"): "map[1:7]"} {
			if got := fmt.Sprint(f.Offsets(key, "t")); got != want {
				t.Errorf("offsets of %q: %s, want %s", key, got, want)
			}
		}
	}
	check(h.f)
	if g, m, ok := SplitMemberKey(MemberKey("g", "a/b")); g != "g" || m != "a/b" || !ok {
		t.Errorf("split: %q %q %v", g, m, ok)
	}
	for _, bad := range []string{"bad name/m", "g/", "/m"} {
		if err, _ := h.apply(EncodeCommitOffsets(bad, []OffsetEntry{{Topic: "t", Queue: 0, Offset: 1}})).(error); !errors.Is(err, ErrInvalidName) {
			t.Errorf("commit under %q: %v, want ErrInvalidName", bad, err)
		}
	}
	restored, _ := snapshotRoundTrip(t, h.f)
	check(restored)
}
