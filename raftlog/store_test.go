package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func writeEntries(t *testing.T, s *Stores, from, n int) {
	t.Helper()
	var logs []*raft.Log
	for i := from; i < from+n; i++ {
		logs = append(logs, &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand,
			Data: EncodeBatch(&Request{Topic: "t", Messages: []Message{{Body: []byte(strings.Repeat("x", 100))}}})})
	}
	if err := s.Log.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
}

func TestStoresReadAndFloor(t *testing.T) {
	for _, kind := range []string{KindWAL, KindBolt} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			writeEntries(t, s, 1, 20)
			if _, err := s.Read(5); err != nil {
				t.Fatal(err)
			}
			s.SetFloor(10)
			s.SetFloor(3) // never lowers
			if _, err := s.Read(5); !errors.Is(err, ErrBelowFloor) {
				t.Fatalf("read below floor: %v", err)
			}
			if s.FirstIndex() != 10 || s.LastIndex() != 20 {
				t.Fatalf("first %d last %d", s.FirstIndex(), s.LastIndex())
			}
			if _, err := s.Read(21); !errors.Is(err, ErrBelowFloor) {
				t.Fatalf("read missing: %v", err)
			}
			if n, err := s.Verify(nil); err != nil || n != 11 {
				t.Fatalf("verify: %d %v", n, err)
			}
		})
	}
}

func TestOpenRefusesOtherKind(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Kind: KindBolt})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(dir, Options{Kind: KindWAL}); err == nil || !strings.Contains(err.Error(), `holds a "bolt"`) {
		t.Fatalf("err %v", err)
	}
	if _, err := Open(t.TempDir(), Options{Kind: "sqlite"}); err == nil {
		t.Fatal("unknown kind accepted")
	}
}

// TestVerifyFindsFlippedByte flips a byte inside a stored batch on disk and
// checks that Verify reports the entry.
func TestVerifyFindsFlippedByte(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Kind: KindWAL})
	if err != nil {
		t.Fatal(err)
	}
	writeEntries(t, s, 1, 50)
	s.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "log", "*.wal"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no wal segment")
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	pos := strings.Index(string(b), strings.Repeat("x", 100)) + 50 // inside a body
	if pos < 50 {
		t.Fatal("body not found in segment")
	}
	b[pos] = 'y'
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	// raft-wal drops the damaged record and all after it on open (it takes
	// it for a torn write); the watermark notices the lost entries.
	s, err = Open(dir, Options{Kind: KindWAL})
	if err == nil {
		_, err = s.Verify(nil)
		s.Close()
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open/verify after flip: %v", err)
	}
}

// TestWatermarkAllowsTailTruncation: raft deleting a conflicting suffix is
// not corruption.
func TestWatermarkAllowsTailTruncation(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{Kind: KindWAL})
	if err != nil {
		t.Fatal(err)
	}
	writeEntries(t, s, 1, 30)
	time.Sleep(3 * watermarkEvery)
	if err := s.Log.DeleteRange(21, 30); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, Options{Kind: KindWAL})
	if err != nil {
		t.Fatalf("reopen after tail truncation: %v", err)
	}
	defer s.Close()
	if s.LastIndex() != 20 {
		t.Fatalf("last %d", s.LastIndex())
	}
}

// failingStore is a log store whose writes fail, as raft-wal's do once a
// full disk left its tail sealed or a half-created segment file behind.
type failingStore struct {
	*raft.InmemStore
	err error
}

func (f *failingStore) StoreLogs([]*raft.Log) error       { return f.err }
func (f *failingStore) DeleteRange(min, max uint64) error { return f.err }

// TestFailedWriteIsFatal: a failed append or tail deletion is reported to
// OnFatal (the server exits and is restarted) instead of leaving a node up
// whose log store refuses every write (docs/RELIABILITY.md, "wal-stuck").
func TestFailedWriteIsFatal(t *testing.T) {
	for _, msg := range []string{"segment is sealed", "open 00000000000000001172-0000000000000001.wal: file exists"} {
		raw := &failingStore{InmemStore: raft.NewInmemStore(), err: errors.New(msg)}
		if err := raw.InmemStore.StoreLogs([]*raft.Log{{Index: 1}, {Index: 2}}); err != nil {
			t.Fatal(err)
		}
		var fatal []error
		g, err := newGuard(raw, filepath.Join(t.TempDir(), "LOG_WATERMARK"), func(uint64) {}, func(err error) { fatal = append(fatal, err) })
		if err != nil {
			t.Fatal(err)
		}
		if err := g.StoreLogs([]*raft.Log{{Index: 3}}); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("StoreLogs: %v, want the store's error %q", err, msg)
		}
		if err := g.DeleteRange(2, 2); err == nil {
			t.Errorf("DeleteRange succeeded on a failing store")
		}
		g.close()
		if len(fatal) != 2 {
			t.Fatalf("%q: OnFatal called %d times, want 2 (append and delete): %v", msg, len(fatal), fatal)
		}
		for _, err := range fatal {
			if !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "restart the node") {
				t.Errorf("fatal error %q does not name the cause and the remedy", err)
			}
		}
	}
}

// TestFailedWatermarkWriteIsFatal: the periodic watermark write reports a
// failure to OnFatal like a failed append, instead of ignoring it and
// leaving the watermark behind the log.
func TestFailedWatermarkWriteIsFatal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone", "LOG_WATERMARK") // its directory does not exist
	fatal := make(chan error, 16)
	g, err := newGuard(raft.NewInmemStore(), path, func(uint64) {}, func(err error) {
		select {
		case fatal <- err:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	if err := g.StoreLogs([]*raft.Log{{Index: 1, Term: 1}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fatal:
		if !strings.Contains(err.Error(), "watermark") || !strings.Contains(err.Error(), "restart the node") ||
			!errors.Is(err, os.ErrNotExist) {
			t.Errorf("fatal error %q does not name the watermark, the remedy and the cause", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a failed watermark write was not reported as fatal")
	}
}

// TestReadChecksBatchCRC: Read verifies a batch's CRC as it loads it from
// the log store (pulls parse it with ParseReadBatch, which does not), and
// does not cache what failed.
func TestReadChecksBatchCRC(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Kind: KindBolt})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := EncodeBatch(&Request{Topic: "t", Messages: []Message{{Body: []byte("hello")}}})
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0x40
	if err := s.Log.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: good},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: bad}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(1); err != nil {
		t.Fatalf("good entry: %v", err)
	}
	for i := 0; i < 2; i++ {
		if _, err := s.Read(2); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("read %d of a batch with a flipped byte: %v, want ErrCorrupt", i+1, err)
		}
	}
}

// TestOpenReportsMissingSegment: a sealed segment file deleted from under
// raft-wal makes Open fail with ErrMissingSegment (a repair case), not with
// an anonymous "no such file".
func TestOpenReportsMissingSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Kind: KindWAL, SegmentSize: 64 << 10}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2000; i += 100 {
		writeEntries(t, s, i, 100)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := filepath.Glob(filepath.Join(dir, "log", "*.wal"))
	if err != nil || len(segs) < 3 {
		t.Fatalf("want at least 3 segments, have %v (%v)", segs, err)
	}
	sort.Strings(segs)
	if err := os.Remove(segs[1]); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, opts)
	if err == nil {
		s.Close()
		t.Fatal("opened a log with a segment missing")
	}
	if !errors.Is(err, ErrMissingSegment) || !NeedsRepair(err) {
		t.Fatalf("open with a segment missing: %v, want ErrMissingSegment", err)
	}
}

// TestDamagedStableStoreRefusesToOpen: bbolt panics on a damaged page
// ("invalid freelist page", found by the chaos suite's corrupt-stable fault)
// or returns its own errors on a damaged meta page; Open turns both into
// ErrCorrupt, so a node refuses to start with the repair steps instead of
// crashing.
func TestDamagedStableStoreRefusesToOpen(t *testing.T) {
	for name, damage := range map[string]func(b []byte){
		"zeroed after the meta pages": func(b []byte) { clear(b[2*4096:]) },
		"zeroed meta pages":           func(b []byte) { clear(b[:2*4096]) },
		"flipped meta byte":           func(b []byte) { b[16] ^= 0xFF; b[4096+16] ^= 0xFF },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Stable.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			s.Close()
			p := filepath.Join(dir, "stable.db")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			damage(b)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err = Open(dir, Options{})
			if err == nil {
				// bbolt noticed nothing: the store must still answer or fail, never panic.
				defer s.Close()
				if _, gerr := s.Stable.GetUint64([]byte("CurrentTerm")); gerr != nil {
					t.Logf("opened; read: %v", gerr)
				}
				return
			}
			t.Log(err)
			if !errors.Is(err, ErrCorrupt) || !NeedsRepair(err) || !strings.Contains(err.Error(), "stable.db") {
				t.Fatalf("open of a damaged stable store: %v, want ErrCorrupt naming stable.db", err)
			}
		})
	}
}

// TestUncleanStart: a directory whose previous process did not Close its
// log (killed) opens as unclean, and stays so across clean restarts until
// Recovered is called; an empty log is never unclean.
func TestUncleanStart(t *testing.T) {
	dir := t.TempDir()
	open := func() *Stores {
		t.Helper()
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if s.Unclean() {
		t.Fatal("a new, empty log is unclean")
	}
	if err := s.Log.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogNoop}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	if s.Unclean() {
		t.Fatal("unclean after a clean Close")
	}
	// A process that ends without Close: the mark was taken at open.
	s.guard.close()
	for _, c := range s.closers {
		c()
	}
	s.closers = nil
	s = open()
	if !s.Unclean() {
		t.Fatal("clean after the process ended without Close")
	}
	s.Close()
	if s = open(); !s.Unclean() {
		t.Fatal("a clean Close before Recovered marked the directory clean")
	}
	s.Recovered()
	s.Close()
	if s = open(); s.Unclean() {
		t.Fatal("unclean after Recovered and a clean Close")
	}
	s.Close()
}
