package raftlog

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/segment"
	bolt "go.etcd.io/bbolt"

	"github.com/raftmq/raftmq/mq"
)

// Log store kinds accepted by Open.
const (
	KindWAL  = "wal"
	KindBolt = "bolt"
)

// DefaultKind is the log store used when none is named. docs/BENCHMARKS.md
// has the measurements behind the choice.
const DefaultKind = KindWAL

// ErrBelowFloor is returned by Read for an index whose body this node no
// longer (or never) held.
var ErrBelowFloor = errors.New("log index below this node's floor")

// ErrMissingSegment is returned by Open when raft-wal's metadata lists a
// segment file that is not on disk: the entries it held are gone.
var ErrMissingSegment = errors.New("a log segment file is missing")

// NeedsRepair reports whether Open or Verify failed because the data on disk
// is damaged or incomplete (not, say, for a permission or a wrong flag): such
// a node can only be rebuilt from its group.
func NeedsRepair(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrLostEntries) || errors.Is(err, ErrMissingSegment) ||
		errors.Is(err, wal.ErrCorrupt) || errors.Is(err, ErrDamagedSnapshot)
}

// Stores are the three raft stores of one node, all under one directory.
type Stores struct {
	Log       raft.LogStore // cached; hand this to raft
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore

	raw     raft.LogStore
	guard   *guard
	dir     string // the data directory
	snapDir string // raft's snapshot directories
	logDir  string // raft-wal's segment files ("" for bolt)
	reads   *readCache
	closers []func() error
	floor   atomic.Uint64
	opened  bool        // Open succeeded: Close may write the clean mark
	unclean atomic.Bool // see Unclean

	// What the log looked like at open, for StartCheckFrom.
	syncedAtOpen uint64                  // the watermark: entries up to it were fsynced
	tailAtOpen   uint64                  // first index of raft-wal's tail segment (0: bolt)
	crashed      bool                    // the previous process did not close the log
	bg           atomic.Pointer[bgCheck] // the background check, once started

	syncer *syncer // fsyncs the log's segment files (raft-wal only)
}

// Options for Open.
type Options struct {
	Kind        string // KindWAL or KindBolt
	SegmentSize int    // raft-wal segment size in bytes; 0 = 64 MiB
	CacheSize   int    // recent entries kept in memory for raft; 0 = 256
	CacheBytes  int    // and at most this many bytes of them; 0 = 32 MiB
	ReadCache   int    // bytes of recently read entries kept for pulls; 0 = 32 MiB
	// Durability says when an append counts as stored; the zero value is
	// DefaultDurabilityConfig (QuorumFsync). QuorumMemory needs KindWAL.
	Durability DurabilityConfig
	// OnFatal is called (possibly many times) when the log store has failed
	// in a way that only a restart repairs.
	OnFatal func(error)
	// OnDamaged is called once for every damaged entry a read finds (a
	// checksum that does not match, or an entry the store cannot read
	// back), with its index. It runs on the reading goroutine (raft's
	// replication or FSM goroutine among them) and must not block.
	OnDamaged func(index uint64, err error)
	Logger    hclog.Logger
}

// Open opens (creating when missing) the log, stable and snapshot stores in dir.
func Open(dir string, opts Options) (*Stores, error) {
	if opts.Kind == "" {
		opts.Kind = DefaultKind
	}
	if opts.SegmentSize == 0 {
		opts.SegmentSize = 64 << 20
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = 256
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 32 << 20
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.ReadCache == 0 {
		opts.ReadCache = 32 << 20
	}
	if opts.Durability == (DurabilityConfig{}) {
		opts.Durability = DefaultDurabilityConfig()
	}
	if err := opts.Durability.Validate(); err != nil {
		return nil, err
	}
	s := &Stores{dir: dir, snapDir: filepath.Join(dir, "snapshots", "snapshots")}
	fail := func(err error) (*Stores, error) {
		s.Close()
		return nil, err
	}
	for _, sub := range []string{"log", "snapshots"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	stable, err := openBolt(filepath.Join(dir, "stable.db"))
	if err != nil {
		return nil, fmt.Errorf("open stable store %s: %w", filepath.Join(dir, "stable.db"), err)
	}
	s.Stable = stable
	s.closers = append(s.closers, stable.Close)

	switch opts.Kind {
	case KindWAL:
		logDir := filepath.Join(dir, "log")
		if err := startAfterSealedTail(logDir, opts.SegmentSize, opts.Logger.Named("wal")); err != nil {
			return fail(fmt.Errorf("open raft-wal log in %s: %w", logDir, err))
		}
		vfs, wrapMeta, sy := logFiles(logDir, opts.Durability, opts.OnFatal)
		if sy != nil {
			s.syncer = sy
			s.closers = append(s.closers, sy.Close) // after raft-wal's Close
		}
		w, err := openWAL(logDir, segment.NewFiler(logDir, vfs), wrapMeta, opts.SegmentSize, opts.Logger.Named("wal"))
		if errors.Is(err, os.ErrNotExist) {
			// raft-wal recreates a missing tail segment by itself (the guard
			// then notices lost entries); a sealed one it only fails to open.
			return fail(fmt.Errorf("open raft-wal log in %s: %w: %w", logDir, ErrMissingSegment, err))
		}
		if err != nil {
			return fail(fmt.Errorf("open raft-wal log in %s: %w", filepath.Join(dir, "log"), err))
		}
		s.raw, s.logDir = w, filepath.Join(dir, "log")
		s.closers = append(s.closers, w.Close)
	case KindBolt:
		if opts.Durability.Mode == QuorumMemory {
			return fail(fmt.Errorf("durability %s needs the %q log store, not %q", QuorumMemory, KindWAL, KindBolt))
		}
		b, err := openBolt(filepath.Join(dir, "log", "log.db"))
		if err != nil {
			return fail(fmt.Errorf("open bolt log in %s: %w", filepath.Join(dir, "log"), err))
		}
		s.raw = b
		s.closers = append(s.closers, b.Close)
	default:
		return fail(fmt.Errorf("log store %q: want %q or %q", opts.Kind, KindWAL, KindBolt))
	}
	if kind, err := recordKind(dir, opts.Kind); err != nil {
		return fail(err)
	} else if kind != opts.Kind {
		return fail(fmt.Errorf("data directory %s holds a %q log store, not %q", dir, kind, opts.Kind))
	}
	s.reads = newReadCache(opts.ReadCache)
	g, err := newGuard(s.raw, filepath.Join(dir, "LOG_WATERMARK"), s.reads.dropFrom, opts.OnFatal)
	if err != nil {
		return fail(fmt.Errorf("open log in %s: %w", dir, err))
	}
	g.damage.notify = opts.OnDamaged
	if s.syncer != nil {
		g.synced = s.syncer.Wait // the watermark only ever names fsynced entries
		if s.syncer.fsync {
			// What the log holds at open may have been written and not
			// fsynced by the previous process: fsync it before any of it
			// counts as stored (AwaitStored).
			if err := s.syncer.syncHere(); err != nil {
				return fail(fmt.Errorf("fsync log in %s: %w", dir, err))
			}
			s.syncer.storedAfter(g.stored.Load(), false)
			g.sy = s.syncer
		}
	}
	s.guard = g
	s.syncedAtOpen = g.written.Load()
	if segs, err := s.Segments(); err == nil && len(segs) > 0 {
		s.tailAtOpen = segs[len(segs)-1].Base
	}
	s.closers = append(s.closers, func() error { g.close(); return nil })
	lc := newLogCache(g, opts.CacheSize, opts.CacheBytes)
	if g.sy != nil {
		lc.settle = g.settle
	}
	s.Log = lc
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), 2, opts.Logger.Named("snapshots"))
	if err != nil {
		return fail(fmt.Errorf("open snapshot store: %w", err))
	}
	s.Snapshots = snaps
	unclean, err := takeCleanMark(dir)
	if err != nil {
		return fail(err)
	}
	s.unclean.Store(unclean && s.LastIndex() > 0)
	s.crashed = s.unclean.Load()
	s.opened = true
	return s, nil
}

// cleanMark is written by Close after every store closed cleanly and removed
// (durably) by Open, so its absence at open means the previous process
// ended without closing the log: killed, crashed or cut off by power loss.
const cleanMark = "CLEAN_SHUTDOWN"

// takeCleanMark reports whether the directory lacks the clean-shutdown mark,
// and removes the mark, syncing the directory, so that a crash from now on
// is seen as one at the next open.
func takeCleanMark(dir string) (unclean bool, err error) {
	p := filepath.Join(dir, cleanMark)
	switch err := os.Remove(p); {
	case errors.Is(err, os.ErrNotExist):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("remove %s: %w", p, err)
	}
	if err := fsyncPath(dir); err != nil {
		return false, fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return false, nil
}

// WatchApplied gives the log the state machine's last applied index, to
// report (as damage at that index, see Damaged) a tail deletion below it:
// Raft cuts only entries never committed, so such a cut means the group
// lost committed entries. Call it before raft starts.
func (s *Stores) WatchApplied(applied func() uint64) {
	if s.guard != nil {
		s.guard.applied = applied
	}
}

// OverlapWhen gives the log the node's role: while leads reports true,
// the node's own appends return before their fsync, which runs while raft
// replicates them (see guard.StoreLogs for why that is safe). Only in
// QuorumFsync over raft-wal; call it once raft runs. Until then, and in
// every other configuration, appends return once fsynced (QuorumFsync) or
// as before (QuorumMemory).
func (s *Stores) OverlapWhen(leads func() bool) {
	if s.guard != nil && s.guard.sy != nil {
		s.guard.leads.Store(&leads)
	}
}

// AwaitStored returns once the log's entries up to idx are fsynced on this
// node, when appends may return before their fsync (OverlapWhen); at once
// otherwise. It returns an error when an fsync failed (the node is
// restarting: Options.OnFatal was told) or stop closed first.
func (s *Stores) AwaitStored(idx uint64, stop <-chan struct{}) error {
	if s.guard == nil || s.guard.sy == nil {
		return nil
	}
	return s.guard.sy.Stored(idx, stop)
}

// Stored is the last index known fsynced on this node when appends may
// return before their fsync (OverlapWhen), and the last index otherwise.
func (s *Stores) Stored() uint64 {
	if s.guard == nil {
		return 0
	}
	if s.guard.sy == nil {
		return s.guard.stored.Load()
	}
	return s.guard.sy.stored.Load()
}

// Unclean reports whether the previous process using this directory ended
// without closing its log cleanly while the log held entries. Its newest
// entries may then be gone although it had acknowledged them, if the disk
// lost writes it had confirmed (a volatile write cache, a torn sector):
// such a node must not vote or campaign until it has caught up with a
// leader (election recovers that way), and then calls Recovered. Until then
// a clean Close leaves the directory marked unclean.
func (s *Stores) Unclean() bool { return s.unclean.Load() }

// Recovered records that this node has caught up with a leader since an
// unclean start: the next clean Close marks the directory clean again.
func (s *Stores) Recovered() { s.unclean.Store(false) }

// openBolt opens a raft-boltdb store. bbolt panics on some damaged pages
// ("invalid freelist page") instead of returning an error, and returns
// ErrInvalid, ErrChecksum or ErrVersionMismatch on others: both are
// ErrCorrupt here, so that a node refuses to start with the repair steps
// instead of crashing.
func openBolt(path string) (s *raftboltdb.BoltStore, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("%w: %s is damaged: bbolt: %v", ErrCorrupt, path, r)
		}
	}()
	s, err = raftboltdb.New(raftboltdb.Options{Path: path})
	if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch) {
		err = fmt.Errorf("%w: %s is damaged: %w", ErrCorrupt, path, err)
	}
	return s, err
}

// recordKind remembers which log store a directory was created with, so a
// restart with the other --log-store fails clearly instead of starting empty.
func recordKind(dir, kind string) (string, error) {
	p := filepath.Join(dir, "LOGSTORE")
	b, err := os.ReadFile(p)
	if err == nil {
		return string(b), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	if err := os.WriteFile(p, []byte(kind), 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return kind, nil
}

// SetFloor raises the lowest index Read will serve. raft-wal can return
// entries below FirstIndex after a head truncation, so the floor is ours.
func (s *Stores) SetFloor(idx uint64) {
	for {
		cur := s.floor.Load()
		if idx <= cur || s.floor.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// Floor is the lowest index Read serves.
func (s *Stores) Floor() uint64 { return s.floor.Load() }

// Entry is a command entry as Read returns it.
type Entry struct {
	Data []byte
	At   int64 // when it was appended (EntryTime): ParseReadBatch's at
}

// EntryTime is the time l was appended in unix milliseconds, as ParseBatch
// takes it: 0 for an entry without one.
func EntryTime(l *raft.Log) int64 {
	if l.AppendedAt.IsZero() {
		return 0
	}
	return l.AppendedAt.UnixMilli()
}

// Read returns the command entry at idx. Its Data is shared with raft's
// cache and must not be modified. A batch entry's CRC has been checked
// (ErrCorrupt otherwise), so callers parse it with ParseReadBatch.
func (s *Stores) Read(idx uint64) (Entry, error) {
	if idx < s.floor.Load() {
		return Entry{}, fmt.Errorf("read index %d: %w (floor %d)", idx, ErrBelowFloor, s.floor.Load())
	}
	if e, ok := s.reads.get(idx); ok {
		return e, nil
	}
	g := s.reads.gen()
	e, err := s.readChecked(idx)
	if err != nil {
		return Entry{}, err
	}
	s.reads.put(idx, e, g)
	return e, nil
}

// readChecked reads entry idx from the log store and checks a batch's CRC,
// once, as it comes from there: the read cache then holds only verified
// entries (see ParseReadBatch). (GetLog checked it too when the entry came
// from disk, not from raft's cache.)
func (s *Stores) readChecked(idx uint64) (Entry, error) {
	var l raft.Log
	if err := s.Log.GetLog(idx, &l); err != nil {
		if errors.Is(err, raft.ErrLogNotFound) {
			return Entry{}, fmt.Errorf("read index %d: %w", idx, ErrBelowFloor)
		}
		return Entry{}, fmt.Errorf("read index %d: %w", idx, err)
	}
	if len(l.Data) > 0 && CommandType(l.Data[0]) == CmdBatch {
		if _, err := ParseBatch(l.Data, 0); err != nil {
			err = fmt.Errorf("read index %d: %w", idx, err)
			s.guard.damage.report(idx, err)
			return Entry{}, err
		}
	}
	return Entry{Data: l.Data, At: EntryTime(&l)}, nil
}

// FirstIndex is the first index held by the log store (0 when empty).
func (s *Stores) FirstIndex() uint64 {
	i, err := s.raw.FirstIndex()
	if err != nil {
		return 0
	}
	return max(i, s.floor.Load())
}

// LastIndex is the last index held by the log store.
func (s *Stores) LastIndex() uint64 {
	i, err := s.raw.LastIndex()
	if err != nil {
		return 0
	}
	return i
}

// Verify reads every entry of the log and checks what can be checked: that
// the store returns it, its checksum (CheckEntry) and the encoding of every
// raftmq batch. checkMeta, when not nil, checks the other raftmq commands.
// It returns the first problem with its index (Damaged returns the index
// too), so a node can refuse to start instead of serving or replicating
// corrupt data. It is VerifyRange over the whole log: its time grows with
// the log, see StartCheckFrom and VerifyInBackground for what a node does
// at start instead.
func (s *Stores) Verify(checkMeta func(data []byte) error) (checked uint64, err error) {
	return s.VerifyRange(0, math.MaxUint64, checkMeta)
}

// Close closes every store; it is safe to call more than once.
func (s *Stores) Close() error {
	var errs []error
	if s.syncer != nil && len(s.closers) > 0 {
		// Now, not a sync interval from now: the watermark's last write
		// below waits for it. A failure is the syncer's sticky error.
		s.syncer.Flush()
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.closers = nil
	if len(errs) == 0 && s.opened && !s.unclean.Load() {
		if err := markClean(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func markClean(dir string) error {
	p := filepath.Join(dir, cleanMark)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := fsyncPath(dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// MessageID names one message: the log index of its entry and its ordinal
// inside the entry (mq.AppendMessageID). It is the same on every node.
func MessageID(logIndex uint64, ordinal uint32) string {
	var b [mq.MessageIDLen]byte
	return string(mq.AppendMessageID(b[:0], logIndex, ordinal))
}

// MessageIndex is the log index of the entry a message id (MessageID) names.
func MessageIndex(id string) (uint64, error) {
	if len(id) != mq.MessageIDLen {
		return 0, fmt.Errorf("message id %q: want 24 hex digits", id)
	}
	idx, err := strconv.ParseUint(id[:16], 16, 64)
	if err != nil {
		return 0, fmt.Errorf("message id %q: %w", id, err)
	}
	return idx, nil
}
