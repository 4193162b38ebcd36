package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// countingVFS counts the fsyncs of the files it opens; gate, when set,
// holds every fsync until it is closed, and fail makes them fail.
type countingVFS struct {
	types.VFS
	syncs atomic.Int64
	gate  chan struct{}
	fail  atomic.Bool
}

func (v *countingVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &countingFile{WritableFile: f, v: v}, nil
}

type countingFile struct {
	types.WritableFile
	v *countingVFS
}

func (f *countingFile) Sync() error {
	if f.v.gate != nil {
		<-f.v.gate
	}
	if f.v.fail.Load() {
		return errors.New("injected fsync failure")
	}
	f.v.syncs.Add(1)
	return f.WritableFile.Sync()
}

// newTestSyncVFS returns the QuorumMemory file system over a counting one
// in a temporary directory, with its syncer (closed at the end).
func newTestSyncVFS(t *testing.T, c DurabilityConfig, gate chan struct{}) (*syncVFS, *countingVFS, *syncer, *atomic.Int32) {
	t.Helper()
	cv := &countingVFS{VFS: fs.New(), gate: gate}
	fatal := new(atomic.Int32)
	sy := newSyncer(c, func(error) { fatal.Add(1) })
	t.Cleanup(func() { sy.Close() })
	return &syncVFS{VFS: cv, s: sy}, cv, sy, fatal
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// An append (write, then Sync) returns without an fsync; the fsync follows
// within the interval, and not much earlier.
func TestQuorumMemoryFsyncsWithinTheInterval(t *testing.T) {
	const interval = 80 * time.Millisecond
	v, cv, _, _ := newTestSyncVFS(t, DurabilityConfig{Mode: QuorumMemory, SyncInterval: interval, SyncBytes: 1 << 20}, nil)
	f, err := v.Create(t.TempDir(), "seg", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	for i := range 10 {
		if _, err := f.WriteAt([]byte("entry"), int64(i*5)); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if n := cv.syncs.Load(); n != 0 {
		t.Fatalf("%d fsyncs during the appends, want 0", n)
	}
	waitFor(t, 2*time.Second, "an fsync after the appends", func() bool { return cv.syncs.Load() == 1 })
	if took := time.Since(start); took < interval/2 {
		t.Fatalf("fsynced after %s, with an interval of %s", took, interval)
	}
	time.Sleep(2 * interval)
	if n := cv.syncs.Load(); n != 1 {
		t.Fatalf("%d fsyncs with nothing new written, want 1", n)
	}
}

// A write that would take the unsynced bytes past the bound waits for an
// fsync of what was written before it.
func TestQuorumMemoryByteBoundMakesAWriterWait(t *testing.T) {
	gate := make(chan struct{})
	v, cv, sy, _ := newTestSyncVFS(t, DurabilityConfig{Mode: QuorumMemory, SyncInterval: time.Hour, SyncBytes: 100}, gate)
	f, err := v.Create(t.TempDir(), "seg", 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 60), 0); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := f.WriteAt(make([]byte, 60), 60)
		wrote <- err
	}()
	select {
	case err := <-wrote:
		t.Fatalf("the write past the bound returned before an fsync (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate) // let the fsync through
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if n := cv.syncs.Load(); n != 1 {
		t.Fatalf("%d fsyncs, want 1", n)
	}
	sy.mu.Lock()
	unsynced := sy.unsynced
	sy.mu.Unlock()
	if unsynced != 60 {
		t.Fatalf("%d bytes unsynced after the wait, want the 60 of the waiting write", unsynced)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Closing a file, and closing the syncer, fsync what was written.
func TestQuorumMemoryCloseSyncs(t *testing.T) {
	v, cv, sy, _ := newTestSyncVFS(t, DurabilityConfig{Mode: QuorumMemory, SyncInterval: time.Hour, SyncBytes: 1 << 20}, nil)
	dir := t.TempDir()
	a, _ := v.Create(dir, "a", 4096)
	b, _ := v.Create(dir, "b", 4096)
	a.WriteAt([]byte("x"), 0)
	b.WriteAt([]byte("y"), 0)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := cv.syncs.Load(); n != 1 {
		t.Fatalf("%d fsyncs after closing a written file, want 1", n)
	}
	if err := sy.Close(); err != nil {
		t.Fatal(err)
	}
	if n := cv.syncs.Load(); n != 2 {
		t.Fatalf("%d fsyncs after closing the syncer, want 2", n)
	}
	if err := sy.Close(); err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// A failed fsync is returned by every later write and Sync of the store,
// and reported as fatal once.
func TestQuorumMemoryFsyncErrorIsSticky(t *testing.T) {
	v, cv, sy, fatal := newTestSyncVFS(t, DurabilityConfig{Mode: QuorumMemory, SyncInterval: 10 * time.Millisecond, SyncBytes: 1 << 20}, nil)
	dir := t.TempDir()
	f, _ := v.Create(dir, "seg", 4096)
	defer f.Close()
	cv.fail.Store(true)
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := sy.Flush(); err == nil {
		t.Fatal("Flush after a failed fsync: no error")
	}
	cv.fail.Store(false) // the disk works again: the error stays
	for range 2 {
		if _, err := f.WriteAt([]byte("y"), 1); err == nil || !strings.Contains(err.Error(), "injected fsync failure") {
			t.Fatalf("write after a failed fsync: %v", err)
		}
		if err := f.Sync(); err == nil {
			t.Fatal("Sync after a failed fsync: no error")
		}
	}
	if _, err := v.Create(dir, "next", 4096); err == nil {
		t.Fatal("a new segment after a failed fsync: no error")
	}
	// The round that failed tells fatal after it woke its waiters.
	for deadline := time.Now().Add(10 * time.Second); fatal.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := fatal.Load(); n != 1 {
		t.Fatalf("fatal called %d times, want 1", n)
	}
}

// A leader's append waiting for its fsync (Stored: the state machine's
// gate) learns of a failed fsync at once, instead of waiting for a round
// that will never store it.
func TestStoredReturnsAFailedFsync(t *testing.T) {
	gate := make(chan struct{})
	v, cv, sy, _ := newTestSyncVFS(t, DurabilityConfig{Mode: QuorumFsync, SyncInterval: time.Hour, SyncBytes: 1 << 20}, gate)
	f, _ := v.Create(t.TempDir(), "seg", 4096)
	defer f.Close()
	cv.fail.Store(true)
	sy.overlap.Store(true)
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // asks for the round, returns at once
		t.Fatal(err)
	}
	sy.storedAfter(1, true)
	got := make(chan error, 1)
	go func() { got <- sy.Stored(1, nil) }()
	close(gate) // the fsync runs, and fails
	select {
	case err := <-got:
		if err == nil || !strings.Contains(err.Error(), "injected fsync failure") {
			t.Fatalf("Stored after a failed fsync: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stored still waits 10 s after the fsync failed")
	}
}

func TestDurabilityConfigValidate(t *testing.T) {
	if err := DefaultDurabilityConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    DurabilityConfig
		want string
	}{
		{DurabilityConfig{Mode: "quorum-disk", SyncInterval: time.Millisecond, SyncBytes: 1}, `durability mode "quorum-disk"`},
		{DurabilityConfig{Mode: QuorumMemory, SyncInterval: 0, SyncBytes: 1}, "durability sync interval 0s"},
		{DurabilityConfig{Mode: QuorumMemory, SyncInterval: time.Millisecond, SyncBytes: -1}, "durability sync bytes -1"},
	} {
		err := tc.c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", tc.c, err, tc.want)
		}
	}
	if m, err := ParseDurabilityMode(" Quorum-Memory "); err != nil || m != QuorumMemory {
		t.Fatalf("parse: %q %v", m, err)
	}
	if _, err := ParseDurabilityMode("async"); err == nil {
		t.Fatal("parse of an unknown mode: no error")
	}
}

// A QuorumMemory store appends, rolls segments (raft-wal's metadata then
// names sealed segments, whose data the syncer fsyncs first), writes its
// watermark only for fsynced entries, and holds everything after a reopen.
func TestQuorumMemoryStoreRoundTrip(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 64 << 10,
		Durability: DurabilityConfig{Mode: QuorumMemory, SyncInterval: 20 * time.Millisecond, SyncBytes: 256 << 10}}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 1000)
	const n = 500 // about 8 segments
	for i := uint64(1); i <= n; i++ {
		data := EncodeBatch(&Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []Message{{Body: body}}})
		if err := s.Log.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "the watermark reaches the last entry", func() bool { return s.guard.written.Load() == n })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "log", "*.wal")); len(segs) < 3 {
		t.Fatalf("%d segment files, want several", len(segs))
	}
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.LastIndex() != n {
		t.Fatalf("last index %d after reopen, want %d", s.LastIndex(), n)
	}
	for _, i := range []uint64{1, n / 2, n} {
		if _, err := s.Read(i); err != nil {
			t.Fatalf("read %d after reopen: %v", i, err)
		}
	}
}

func TestQuorumMemoryNeedsWAL(t *testing.T) {
	_, err := Open(t.TempDir(), Options{Kind: KindBolt, Durability: DurabilityConfig{Mode: QuorumMemory, SyncInterval: time.Second, SyncBytes: 1}})
	if err == nil || !strings.Contains(err.Error(), "needs the \"wal\" log store") {
		t.Fatalf("bolt with %s: %v", QuorumMemory, err)
	}
}

// With appends that return before their fsync, the watermark names an
// entry only once the log's fsync covers it.
func TestWatermarkWaitsForTheFsync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "LOG_WATERMARK")
	g, err := newGuard(raft.NewInmemStore(), path, func(uint64) {}, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	synced := make(chan struct{})
	g.synced = func() error { <-synced; return nil }
	if err := g.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if w, _ := readWatermark(path); w != 0 {
		t.Fatalf("watermark %d before the fsync, want 0", w)
	}
	close(synced)
	waitFor(t, 2*time.Second, "the watermark after the fsync", func() bool { w, _ := readWatermark(path); return w == 1 })
	g.close()
}

// Raft cuts only uncommitted entries from a log's tail; a cut at or below
// what the state machine applied means the group lost committed entries,
// and is reported as damage at the cut. Clearing the whole log (after a
// snapshot install) is not such a cut.
func TestCutBelowAppliedIsDamage(t *testing.T) {
	store := func(s *Stores, from, to uint64) {
		t.Helper()
		for i := from; i <= to; i++ {
			data := EncodeBatch(&Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []Message{{Body: []byte("b")}}})
			if err := s.Log.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	store(s, 1, 10)
	s.WatchApplied(func() uint64 { return 6 })
	if err := s.Log.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	if idx, err := s.Damaged(); idx != 0 {
		t.Fatalf("a cut above the applied index reported as damage at %d: %v", idx, err)
	}
	if err := s.Log.DeleteRange(5, 7); err != nil {
		t.Fatal(err)
	}
	if idx, err := s.Damaged(); idx != 5 || !errors.Is(err, ErrCutBelowApplied) {
		t.Fatalf("a cut below the applied index: damage %d %v, want 5 %v", idx, err, ErrCutBelowApplied)
	}

	whole, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	store(whole, 1, 10)
	whole.WatchApplied(func() uint64 { return 10 })
	if err := whole.Log.DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	if idx, err := whole.Damaged(); idx != 0 {
		t.Fatalf("clearing the whole log reported as damage at %d: %v", idx, err)
	}
}

// Close does not wait out a long sync interval: it fsyncs at once, and the
// log and its watermark hold every entry at the next open.
func TestQuorumMemoryCloseIsPrompt(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Durability: DurabilityConfig{Mode: QuorumMemory, SyncInterval: time.Hour, SyncBytes: 1 << 30}}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		data := EncodeBatch(&Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []Message{{Body: []byte("b")}}})
		if err := s.Log.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %s with an hour's sync interval", took)
	}
	if w, err := readWatermark(filepath.Join(dir, "LOG_WATERMARK")); err != nil || w != 3 {
		t.Fatalf("watermark after Close: %d %v, want 3", w, err)
	}
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.LastIndex() != 3 {
		t.Fatalf("last index %d after reopen, want 3", s.LastIndex())
	}
}

// openSlowFsync opens a log whose fsyncs take delay (the fault suite's
// slow disk) and closes it at the test's end.
func openSlowFsync(t *testing.T, delay time.Duration) *Stores {
	t.Helper()
	t.Setenv(chaosFSEnv, "1")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, chaosDelayFile), []byte(delay.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// In quorum-fsync a leader's own append returns before its fsync, which
// runs meanwhile; AwaitStored (the state machine's gate) and Stored (the
// commit index a leader sends) name it only once the fsync has ended. A
// follower's append returns once fsynced, and so do the leader's earlier
// appends with it. The fsync is slowed to 300 ms (the fault suite's slow
// disk) so that the order shows.
func TestLeaderAppendOverlapsItsFsync(t *testing.T) {
	const delay = 300 * time.Millisecond
	s := openSlowFsync(t, delay)
	var leads atomic.Bool
	s.OverlapWhen(leads.Load)
	entry := func(i uint64) []*raft.Log {
		data := EncodeBatch(&Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []Message{{Body: []byte("x")}}})
		return []*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}
	}

	start := time.Now()
	if err := s.Log.StoreLogs(entry(1)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("a follower's append returned after %s, before its fsync (%s)", took, delay)
	}
	if got := s.Stored(); got != 1 {
		t.Fatalf("stored %d after a follower's append, want 1", got)
	}

	leads.Store(true)
	start = time.Now()
	if err := s.Log.StoreLogs(entry(2)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= delay {
		t.Fatalf("the leader's append took %s: it waited for its fsync", took)
	}
	if got := s.Stored(); got != 1 {
		t.Fatalf("stored %d right after the leader's append, want 1 until its fsync ends", got)
	}
	stop := make(chan struct{})
	close(stop)
	if err := s.AwaitStored(2, stop); !errors.Is(err, errStoredStopped) {
		t.Fatalf("AwaitStored with stop closed: %v", err)
	}
	if err := s.AwaitStored(2, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("AwaitStored returned after %s, before the fsync (%s)", took, delay)
	}
	if got := s.Stored(); got != 2 {
		t.Fatalf("stored %d after the fsync, want 2", got)
	}

	// A leader's unsynced append, then a follower's: the follower's
	// append returns only once both are fsynced.
	if err := s.Log.StoreLogs(entry(3)); err != nil {
		t.Fatal(err)
	}
	leads.Store(false)
	if err := s.Log.StoreLogs(entry(4)); err != nil {
		t.Fatal(err)
	}
	if got := s.Stored(); got != 4 {
		t.Fatalf("stored %d after a follower's append, want 4", got)
	}

	// A tail deletion takes back what was stored there.
	if err := s.Log.DeleteRange(4, 4); err != nil {
		t.Fatal(err)
	}
	if got := s.Stored(); got != 3 {
		t.Fatalf("stored %d after deleting 4, want 3", got)
	}
}

// A leader that steps down with its own appends not yet fsynced answers
// the next leader's append of those entries after reading them back,
// without storing them again (raft's appendEntries): the read waits for
// the fsync, so that the answer never counts an unsynced copy as stored.
// Reads while it leads do not wait.
func TestSteppedDownLeaderReadsOnlyStoredEntries(t *testing.T) {
	const delay = 300 * time.Millisecond
	s := openSlowFsync(t, delay)
	var leads atomic.Bool
	leads.Store(true)
	s.OverlapWhen(leads.Load)
	data := EncodeBatch(&Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: []Message{{Body: []byte("x")}}})

	start := time.Now()
	if err := s.Log.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.Log.GetLog(1, &l); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= delay {
		t.Fatalf("the leader's read of its own entry took %s: it waited for the fsync", took)
	}
	if got := s.Stored(); got != 0 {
		t.Fatalf("stored %d before the fsync ended, want 0", got)
	}

	leads.Store(false)
	if err := s.Log.GetLog(1, &l); err != nil {
		t.Fatal(err)
	}
	if got := s.Stored(); got != 1 {
		t.Fatalf("a read after stepping down returned with stored %d: the entry it read back may still be lost", got)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("the read after stepping down returned after %s, before the fsync (%s)", took, delay)
	}
}

// In quorum-memory nothing waits for an fsync before it applies: the
// mode acknowledges what is written.
func TestQuorumMemoryNeverAwaitsStored(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Durability: DurabilityConfig{Mode: QuorumMemory, SyncInterval: time.Hour, SyncBytes: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.OverlapWhen(func() bool { return true })
	data := EncodeBatch(&Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: []Message{{Body: []byte("x")}}})
	if err := s.Log.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := s.AwaitStored(1, stop); err != nil {
		t.Fatalf("AwaitStored in %s: %v", QuorumMemory, err)
	}
	if got := s.Stored(); got != 1 {
		t.Fatalf("stored %d, want 1", got)
	}
}

// A leader's appends across segment rotations are each reported stored
// (no append waits for a round that nobody asked for), and reopening
// finds them all.
func TestLeaderAppendsAcrossSegmentsAreStored(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 64 << 10}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.OverlapWhen(func() bool { return true })
	body := make([]byte, 1000)
	const n = 300 // about 5 segments
	for i := uint64(1); i <= n; i++ {
		data := EncodeBatch(&Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []Message{{Body: body}}})
		if err := s.Log.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		timer := time.AfterFunc(5*time.Second, func() { close(stop) })
		if err := s.AwaitStored(i, stop); err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		timer.Stop()
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "log", "*.wal")); len(segs) < 3 {
		t.Fatalf("%d segment files, want several", len(segs))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.LastIndex() != n || s.Stored() != n {
		t.Fatalf("after reopen: last %d, stored %d; want %d", s.LastIndex(), s.Stored(), n)
	}
}
