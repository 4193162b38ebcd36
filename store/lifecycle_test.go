package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/raftmq/raftmq/raftlog"
)

func TestTopicPermission(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	if ti, _ := h.f.Topic("t"); ti.Perm != PermReadWrite || !ti.Readable() || !ti.Writable() {
		t.Fatalf("new topic: perm %d, want 6", ti.Perm)
	}
	h.mustMeta(EncodeUpdateTopic("t", PermRead))
	if ti, _ := h.f.Topic("t"); ti.Perm != PermRead || !ti.Readable() || ti.Writable() {
		t.Fatalf("after update to 4: perm %d", ti.Perm)
	}
	for _, bad := range []uint32{0, 1, 3, 7, 8} {
		if err, _ := h.apply(EncodeUpdateTopic("t", bad)).(error); !errors.Is(err, ErrInvalidPerm) {
			t.Errorf("perm %d: %v, want ErrInvalidPerm", bad, err)
		}
	}
	if err, _ := h.apply(EncodeUpdateTopic("nope", PermRead)).(error); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("update of an unknown topic: %v", err)
	}
	restored, _ := snapshotRoundTrip(t, h.f)
	if ti, _ := restored.Topic("t"); ti.Perm != PermRead {
		t.Errorf("perm after a snapshot: %d, want 4", ti.Perm)
	}
	// A snapshot from before permissions (no Perm) reads as read and write.
	c := h.f.captureLocked()
	c.topics[0].Perm = 0
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, c); err != nil {
		t.Fatal(err)
	}
	old := newFSM(nil, nil)
	if err := old.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if ti, _ := old.Topic("t"); ti.Perm != PermReadWrite {
		t.Errorf("perm from an old snapshot: %d, want 6", ti.Perm)
	}
}

// TestDeleteTopic: a deleted topic, its index and every group's offsets of
// it are gone; a topic created again under the name starts empty.
func TestDeleteTopic(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	h.mustMeta(EncodeCreateTopic("keep", 1, false))
	h.produce(&raftlog.Request{Topic: "t", Messages: msgs(0, "a", "b", "c")})
	h.mustMeta(EncodeCommitOffsets("g", []OffsetEntry{{Topic: "t", Queue: 0, Offset: 2}}))
	h.mustMeta(EncodeCommitOffsets("g2", []OffsetEntry{{Topic: "t", Queue: 0, Offset: 1}, {Topic: "keep", Queue: 0, Offset: 0}}))
	h.mustMeta(EncodeCommitOffsets(MemberKey("g", "m"), []OffsetEntry{{Topic: "t", Queue: 1, Offset: 0}}))
	h.mustMeta(EncodeDeleteTopic("t"))
	if _, err := h.f.Topic("t"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("deleted topic: %v", err)
	}
	if _, _, err := h.f.Locate("t", 0, 0, 10); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("locate in a deleted topic: %v", err)
	}
	if got := fmt.Sprint(h.f.Groups()); got != "[g2]" {
		t.Errorf("owners of offsets after the delete: %s, want [g2] (g had offsets of t only)", got)
	}
	if err, _ := h.apply(EncodeDeleteTopic("t")).(error); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("second delete: %v, want ErrUnknownTopic", err)
	}
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	ti, _ := h.f.Topic("t")
	if ti.Queues[0] != (QueueRange{}) || len(h.f.Offsets("g", "t")) != 0 {
		t.Errorf("re-created topic: %+v, offsets %v; want empty", ti, h.f.Offsets("g", "t"))
	}
	res := h.produce(&raftlog.Request{Topic: "t", Messages: msgs(0, "new")})
	if res[0].Err != nil || res[0].Bases[0].Base != 0 {
		t.Errorf("first message of the re-created topic: %+v, want offset 0", res[0])
	}
}

func TestDeleteGroup(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	h.mustMeta(EncodeCreateTopic("%RETRY%g", 1, false))
	h.mustMeta(EncodeCommitOffsets("g", []OffsetEntry{{Topic: "t", Queue: 0, Offset: 0}}))
	h.mustMeta(EncodeCommitOffsets("g.other", []OffsetEntry{{Topic: "t", Queue: 0, Offset: 0}}))
	h.mustMeta(EncodeCommitOffsets(MemberKey("g", "m1"), []OffsetEntry{{Topic: "t", Queue: 0, Offset: 0}}))
	h.mustMeta(EncodeDeleteGroup("g", []string{"%RETRY%g", "%DLQ%g"}))
	if got := fmt.Sprint(h.f.Groups()); got != "[g.other]" {
		t.Errorf("owners of offsets: %s, want [g.other]", got)
	}
	if _, err := h.f.Topic("%RETRY%g"); !errors.Is(err, ErrUnknownTopic) {
		t.Errorf("the group's retry topic: %v, want deleted", err)
	}
	if _, err := h.f.Topic("t"); err != nil {
		t.Errorf("other topic: %v", err)
	}
}
