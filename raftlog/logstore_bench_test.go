package raftlog

// Benchmarks comparing the two candidate raft.LogStore implementations for a
// broker whose Raft log is also the message store:
//
//   - github.com/hashicorp/raft-wal v0.4.2 (segment size 64 MiB)
//   - github.com/hashicorp/raft-boltdb/v2 v2.3.1
//
// Both run with their default durability (fsync on every StoreLogs /
// DeleteRange commit), each in its own b.TempDir().
//
// Run with:
//
//	go test -run '^$' -bench . -benchtime 2000x ./raftlog/
//
// Everything in this file is prefixed with lsb/LSB so it cannot collide with
// other (non-test or test) code in package raftlog.

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
)

const (
	lsbSmallEntry   = 1 << 10  // 1 KiB
	lsbLargeEntry   = 64 << 10 // 64 KiB (group-committed entries)
	lsbBatch        = 64       // entries per StoreLogs call in the batched benchmark
	lsbReadPrefill  = 20000    // entries pre-written for the GetLog benchmarks
	lsbPrefillChunk = 1000     // entries per StoreLogs call while pre-filling (untimed)
	lsbWALSegment   = 64 << 20 // raft-wal segment size
)

// lsbDeletePrefill is the number of live entries the store holds before
// each measured DeleteRange of its head half.
//
// The nominal shape is 20,000 entries / delete 10,000. With -benchtime 2000x
// that would need 2000 x 10,000 x 1 KiB = 20 GB of untimed, fsync'ed refill
// writes per store (and re-opening a fresh store per iteration alone costs
// ~20-50 ms on the reference machine), so the default is 1,000 live entries /
// delete 500 to keep the whole suite at a few minutes. Set
// RAFTLOG_BENCH_DELETE_PREFILL=20000 together with a small -benchtime (e.g.
// 30x) to measure the nominal shape.
var lsbDeletePrefill = func() int {
	if s := os.Getenv("RAFTLOG_BENCH_DELETE_PREFILL"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 2 {
			return n
		}
	}
	return 1000
}()

// lsbStore is the subset of behaviour shared by *wal.WAL and
// *raftboltdb.BoltStore that these benchmarks need.
type lsbStore interface {
	raft.LogStore
	Close() error
}

type lsbKind struct {
	name string
	open func(tb testing.TB, dir string) lsbStore
}

var lsbKinds = []lsbKind{
	{name: "wal", open: lsbOpenWAL},
	{name: "bolt", open: lsbOpenBolt},
}

func lsbOpenWAL(tb testing.TB, dir string) lsbStore {
	tb.Helper()
	w, err := wal.Open(dir, wal.WithSegmentSize(lsbWALSegment))
	if err != nil {
		tb.Fatalf("wal.Open: %v", err)
	}
	return w
}

func lsbOpenBolt(tb testing.TB, dir string) lsbStore {
	tb.Helper()
	s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	if err != nil {
		tb.Fatalf("raftboltdb.New: %v", err)
	}
	return s
}

// lsbPayload returns a deterministic, incompressible payload of n bytes.
func lsbPayload(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// lsbPrefill appends entries [first, first+n) in chunks. Not timed by callers.
func lsbPrefill(tb testing.TB, s lsbStore, first uint64, n int, data []byte) {
	tb.Helper()
	logs := make([]raft.Log, lsbPrefillChunk)
	ptrs := make([]*raft.Log, lsbPrefillChunk)
	for i := range logs {
		ptrs[i] = &logs[i]
	}
	idx := first
	for left := n; left > 0; {
		c := min(left, lsbPrefillChunk)
		for i := 0; i < c; i++ {
			logs[i] = raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
			idx++
		}
		if err := s.StoreLogs(ptrs[:c]); err != nil {
			tb.Fatalf("prefill StoreLogs: %v", err)
		}
		left -= c
	}
}

func lsbClose(tb testing.TB, s lsbStore) {
	tb.Helper()
	if err := s.Close(); err != nil {
		tb.Errorf("Close: %v", err)
	}
}

func lsbReportEntries(b *testing.B, entries int) {
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(float64(entries)/sec, "entries/s")
	}
}

// lsbBenchStore measures StoreLogs with `batch` entries of `size` bytes per
// call; one op is one StoreLogs call (one fsync'ed commit).
func lsbBenchStore(b *testing.B, open func(testing.TB, string) lsbStore, size, batch int) {
	s := open(b, b.TempDir())
	defer lsbClose(b, s)

	data := lsbPayload(size)
	logs := make([]raft.Log, batch)
	ptrs := make([]*raft.Log, batch)
	for i := range logs {
		logs[i] = raft.Log{Term: 1, Type: raft.LogCommand, Data: data}
		ptrs[i] = &logs[i]
	}
	idx := uint64(1)

	b.SetBytes(int64(size * batch))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range logs {
			logs[j].Index = idx
			idx++
		}
		if err := s.StoreLogs(ptrs); err != nil {
			b.Fatalf("StoreLogs: %v", err)
		}
	}
	b.StopTimer()
	lsbReportEntries(b, b.N*batch)
}

// lsbBenchGet measures GetLog over lsbReadPrefill pre-written 1 KiB entries.
func lsbBenchGet(b *testing.B, open func(testing.TB, string) lsbStore, random bool) {
	s := open(b, b.TempDir())
	defer lsbClose(b, s)
	lsbPrefill(b, s, 1, lsbReadPrefill, lsbPayload(lsbSmallEntry))

	order := make([]uint64, lsbReadPrefill)
	for i := range order {
		order[i] = uint64(i + 1)
	}
	if random {
		r := rand.New(rand.NewPCG(3, 4))
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}

	var l raft.Log
	b.SetBytes(lsbSmallEntry)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idx := order[i%len(order)]
		if err := s.GetLog(idx, &l); err != nil {
			b.Fatalf("GetLog(%d): %v", idx, err)
		}
		if l.Index != idx || len(l.Data) != lsbSmallEntry {
			b.Fatalf("GetLog(%d) returned index %d, %d bytes", idx, l.Index, len(l.Data))
		}
	}
	b.StopTimer()
	lsbReportEntries(b, b.N)
}

// lsbBenchDeleteHead measures one DeleteRange(first, first+n/2-1) on a store
// holding exactly n = lsbDeletePrefill live entries.
//
// Instead of re-opening a brand-new store for every iteration (whose
// open/create/fsync/remove overhead would dominate the run time), the state is
// re-created with the timer stopped by appending n/2 new entries after each
// delete, so every measured call again sees n live entries and deletes the
// oldest half. This is the broker's steady state: the log is appended at the
// tail and truncated at the head, raft-wal rolls and drops whole segments as
// the head passes them, and bbolt reuses freed pages from its freelist.
func lsbBenchDeleteHead(b *testing.B, open func(testing.TB, string) lsbStore) {
	n := lsbDeletePrefill
	half := n / 2
	data := lsbPayload(lsbSmallEntry)

	s := open(b, b.TempDir())
	defer lsbClose(b, s)
	lsbPrefill(b, s, 1, n, data)

	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		first, err := s.FirstIndex()
		if err != nil {
			b.Fatal(err)
		}
		last, err := s.LastIndex()
		if err != nil {
			b.Fatal(err)
		}
		if live := last - first + 1; live != uint64(n) {
			b.Fatalf("live entries before DeleteRange = %d, want %d", live, n)
		}
		b.StartTimer()

		if err := s.DeleteRange(first, first+uint64(half)-1); err != nil {
			b.Fatalf("DeleteRange: %v", err)
		}

		b.StopTimer()
		if got, err := s.FirstIndex(); err != nil || got != first+uint64(half) {
			b.Fatalf("FirstIndex after DeleteRange = %d, %v; want %d", got, err, first+uint64(half))
		}
		// Re-create the "n live entries" state (untimed).
		lsbPrefill(b, s, last+1, half, data)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(half), "entries-deleted/op")
}

func BenchmarkLogStore(b *testing.B) {
	cases := []struct {
		name string
		run  func(b *testing.B, open func(testing.TB, string) lsbStore)
	}{
		{"StoreLogs/1KiB/batch=1", func(b *testing.B, o func(testing.TB, string) lsbStore) {
			lsbBenchStore(b, o, lsbSmallEntry, 1)
		}},
		{"StoreLogs/1KiB/batch=64", func(b *testing.B, o func(testing.TB, string) lsbStore) {
			lsbBenchStore(b, o, lsbSmallEntry, lsbBatch)
		}},
		{"StoreLogs/64KiB/batch=1", func(b *testing.B, o func(testing.TB, string) lsbStore) {
			lsbBenchStore(b, o, lsbLargeEntry, 1)
		}},
		{"GetLog/random/" + strconv.Itoa(lsbReadPrefill), func(b *testing.B, o func(testing.TB, string) lsbStore) {
			lsbBenchGet(b, o, true)
		}},
		{"GetLog/sequential/" + strconv.Itoa(lsbReadPrefill), func(b *testing.B, o func(testing.TB, string) lsbStore) {
			lsbBenchGet(b, o, false)
		}},
		{"DeleteRange/head-half/" + strconv.Itoa(lsbDeletePrefill), func(b *testing.B, o func(testing.TB, string) lsbStore) {
			lsbBenchDeleteHead(b, o)
		}},
	}
	// wal and bolt are interleaved per case so that load drift on a shared
	// machine does not bias one store as a whole.
	for _, c := range cases {
		for _, k := range lsbKinds {
			b.Run(k.name+"/"+c.name, func(b *testing.B) { c.run(b, k.open) })
		}
	}
}

// TestWALReturnsDeletedEntries documents a raft-wal v0.4.2 behaviour that our
// read path must defend against.
//
// After a head DeleteRange, raft-wal only moves the head segment's MinIndex
// (FirstIndex) forward; the entries themselves stay in the segment file until
// the whole segment is deleted. While they are in the *tail* (unsealed)
// segment, WAL.GetLog consults the tail writer first and that writer does not
// check MinIndex, so GetLog succeeds for indexes below FirstIndex. With the
// default 64 MiB segment size, 100 small entries all live in the tail segment.
//
// Consequence: the broker's read path (consumers fetching by offset/index)
// must enforce its own floor (idx >= FirstIndex / our retention low-water
// mark) and must never treat a successful GetLog as proof that an entry is
// still retained. raft-boltdb does not have this problem (deleted keys are
// gone and GetLog returns raft.ErrLogNotFound).
func TestWALReturnsDeletedEntries(t *testing.T) {
	w, err := wal.Open(t.TempDir()) // default segment size
	if err != nil {
		t.Fatalf("wal.Open: %v", err)
	}
	defer w.Close()

	logs := make([]*raft.Log, 100)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand,
			Data: []byte("msg-" + strconv.Itoa(i+1))}
	}
	if err := w.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs: %v", err)
	}
	if err := w.DeleteRange(1, 50); err != nil {
		t.Fatalf("DeleteRange(1, 50): %v", err)
	}

	first, err := w.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	if first != 51 {
		t.Fatalf("FirstIndex after DeleteRange(1, 50) = %d, want 51", first)
	}
	if last, _ := w.LastIndex(); last != 100 {
		t.Fatalf("LastIndex = %d, want 100", last)
	}

	// Observed behaviour in v0.4.2: entries below FirstIndex are still
	// returned, with their original content, while they sit in the tail
	// segment.
	for _, idx := range []uint64{1, 25, 50} {
		var l raft.Log
		err := w.GetLog(idx, &l)
		if errors.Is(err, raft.ErrLogNotFound) || errors.Is(err, wal.ErrNotFound) {
			t.Fatalf("GetLog(%d) below FirstIndex=%d returned not-found; raft-wal "+
				"behaviour changed, revisit the read-path floor comment", idx, first)
		}
		if err != nil {
			t.Fatalf("GetLog(%d): unexpected error %v", idx, err)
		}
		if l.Index != idx || string(l.Data) != "msg-"+strconv.Itoa(int(idx)) {
			t.Fatalf("GetLog(%d) = index %d data %q", idx, l.Index, l.Data)
		}
	}

	// Entries at/above the floor are of course readable.
	var l raft.Log
	if err := w.GetLog(first, &l); err != nil || l.Index != first {
		t.Fatalf("GetLog(%d) = %d, %v", first, l.Index, err)
	}
}
