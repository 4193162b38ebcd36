package raftlog

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// The durability modes: when an append to the log counts as stored.
const (
	// QuorumFsync returns from an append once raft-wal has fsynced it, so
	// raft acknowledges an entry only once a quorum has it on disk.
	QuorumFsync = "quorum-fsync"
	// QuorumMemory returns from an append once it is written to the log
	// file (in the page cache), and fsyncs within DurabilityConfig's bound.
	QuorumMemory = "quorum-memory"
)

// DurabilityConfig says when the log's appends reach the disk. Every node of
// a group should use the same: an entry is acknowledged once a quorum has
// stored it, and what "stored" means is each node's own setting. Only the
// log's segment files are concerned; the stable store (term and vote),
// raft-wal's metadata and snapshots are fsynced in every mode.
type DurabilityConfig struct {
	// Mode is QuorumFsync or QuorumMemory.
	Mode string
	// SyncInterval bounds how long a write stays unsynced in QuorumMemory:
	// the log is fsynced at most this long after its first unsynced write.
	SyncInterval time.Duration
	// SyncBytes bounds how much stays unsynced in QuorumMemory: a write
	// that would take the unsynced bytes past it waits for an fsync first,
	// so the unsynced tail exceeds it by at most one append.
	SyncBytes int64
}

// DefaultDurabilityConfig is QuorumFsync, with the bounds QuorumMemory uses
// when only the mode is changed.
func DefaultDurabilityConfig() DurabilityConfig {
	return DurabilityConfig{Mode: QuorumFsync, SyncInterval: 50 * time.Millisecond, SyncBytes: 1 << 20}
}

// Validate reports the first field with a value the log cannot use.
func (c DurabilityConfig) Validate() error {
	switch c.Mode {
	case QuorumFsync, QuorumMemory:
	default:
		return fmt.Errorf("durability mode %q: want %s or %s", c.Mode, QuorumFsync, QuorumMemory)
	}
	if c.SyncInterval <= 0 {
		return fmt.Errorf("durability sync interval %s: want more than 0", c.SyncInterval)
	}
	if c.SyncBytes <= 0 {
		return fmt.Errorf("durability sync bytes %d: want more than 0", c.SyncBytes)
	}
	return nil
}

// ParseDurabilityMode parses a --durability value.
func ParseDurabilityMode(v string) (string, error) {
	m := strings.ToLower(strings.TrimSpace(v))
	if m != QuorumFsync && m != QuorumMemory {
		return "", fmt.Errorf("durability %q: want %s or %s", v, QuorumFsync, QuorumMemory)
	}
	return m, nil
}

// logFiles returns raft-wal's file system for the log directory logDir
// and a wrapper of its metadata store, both syncing through the returned
// syncer, which the caller closes after raft-wal. Over the plain file
// system (or the fault suite's lazy one).
func logFiles(logDir string, d DurabilityConfig, onFatal func(error)) (types.VFS, func(types.MetaStore) types.MetaStore, *syncer) {
	var vfs types.VFS = fs.New()
	if chaos := chaosVFS(logDir); chaos != nil {
		vfs = chaos // fault injection only
	}
	sy := newSyncer(d, func(err error) {
		if onFatal != nil {
			onFatal(fmt.Errorf("log store fsync failed (durability %s), restart the node: %w", d.Mode, err))
		}
	})
	wrap := func(m types.MetaStore) types.MetaStore { return &syncedMeta{MetaStore: m, s: sy} }
	return &syncVFS{VFS: vfs, s: sy}, wrap, sy
}

// errStoredStopped is Stored's error when its stop channel closed first.
var errStoredStopped = errors.New("stopped waiting for the log's fsync")

// syncer fsyncs the log's dirty segment files. In QuorumMemory it does so
// in the background: a segment file's Sync only reports the syncer's sticky
// error; its writes are counted, and a round of fsyncs runs SyncInterval
// after the first unsynced write, at once when a write would pass
// SyncBytes (the writer waits for that round), and on Flush and Close.
//
// A failed fsync is sticky: every later write and Sync of the store returns
// it, and fatal is told at once, because the entries it covered were
// acknowledged and may now never reach the disk (after a failed fsync Linux
// may drop the dirty pages it could not write). Only a restart, which reads
// back what the disk holds, is safe then.
//
// In QuorumFsync (fsync set) a segment file's Sync runs a round on the
// caller's goroutine and returns once it ended, as raft-wal's own Sync
// does, except for an append made with overlap set (the leader's own
// appends, see guard.StoreLogs): its Sync starts a round on the syncer's
// goroutine and returns at once, and the round reports the appended index
// as stored (storedAfter, Stored) once it ended.
//
// It runs one goroutine (run), from newSyncer until Close. Rounds never
// overlap (roundMu): a round that ended covers every write made before it
// took the dirty files.
type syncer struct {
	interval time.Duration
	maxBytes int64
	fatal    func(error)
	fsync    bool        // QuorumFsync: Sync waits for a round unless overlap
	overlap  atomic.Bool // the append being made returns before its fsync
	roundMu  sync.Mutex  // held for a whole round

	stored  atomic.Uint64 // appended index known fsynced (QuorumFsync)
	pending []pendingIdx  // under mu: appends waiting for a round, ascending

	mu sync.Mutex
	// changed is closed, and replaced, when a round ends, stored rises,
	// an fsync fails or Close ends: every waiter looks again.
	changed  chan struct{}
	dirty    map[*syncFile]struct{}
	unsynced int64     // bytes written since the last round took the dirty files
	since    time.Time // the first of those writes
	started  uint64    // rounds that took the dirty files
	done     uint64    // rounds that ended
	now      bool      // a round is wanted without waiting for the interval
	err      error     // the first failed fsync
	closed   bool
	ended    bool // Close returned: Stored waits no more

	wake    chan struct{} // buffered 1: the state above changed
	stopped chan struct{}
}

// pendingIdx is an appended index that is fsynced once round has ended.
type pendingIdx struct {
	index, round uint64
}

func newSyncer(c DurabilityConfig, fatal func(error)) *syncer {
	s := &syncer{interval: c.SyncInterval, maxBytes: c.SyncBytes, fatal: fatal, fsync: c.Mode == QuorumFsync,
		dirty: map[*syncFile]struct{}{}, wake: make(chan struct{}, 1), stopped: make(chan struct{}), changed: make(chan struct{})}
	go s.run()
	return s
}

func (s *syncer) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *syncer) run() {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		s.mu.Lock()
		due, wait := s.dueLocked()
		closed := s.closed
		s.mu.Unlock()
		if due {
			s.round()
			continue
		}
		if closed {
			return
		}
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-s.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// dueLocked reports whether a round should run now and, if not, how long
// until it should (0: nothing is dirty).
func (s *syncer) dueLocked() (bool, time.Duration) {
	if len(s.dirty) == 0 {
		return false, 0
	}
	if s.now || s.closed {
		return true, 0
	}
	if left := s.interval - time.Since(s.since); left > 0 {
		return false, left
	}
	return true, 0
}

// round fsyncs every file dirty when it starts.
func (s *syncer) round() {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	s.mu.Lock()
	files := make([]*syncFile, 0, len(s.dirty))
	for f := range s.dirty {
		files = append(files, f)
	}
	clear(s.dirty)
	s.unsynced, s.since, s.now = 0, time.Time{}, false
	s.started++
	s.mu.Unlock()

	var err error
	for _, f := range files {
		if e := f.syncNow(); e != nil && err == nil {
			err = fmt.Errorf("fsync log segment %s: %w", f.name, e)
		}
	}

	s.mu.Lock()
	s.done++
	first := err != nil && s.failLocked(err)
	if err == nil {
		s.resolveLocked()
	}
	s.broadcastLocked()
	s.mu.Unlock()
	if first && s.fatal != nil {
		s.fatal(err)
	}
}

// resolveLocked raises stored to the appends whose round has ended.
func (s *syncer) resolveLocked() {
	n := 0
	for n < len(s.pending) && s.pending[n].round <= s.done {
		n++
	}
	if n > 0 {
		s.raiseLocked(s.pending[n-1].index)
		s.pending = append(s.pending[:0], s.pending[n:]...)
	}
}

// raiseLocked records idx as fsynced and wakes the Stored waiters.
func (s *syncer) raiseLocked(idx uint64) {
	if idx > s.stored.Load() {
		s.stored.Store(idx)
		s.broadcastLocked()
	}
}

// broadcastLocked wakes every waiter (Stored, waitLocked) to look again.
func (s *syncer) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// storedAfter records that the append of idx, just written with overlap
// set, is fsynced once the round that takes its file has ended, and asks
// for that round unless it runs already. Without overlap the append was
// fsynced before its Sync returned, and idx is stored at once.
func (s *syncer) storedAfter(idx uint64, overlap bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !overlap {
		s.raiseLocked(idx)
		return
	}
	if t := s.targetLocked(); t > s.done {
		s.pending = append(s.pending, pendingIdx{index: idx, round: t})
		if t > s.started { // written after the Sync that asked for a round
			s.now = true
			s.kick()
		}
		return
	}
	s.raiseLocked(idx)
}

// cut forgets what it knew of the appends from index from on: raft deletes
// them (a tail deletion), and the entries stored there next are new ones.
func (s *syncer) cut(from uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from > 0 && s.stored.Load() >= from {
		s.stored.Store(from - 1)
	}
	keep := s.pending[:0]
	for _, p := range s.pending {
		if p.index < from {
			keep = append(keep, p)
		}
	}
	s.pending = keep
}

// Stored waits until the log's entries up to idx are fsynced on this node,
// or stop closes or the syncer is closed (errStoredStopped: the caller is
// shutting down), or an fsync failed (the sticky error).
func (s *syncer) Stored(idx uint64, stop <-chan struct{}) error {
	for {
		if s.stored.Load() >= idx {
			return nil
		}
		s.mu.Lock()
		if s.stored.Load() >= idx {
			s.mu.Unlock()
			return nil
		}
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return err
		}
		if s.ended {
			s.mu.Unlock()
			return errStoredStopped
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return errStoredStopped
		}
	}
}

// syncHere runs a round on the caller's goroutine and returns the sticky
// error: QuorumFsync's Sync of an append without overlap.
func (s *syncer) syncHere() error {
	s.round()
	return s.stickyErr()
}

// syncSoon asks for a round now without waiting for it.
func (s *syncer) syncSoon() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roundNowLocked()
	return s.err
}

// roundNowLocked asks for a round at once, without waiting for the
// interval, when anything is written and not yet taken by a round.
func (s *syncer) roundNowLocked() {
	if len(s.dirty) > 0 {
		s.now = true
		s.kick()
	}
}

// failLocked records err as the store's sticky error unless one is
// recorded already, and reports whether it is the first (the caller tells
// fatal of it once s.mu is released, and wakes the waiters).
func (s *syncer) failLocked(err error) bool {
	if s.err != nil {
		return false
	}
	s.err = err
	return true
}

// admit waits, before a write of n bytes, for the round that syncs what is
// unsynced when that write would take it past the byte bound.
func (s *syncer) admit(n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.unsynced > 0 && s.unsynced+int64(n) > s.maxBytes {
		s.now = true
		s.kick()
		s.waitLocked(s.started + 1)
	}
	return s.err
}

// wrote records n bytes written to f.
func (s *syncer) wrote(f *syncFile, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirty[f] = struct{}{}
	if s.unsynced == 0 && !s.fsync { // QuorumFsync: Sync asks for the round
		s.since = time.Now()
		s.kick()
	}
	s.unsynced += int64(n)
}

func (s *syncer) stickyErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// waitLocked waits until round target has ended (or an fsync failed).
func (s *syncer) waitLocked(target uint64) {
	for s.done < target && s.err == nil {
		ch := s.changed
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
}

// targetLocked is the round that syncs everything written so far.
func (s *syncer) targetLocked() uint64 {
	if len(s.dirty) > 0 {
		return s.started + 1
	}
	return s.started
}

// Wait returns once everything written before the call is fsynced, on the
// syncer's own schedule (at most the interval later), or with its error.
func (s *syncer) Wait() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waitLocked(s.targetLocked())
	return s.err
}

// Flush fsyncs everything written before the call now and waits for it.
func (s *syncer) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roundNowLocked()
	s.waitLocked(s.targetLocked())
	return s.err
}

// Close fsyncs what is dirty, stops the goroutine and returns the sticky
// error; it is safe to call more than once.
func (s *syncer) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.kick()
	<-s.stopped
	// The last round has ended: what it did not store never will be.
	s.mu.Lock()
	s.ended = true
	s.broadcastLocked()
	s.mu.Unlock()
	return s.stickyErr()
}

// syncVFS is raft-wal's file system for its segment files in QuorumMemory:
// the files it opens for writing sync through the syncer.
type syncVFS struct {
	types.VFS
	s *syncer
}

func (v *syncVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	if err := v.s.stickyErr(); err != nil {
		return nil, err
	}
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &syncFile{WritableFile: f, s: v.s, name: name}, nil
}

func (v *syncVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	sf := &syncFile{WritableFile: f, s: v.s, name: name}
	if v.s.fsync {
		// raft-wal opens its tail segment for writing at open: the next
		// round fsyncs what an earlier process may have left unsynced.
		sf.wrote.Store(true)
		v.s.wrote(sf, 0)
	}
	return sf, nil
}

// syncFile is a segment file whose Sync returns at once: the syncer
// fsyncs it later.
type syncFile struct {
	types.WritableFile
	s    *syncer
	name string

	wrote  atomic.Bool // written since opened
	mu     sync.Mutex  // serialises the syncer's fsync with Close
	closed bool
}

func (f *syncFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.s.admit(len(p)); err != nil {
		return 0, err
	}
	f.wrote.Store(true)
	n, err := f.WritableFile.WriteAt(p, off)
	f.s.wrote(f, n)
	return n, err
}

// Sync returns the store's sticky fsync error, if any: in QuorumMemory
// the writes are fsynced by the syncer later. In QuorumFsync it fsyncs
// every dirty file before it returns, or with overlap set asks the syncer
// to do so now.
func (f *syncFile) Sync() error {
	switch {
	case !f.s.fsync:
		return f.s.stickyErr()
	case f.s.overlap.Load():
		return f.s.syncSoon()
	default:
		return f.s.syncHere()
	}
}

// syncNow fsyncs the file unless it has been closed (Close synced it).
func (f *syncFile) syncNow() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	return f.WritableFile.Sync()
}

// Close fsyncs the file if it was written, then closes it. raft-wal closes
// a segment at its Close and before deleting it.
func (f *syncFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	var err error
	if f.wrote.Load() {
		if err = f.WritableFile.Sync(); err != nil {
			err = fmt.Errorf("fsync log segment %s: %w", f.name, err)
			f.s.mu.Lock()
			first := f.s.failLocked(err)
			f.s.broadcastLocked()
			f.s.mu.Unlock()
			if first && f.s.fatal != nil {
				f.s.fatal(err)
			}
		}
	}
	if cerr := f.WritableFile.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncedMeta is raft-wal's metadata store that first fsyncs the segment
// files: a commit records segments as sealed (with where their index
// starts) or truncated, and must never reach the disk before the data it
// describes.
type syncedMeta struct {
	types.MetaStore
	s *syncer
}

func (m *syncedMeta) CommitState(st types.PersistentState) error {
	if err := m.s.Flush(); err != nil {
		return err
	}
	return m.MetaStore.CommitState(st)
}
