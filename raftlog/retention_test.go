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

// After installing a snapshot past the end of its log, raft appends after a
// gap. The log deletes everything before the gap (raft-wal cannot hold one,
// and no old entry may be served again), the watermark does not claim the
// deleted entries (the node would refuse to start), and the store never
// tells raft it is monotonic: raft would then delete the whole log after
// installing any snapshot, also one older than the log's end, and panic.
func TestAppendAfterGapReplacesTheLog(t *testing.T) {
	for _, kind := range []string{KindWAL, KindBolt} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			if m, ok := s.Log.(raft.MonotonicLogStore); ok && m.IsMonotonic() {
				t.Fatal("the log tells raft it is monotonic")
			}
			writeEntries(t, s, 11, 30) // a log that starts past 1, as one does after retention
			if _, err := s.Read(20); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * watermarkEvery)
			writeEntries(t, s, 101, 5) // after a snapshot at 100
			if first, _ := s.raw.FirstIndex(); first != 101 || s.LastIndex() != 105 {
				t.Fatalf("after the gap: first %d last %d, want 101 and 105", first, s.LastIndex())
			}
			if _, err := s.Read(20); !errors.Is(err, ErrBelowFloor) {
				t.Fatalf("an entry from before the gap is still served: %v", err)
			}
			s.Close()
			if s, err = Open(dir, Options{Kind: kind}); err != nil {
				t.Fatalf("reopen after the gap: %v", err)
			}
			defer s.Close()
			if first, _ := s.raw.FirstIndex(); first != 101 || s.LastIndex() != 105 {
				t.Fatalf("after reopen: first %d last %d", first, s.LastIndex())
			}
		})
	}
}
