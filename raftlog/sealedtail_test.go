package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// sealedTailOptions makes segments of about 28 test entries.
var sealedTailOptions = Options{Kind: KindWAL, SegmentSize: 4 << 10}

// sealedTailDir returns a data directory as a Close that ran before raft-wal's
// rotation leaves it: the append of entry last (entries are appended one at
// a time) filled segment 1 and wrote its index, and the metadata still lists
// segment 1 as the unsealed tail.
func sealedTailDir(t *testing.T) (dir string, last uint64, path string) {
	t.Helper()
	// Where the first segment fills: the same entries fill it at the same
	// index every time.
	probe := t.TempDir()
	s := openTest(t, probe, sealedTailOptions)
	for i := 1; i <= 60; i++ {
		writeEntries(t, s, i, 1)
	}
	closeTest(t, s)
	st := loadMeta(t, probe)
	if len(st.Segments) < 2 || st.Segments[0].SealTime.IsZero() {
		t.Fatalf("60 entries did not fill a 4 KiB segment: %+v", st.Segments)
	}
	last = st.Segments[0].MaxIndex

	dir = t.TempDir()
	s = openTest(t, dir, sealedTailOptions)
	for i := 1; i <= int(last); i++ {
		writeEntries(t, s, i, 1)
	}
	closeTest(t, s)
	// The rotation may have run before Close: undo it.
	logDir := filepath.Join(dir, "log")
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(logDir)
	if err != nil {
		t.Fatal(err)
	}
	seg := st.Segments[0]
	switch {
	case len(st.Segments) == 1 && seg.SealTime.IsZero():
	case len(st.Segments) == 2 && !seg.SealTime.IsZero() && st.Segments[1].BaseIndex == last+1:
		seg.SealTime, seg.MaxIndex, seg.IndexStart = time.Time{}, 0, 0
		if err := meta.CommitState(types.PersistentState{NextSegmentID: seg.ID + 1, Segments: []types.SegmentInfo{seg}}); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(logDir, segment.FileName(st.Segments[1]))); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unexpected segments after %d entries: %+v", last, st.Segments)
	}
	if err := meta.Close(); err != nil {
		t.Fatal(err)
	}
	// raft-wal alone recovers that file as a sealed tail.
	w, err := segment.NewFiler(logDir, fs.New()).RecoverTail(seg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if sealed, _, _ := w.Sealed(); !sealed || w.LastIndex() != last {
		t.Fatalf("tail recovered as sealed=%v last=%d, want sealed at %d", sealed, w.LastIndex(), last)
	}
	return dir, last, filepath.Join(logDir, segment.FileName(seg))
}

func openTest(t *testing.T, dir string, opts Options) *Stores {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func closeTest(t *testing.T, s *Stores) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func loadMeta(t *testing.T, dir string) types.PersistentState {
	t.Helper()
	meta := &metadb.BoltMetaDB{}
	defer meta.Close()
	st, err := meta.Load(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkLog asserts that the store holds entries 1..last, each readable.
func checkLog(t *testing.T, s *Stores, last uint64) {
	t.Helper()
	if s.FirstIndex() != 1 || s.LastIndex() != last {
		t.Fatalf("log holds %d..%d, want 1..%d", s.FirstIndex(), s.LastIndex(), last)
	}
	for i := uint64(1); i <= last; i++ {
		if _, err := s.Read(i); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
	}
}

// appendAndRestart appends n entries one at a time after the log's last,
// checks the log, and does it again after a restart: a restart after those
// appends must be as clean as any other.
func appendAndRestart(t *testing.T, dir string, s *Stores, n int) {
	t.Helper()
	for round := 0; round < 2; round++ {
		last := int(s.LastIndex())
		for i := last + 1; i <= last+n; i++ {
			writeEntries(t, s, i, 1)
		}
		checkLog(t, s, uint64(last+n))
		closeTest(t, s)
		s = openTest(t, dir, sealedTailOptions)
		checkLog(t, s, uint64(last+n))
	}
	closeTest(t, s)
}

func logTo(buf *bytes.Buffer) Options {
	opts := sealedTailOptions
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Info})
	return opts
}

// TestSealedTailAtCloseStartsNewSegment: a log whose last append before
// Close filled its segment opens, says so, and takes appends; every entry
// reads back, and later restarts are clean.
func TestSealedTailAtCloseStartsNewSegment(t *testing.T) {
	dir, last, _ := sealedTailDir(t)
	var logs bytes.Buffer
	s := openTest(t, dir, logTo(&logs))
	if !strings.Contains(logs.String(), "log tail segment 0 was sealed by a shutdown at a segment's end: starting segment 1") {
		t.Errorf("no Info line about the sealed tail in:\n%s", logs.String())
	}
	checkLog(t, s, last)
	st := loadMetaOpen(t, s)
	if n := len(st); n != 2 || st[0].Base != 1 || st[1].Base != last+1 {
		t.Fatalf("segments after open: %+v, want 1 and %d", st, last+1)
	}
	appendAndRestart(t, dir, s, 70)
}

// loadMetaOpen lists the segment files of an open store.
func loadMetaOpen(t *testing.T, s *Stores) []Segment {
	t.Helper()
	segs, err := s.Segments()
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// TestSealedTailRepairInterrupted: a start that ends after the repair
// recorded the seal and the next segment, before raft-wal created that
// segment's file, leaves a log the next start opens.
func TestSealedTailRepairInterrupted(t *testing.T) {
	dir, last, _ := sealedTailDir(t)
	logDir := filepath.Join(dir, "log")
	if err := startAfterSealedTail(logDir, sealedTailOptions.SegmentSize, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	st := loadMeta(t, dir)
	if len(st.Segments) != 2 || st.Segments[0].SealTime.IsZero() || st.Segments[0].MaxIndex != last ||
		!st.Segments[1].SealTime.IsZero() || st.Segments[1].BaseIndex != last+1 {
		t.Fatalf("metadata after the repair: %+v", st.Segments)
	}
	if _, err := os.Stat(filepath.Join(logDir, segment.FileName(st.Segments[1]))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the repair created the next segment's file: %v", err)
	}
	// Run again, as a start after that crash does: nothing more to do.
	if err := startAfterSealedTail(logDir, sealedTailOptions.SegmentSize, hclog.NewNullLogger()); err != nil {
		t.Fatal(err)
	}
	if again := loadMeta(t, dir); len(again.Segments) != 2 || again.NextSegmentID != st.NextSegmentID {
		t.Fatalf("a second repair changed the metadata: %+v", again)
	}
	s := openTest(t, dir, sealedTailOptions)
	checkLog(t, s, last)
	appendAndRestart(t, dir, s, 40)
}

// TestUncommittedSealIsRemoved: a process that died while writing the
// append that seals a segment leaves the index frame without a valid commit
// after it. raft-wal recovers the tail without that append's entry but still
// as sealed; the seal is removed and appends go on in the same segment.
func TestUncommittedSealIsRemoved(t *testing.T) {
	dir, last, path := sealedTailDir(t)
	scan, err := scanSegment(path)
	if err != nil || scan.indexAt == 0 || scan.committedEnd <= scan.indexAt {
		t.Fatalf("scan of the sealed segment: %+v, %v", scan, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[scan.committedEnd-1] ^= 0xFF // the commit frame's CRC
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// The entry was never committed, so the watermark cannot name it.
	if err := writeWatermark(filepath.Join(dir, "LOG_WATERMARK"), last-1); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := openTest(t, dir, logTo(&logs))
	if !strings.Contains(logs.String(), "held a seal its last write never committed") {
		t.Errorf("no Info line about the removed seal in:\n%s", logs.String())
	}
	checkLog(t, s, last-1)
	appendAndRestart(t, dir, s, 40)
}

// TestSealingAppendTornAnywhere: a crash that tore the sealing append at any
// point (everything after some offset of its frames lost, so its commit
// too) leaves a log that opens and takes appends, holding every entry but
// the torn append's.
func TestSealingAppendTornAnywhere(t *testing.T) {
	dir, last, path := sealedTailDir(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	scan, err := scanSegment(path)
	if err != nil {
		t.Fatal(err)
	}
	// The sealing append wrote one entry, the index and the commit; the
	// entry starts after the commit before it.
	before, err := scanUpTo(orig, scan.indexAt)
	if err != nil {
		t.Fatal(err)
	}
	for cut := before; cut < scan.committedEnd; cut += 8 {
		torn := filepath.Join(t.TempDir(), "data")
		if err := os.CopyFS(torn, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		b := append([]byte(nil), orig...)
		clear(b[cut:])
		p := filepath.Join(torn, "log", filepath.Base(path))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeWatermark(filepath.Join(torn, "LOG_WATERMARK"), last-1); err != nil {
			t.Fatal(err)
		}
		s, err := Open(torn, sealedTailOptions)
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if l := s.LastIndex(); l != last-1 {
			t.Fatalf("cut at %d: last index %d, want %d (the torn entry dropped)", cut, l, last-1)
		}
		checkLog(t, s, last-1)
		writeEntries(t, s, int(last), 30)
		checkLog(t, s, last+29)
		closeTest(t, s)
		s = openTest(t, torn, sealedTailOptions)
		checkLog(t, s, last+29)
		closeTest(t, s)
	}
}

// scanUpTo returns the offset just after the last commit frame before
// offset end in the segment file b.
func scanUpTo(b []byte, end int64) (int64, error) {
	off, after := int64(segFileHeaderLen), int64(0)
	for off < end {
		typ := b[off]
		n := int64(binary.LittleEndian.Uint32(b[off+4:]))
		if typ == segFrameCommit {
			n = 0
			after = off + segFrameHeaderLen
		}
		off += segFrameHeaderLen + n + (segFrameHeaderLen-n%segFrameHeaderLen)%segFrameHeaderLen
	}
	if after == 0 {
		return 0, errors.New("no commit before the index")
	}
	return after, nil
}

// TestAppendsAfterCloseAtSegmentEnd is the plain reproduction: entries of
// about 300 bytes appended one at a time until one fills a 4 KiB segment,
// then Close, reopen and append. A Close right after the append usually
// wins the race with raft-wal's rotation; the reopened log must take
// appends either way.
func TestAppendsAfterCloseAtSegmentEnd(t *testing.T) {
	write := func(s *Stores, n uint64) {
		for i := uint64(1); i <= n; i++ {
			data := EncodeBatch(&Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []Message{{Body: bytes.Repeat([]byte{byte(i)}, 300)}}})
			if err := s.Log.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	probe := t.TempDir()
	s := openTest(t, probe, sealedTailOptions)
	write(s, 30)
	closeTest(t, s)
	st := loadMeta(t, probe)
	if len(st.Segments) < 2 || st.Segments[0].SealTime.IsZero() {
		t.Fatalf("30 entries did not fill a 4 KiB segment: %+v", st.Segments)
	}
	last := st.Segments[0].MaxIndex

	dir := t.TempDir()
	s = openTest(t, dir, sealedTailOptions)
	write(s, last)
	// raft-wal's own Close first, as soon as the append returns, as in a
	// shutdown that stops raft right after an append.
	if err := s.raw.(*wal.WAL).Close(); err != nil {
		t.Fatal(err)
	}
	closeTest(t, s)
	if st := loadMeta(t, dir); len(st.Segments) == 1 {
		t.Logf("Close ran before the rotation after entry %d", last)
	}
	s = openTest(t, dir, sealedTailOptions)
	checkLog(t, s, last)
	appendAndRestart(t, dir, s, 10)
}
