package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// syncBuffer is a log destination tests read while a goroutine writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeMarked stores entries from..to, each a batch whose body starts with
// "entry-%05d-", over 64 KiB segments; it returns the bytes of their data.
func writeMarked(t *testing.T, s *Stores, from, to int) (data uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		body := fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", 300))
		l := &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand,
			Data: EncodeBatch(&Request{Topic: "t", Messages: []Message{{Body: []byte(body)}}})}
		if err := s.Log.StoreLog(l); err != nil {
			t.Fatal(err)
		}
		data += uint64(len(l.Data))
	}
	return data
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStartCheckFrom: what a node checks before it starts is the log after
// the snapshot raft restores, extended down to the watermark it opened
// with (entries above it may be torn) and, after a crash, to raft-wal's
// tail segment; never below the log's first entry.
func TestStartCheckFrom(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Kind: KindWAL, SegmentSize: 64 << 10}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	writeMarked(t, s, 1, 400) // about 140 KiB: two sealed segments and a tail
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopen := func() *Stores {
		t.Helper()
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	s = reopen() // clean stop: the watermark is the end of the log
	if s.Unclean() {
		t.Fatal("a cleanly closed log opened unclean")
	}
	for _, tc := range []struct{ snap, want uint64 }{{0, 1}, {250, 251}, {400, 401}} {
		if got := s.StartCheckFrom(tc.snap); got != tc.want {
			t.Errorf("clean, snapshot %d: StartCheckFrom %d, want %d", tc.snap, got, tc.want)
		}
	}
	segs, err := s.Segments()
	if err != nil || len(segs) < 3 {
		t.Fatalf("segments %v, %v: want at least three", segs, err)
	}
	tail := segs[len(segs)-1].Base
	s.Close()

	// Entries above the watermark are checked even when a snapshot covers them.
	if err := writeWatermark(filepath.Join(dir, "LOG_WATERMARK"), 300); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	if got := s.StartCheckFrom(350); got != 301 {
		t.Errorf("watermark 300, snapshot 350: StartCheckFrom %d, want 301", got)
	}
	s.Close()

	// After a crash, the whole tail segment raft-wal recovered.
	if err := os.Remove(filepath.Join(dir, cleanMark)); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	if !s.Unclean() {
		t.Fatal("a log without the clean mark opened clean")
	}
	if got, want := s.StartCheckFrom(399), min(tail, 400); got != want {
		t.Errorf("unclean, tail segment from %d, snapshot 399: StartCheckFrom %d, want %d", tail, got, want)
	}
	s.Recovered()
	s.Close()

	// Never below the first entry the log holds.
	s = reopen()
	defer s.Close()
	if err := s.DeleteBelow(200); err != nil {
		t.Fatal(err)
	}
	first := s.FirstIndex()
	if got := s.StartCheckFrom(10); got != first {
		t.Errorf("log from %d, snapshot 10: StartCheckFrom %d", first, got)
	}
	if n, err := s.VerifyRange(s.StartCheckFrom(350), 1<<62, nil); err != nil || n != 50 {
		t.Errorf("VerifyRange(351..): %d entries, %v; want 50", n, err)
	}
}

// TestBackgroundCheckFindsDamage: a flipped byte in an old entry that no
// read meets is found by the background check after it started, reported
// once through OnDamaged and Damaged as a read would report it, and the
// check ends there.
func TestBackgroundCheckFindsDamage(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	reported := map[uint64]int{}
	s, err := Open(dir, Options{Kind: KindWAL, SegmentSize: 64 << 10, CacheSize: 4, ReadCache: 1,
		OnDamaged: func(idx uint64, err error) {
			mu.Lock()
			reported[idx]++
			mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeMarked(t, s, 1, 400)
	const bad = 123
	flipInSealedSegment(t, dir, fmt.Sprintf("entry-%05d-", bad))
	if idx, _ := s.Damaged(); idx != 0 {
		t.Fatalf("damage %d reported before any read", idx)
	}
	logs := &syncBuffer{}
	if err := s.VerifyInBackground(BackgroundCheck{From: 1, To: 300, BytesPerSecond: 1 << 20,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs})}); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyInBackground(BackgroundCheck{From: 1, To: 300}); err == nil {
		t.Error("a second background check started")
	}
	var p CheckProgress
	waitUntil(t, 60*time.Second, "the background check to end", func() bool {
		p, _ = s.BackgroundProgress()
		return p.Done
	})
	if p.Damaged != bad || !errors.Is(p.Err, ErrCorrupt) || p.Entries != bad-1 {
		t.Fatalf("progress %+v: want damage at %d after %d good entries", p, bad, bad-1)
	}
	if idx, err := s.Damaged(); idx != bad || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Damaged() = %d, %v; want %d", idx, err, bad)
	}
	mu.Lock()
	if len(reported) != 1 || reported[bad] != 1 {
		t.Errorf("OnDamaged calls %v, want index %d once", reported, bad)
	}
	mu.Unlock()
	if out := logs.String(); !strings.Contains(out, "found a damaged entry") || !strings.Contains(out, fmt.Sprintf("index=%d", bad)) {
		t.Errorf("no log line names the damaged entry:\n%s", out)
	}
	if p.Fraction() != 1 {
		t.Errorf("Fraction of an ended check: %v", p.Fraction())
	}
}

// TestBackgroundCheckPacedWithProgress: an intact range is checked entry by
// entry, no faster than its pace, with progress (entries, MB, percent,
// ETA) logged as it goes and a line when it is done.
func TestBackgroundCheckPacedWithProgress(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Kind: KindWAL, SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := writeMarked(t, s, 1, 400)
	const rate = 200_000 // bytes/s: about 0.7 s for the 140 KB
	logs := &syncBuffer{}
	start := time.Now()
	if err := s.VerifyInBackground(BackgroundCheck{From: 1, To: 400, BytesPerSecond: rate, ProgressEvery: 100 * time.Millisecond,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs})}); err != nil {
		t.Fatal(err)
	}
	var p CheckProgress
	waitUntil(t, 60*time.Second, "the background check to end", func() bool {
		p, _ = s.BackgroundProgress()
		return p.Done
	})
	took := time.Since(start)
	if p.Damaged != 0 || p.Entries != 400 || p.Bytes != data || p.Next != 401 {
		t.Fatalf("progress %+v: want 400 entries, %d bytes, no damage", p, data)
	}
	if least := time.Duration(float64(data)/rate*float64(time.Second)) - paceSlack; took < least {
		t.Errorf("checked %d bytes in %s, faster than the pace allows (%s)", data, took, least)
	}
	out := logs.String()
	for _, want := range []string{"checking the log in the background", "background log check: entries=", "percent=", "eta=", "background log check finished: no damaged entry"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestBackgroundCheckStopsOnClose: Close stops a check that would take
// hours at once (goleak in TestMain sees a goroutine left behind).
func TestBackgroundCheckStopsOnClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Kind: KindWAL, SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	writeMarked(t, s, 1, 400)
	if err := s.VerifyInBackground(BackgroundCheck{From: 1, To: 400, BytesPerSecond: 10}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the check to start", func() bool {
		p, _ := s.BackgroundProgress()
		return p.Entries > 0
	})
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Close took %s", took)
	}
	if p, _ := s.BackgroundProgress(); p.Done || p.Entries >= 400 {
		t.Errorf("progress after Close %+v: want stopped part way", p)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.VerifyInBackground(BackgroundCheck{From: 1, To: 400}); err == nil {
		t.Error("a background check started on closed stores")
	}
}

// TestBackgroundCheckSkipsDeletedEntries: retention deleting the head of
// the log while the check runs is not damage.
func TestBackgroundCheckSkipsDeletedEntries(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var reported []uint64
	s, err := Open(dir, Options{Kind: KindWAL, SegmentSize: 64 << 10, OnDamaged: func(idx uint64, _ error) {
		mu.Lock()
		reported = append(reported, idx)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writeMarked(t, s, 1, 400)
	if err := s.VerifyInBackground(BackgroundCheck{From: 1, To: 400, BytesPerSecond: 100_000}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the check to start", func() bool {
		p, _ := s.BackgroundProgress()
		return p.Entries > 0
	})
	if err := s.DeleteBelow(300); err != nil {
		t.Fatal(err)
	}
	var p CheckProgress
	waitUntil(t, 60*time.Second, "the background check to end", func() bool {
		p, _ = s.BackgroundProgress()
		return p.Done
	})
	mu.Lock()
	defer mu.Unlock()
	if p.Damaged != 0 || len(reported) > 0 {
		t.Fatalf("deleted entries reported as damage: progress %+v, OnDamaged %v", p, reported)
	}
	if p.Next != 401 {
		t.Errorf("progress %+v: want it to go on after the deleted entries to the end", p)
	}
}

// TestBackgroundCheckResumes: a check stopped by Close goes on after the
// reopen from the entry where it stopped, and one that went through
// starts over at the beginning of its range.
func TestBackgroundCheckResumes(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Kind: KindWAL, SegmentSize: 64 << 10}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	writeMarked(t, s, 1, 400)
	if err := s.VerifyInBackground(BackgroundCheck{From: 1, To: 400, BytesPerSecond: 20_000, Resume: true}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the check to get some way", func() bool {
		p, _ := s.BackgroundProgress()
		return p.Entries >= 20
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stopped, _ := s.BackgroundProgress()
	if stopped.Done || stopped.Next < 21 || stopped.Next > 400 {
		t.Fatalf("progress at Close %+v: want part way", stopped)
	}
	run := func() CheckProgress {
		t.Helper()
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.VerifyInBackground(BackgroundCheck{From: 1, To: 400, Resume: true}); err != nil {
			t.Fatal(err)
		}
		var p CheckProgress
		waitUntil(t, 60*time.Second, "the check to end", func() bool {
			p, _ = s.BackgroundProgress()
			return p.Done
		})
		return p
	}
	if p := run(); p.Damaged != 0 || p.Entries != 400-stopped.Next+1 {
		t.Fatalf("resumed check %+v: want the %d entries from %d on", p, 400-stopped.Next+1, stopped.Next)
	}
	if p := run(); p.Entries != 400 {
		t.Fatalf("check after one that went through %+v: want all 400 entries again", p)
	}
}
