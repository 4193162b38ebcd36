package raftlog

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// Retention deletes whole segments below a cut: Segments lists them oldest
// first, DeleteBelow removes the entries and raises the read floor, and the
// log reopens with its new head.
func TestDeleteBelowDropsOldSegments(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Kind: KindWAL, SegmentSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const entries = 1000
	for i := 0; i < entries/20; i++ {
		writeEntries(t, s, 1+i*20, 20) // about 3 KB per call
	}
	segs, err := s.Segments()
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v %v", segs, err)
	}
	for i := 1; i < len(segs); i++ {
		if segs[i].Base <= segs[i-1].Base || segs[i].Bytes <= 0 {
			t.Fatalf("segments out of order or empty: %+v", segs)
		}
	}
	cut := segs[len(segs)-2].Base
	if err := s.DeleteBelow(cut); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(cut - 1); !errors.Is(err, ErrBelowFloor) {
		t.Fatalf("read below the cut: %v", err)
	}
	if _, err := s.Read(cut); err != nil {
		t.Fatalf("read at the cut: %v", err)
	}
	if at, err := s.AppendedAt(cut); err != nil || !at.IsZero() {
		t.Fatalf("appended at (entries written here carry none): %v %v", at, err)
	}
	if err := s.DeleteBelow(s.LastIndex() + 1); err == nil {
		t.Fatal("deleting the whole log was allowed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		segs2, _ := s.Segments()
		if len(segs2) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("segments after deleting below %d: %+v", cut, segs2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Close()
	s, err = Open(dir, Options{Kind: KindWAL, SegmentSize: 16 << 10})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if first, _ := s.raw.FirstIndex(); first != cut || s.LastIndex() != entries {
		t.Fatalf("after reopen: first %d last %d, want %d and %d", first, s.LastIndex(), cut, entries)
	}
}

// After installing a snapshot raft deletes the whole log (raft-wal cannot
// hold a gap) and appends after the snapshot. The watermark must not then
// claim the deleted entries, or the node would refuse to start.
func TestWholeLogDeleteAfterSnapshotInstall(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Kind: KindWAL})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := s.Log.(raft.MonotonicLogStore)
	if !ok || !m.IsMonotonic() {
		t.Fatal("the raft-wal log does not tell raft it is monotonic")
	}
	writeEntries(t, s, 11, 30) // a log that starts past 1, as one does after retention
	time.Sleep(3 * watermarkEvery)
	if err := s.Log.DeleteRange(11, 40); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, Options{Kind: KindWAL})
	if err != nil {
		t.Fatalf("reopen with an emptied log: %v", err)
	}
	writeEntries(t, s, 101, 5)
	s.Close()
	if s, err = Open(dir, Options{Kind: KindWAL}); err != nil {
		t.Fatalf("reopen after appending past the snapshot: %v", err)
	}
	defer s.Close()
	if first, _ := s.raw.FirstIndex(); first != 101 || s.LastIndex() != 105 {
		t.Fatalf("first %d last %d", first, s.LastIndex())
	}
	b, err := Open(t.TempDir(), Options{Kind: KindBolt})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if m, ok := b.Log.(raft.MonotonicLogStore); ok && m.IsMonotonic() {
		t.Fatal("bolt log says it is monotonic")
	}
}
