package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// guard wraps the raw log store to notice lost entries. raft-wal treats a
// damaged record in its tail segment as a torn write and silently drops it
// and everything after it on open (measured: one flipped byte in the first
// record emptied the whole log). A Raft node that forgets entries it has
// acknowledged breaks Raft's safety, so guard keeps a durable watermark: an
// index known to have been fsynced. A log that opens shorter than the
// watermark is reported as corrupt instead of being used.
//
// The watermark is written at most every watermarkEvery (one small fsync),
// so a crash loses at most that much of it: it is a lower bound, never above
// what was stored. Its goroutine sleeps while the log does not grow (an
// append wakes it), so an idle node has no timer firing for it. Tail deletions (raft truncating a conflicting suffix, or
// clearing the log after installing a snapshot) lower it first, durably.
type guard struct {
	raft.LogStore
	path    string
	dropped func(from uint64) // told about tail deletions (read cache)
	fatal   func(error)       // told about a store that can no longer append
	damage  damageLog         // damaged entries found by GetLog (verify.go)
	mu      sync.Mutex        // serialises file writes
	stored  atomic.Uint64
	written atomic.Uint64
	grew    chan struct{} // buffered 1: an append since the last flush
	stop    chan struct{}
	done    chan struct{}

	// synced, when set, returns once everything appended before the call
	// is fsynced: appends return before their fsync (QuorumMemory).
	synced func() error
	cuts   atomic.Uint64 // tail deletions so far
	// applied, when set, is the state machine's last applied index.
	applied func() uint64

	// sy, in QuorumFsync over raft-wal, fsyncs the appends and knows which
	// are fsynced; leads, once set, tells whether this node leads: its own
	// appends then return before their fsync (see StoreLogs).
	sy    *syncer
	leads atomic.Pointer[func() bool]
}

const watermarkEvery = 100 * time.Millisecond

// ErrLostEntries is returned by Open when the log ends below its watermark.
var ErrLostEntries = errors.New("log lost entries it had durably stored")

// ErrCutBelowApplied is the damage reported when raft replaces entries of
// this node's log that its state machine has applied: entries committed
// once are gone from the group, and this node's state holds them.
var ErrCutBelowApplied = errors.New("raft replaced log entries this node had applied")

func newGuard(raw raft.LogStore, path string, dropped func(from uint64), fatal func(error)) (*guard, error) {
	g := &guard{LogStore: raw, path: path, dropped: dropped, fatal: fatal, grew: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	w, err := readWatermark(path)
	if err != nil {
		return nil, err
	}
	last, err := raw.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("last index: %w", err)
	}
	if last < w {
		return nil, fmt.Errorf("%w: %w: the log ends at index %d but index %d was stored and synced before; a segment is damaged or truncated",
			ErrCorrupt, ErrLostEntries, last, w)
	}
	g.stored.Store(last)
	g.written.Store(w)
	go g.loop()
	return g, nil
}

// StoreLogs appends logs. In QuorumFsync over raft-wal a leader's own
// appends return once written and their fsync runs meanwhile on the
// syncer's goroutine (overlap), so that raft replicates them while the
// leader's disk syncs: hashicorp/raft writes the leader's log before it
// hands the entries to the replicators. Every other append (a follower's:
// its answer tells the leader the entries are stored) returns once fsynced.
//
// That is safe because nothing that depends on an entry being committed
// happens before the leader's own copy is fsynced: the state machine
// applies an entry (and so answers its client) only once Stores.AwaitStored
// returns for it, and the commit index sent to followers never passes what
// the leader has fsynced (election's Config.CommitBound). raft's commit
// index counts a leader's entry as soon as it is written; with those two
// gates an entry counts as committed only once it is fsynced on the leader
// and on enough followers for a majority, as without the overlap. A leader
// that loses power before its fsync loses entries that no client was told
// are stored and no follower applied; a follower that holds one fsynced
// keeps it or a new leader overwrites it, both allowed for an entry that
// never committed (docs/durability.md).
func (g *guard) StoreLogs(logs []*raft.Log) error {
	overlap := false
	if g.sy != nil {
		// raft appends on its main goroutine, which also sets its role: a
		// leader's append is one of its own entries, never a follower's.
		if leads := g.leads.Load(); leads != nil && (*leads)() {
			overlap = true
		}
		g.sy.overlap.Store(overlap)
	}
	for len(logs) > 0 {
		n := appendChunk(logs, maxAppendBytes)
		if err := g.LogStore.StoreLogs(logs[:n]); err != nil {
			return g.failed("append", err)
		}
		last := logs[n-1].Index
		g.stored.Store(last)
		if g.sy != nil {
			g.sy.storedAfter(last, overlap)
		}
		logs = logs[n:]
	}
	select {
	case g.grew <- struct{}{}:
	default:
	}
	return nil
}

// maxAppendBytes bounds the entry data of one append to the log store.
// raft-wal encodes an append into one buffer that it never shrinks, and
// raft hands a follower up to MaxAppendEntries entries at once: 128 entries
// of 1 MiB grew that buffer to 272 MiB. Splitting costs one more fsync per
// 8 MiB; a prefix of the entries stored before a failure is a valid
// (shorter) log, and a failure is fatal anyway.
const maxAppendBytes = 8 << 20

// appendChunk is how many of logs (at least one) fit in max bytes of data.
func appendChunk(logs []*raft.Log, max int) int {
	size := 0
	for i, l := range logs {
		size += len(l.Data)
		if size > max && i > 0 {
			return i
		}
	}
	return len(logs)
}

// failed reports a failed write of the log store as fatal. A store whose
// write failed cannot be trusted to work again in this process: raft-wal
// v0.4.2 keeps its tail sealed after a failed segment rotation (every later
// append fails with "segment is sealed"), and a segment file half created
// on a full disk blocks every later rotation or tail truncation ("file
// exists"), both until the process restarts, even once space is back. A
// node that is up but cannot store its log only looks alive, so the server
// exits and is restarted (crash-only, as etcd does on a failed WAL write);
// on open raft-wal deletes the orphan file and appends again.
func (g *guard) failed(op string, err error) error {
	if g.fatal != nil {
		g.fatal(fmt.Errorf("log store %s failed, restart the node (a full disk? raft-wal cannot recover from a failed write without a restart): %w", op, err))
	}
	return err
}

// settle waits, on a node that stopped leading, until what it appended
// as leader without waiting for the fsync (StoreLogs) is fsynced. Such a
// node answers a new leader's append of entries it holds already without
// storing them again, after reading each of them back to compare terms
// (raft's appendEntries): its answer tells the new leader they are stored,
// so the read must not return before they are. A leader's own reads, and
// every read while nothing waits for an fsync, return at once.
func (g *guard) settle() error {
	if g.sy == nil {
		return nil
	}
	w := g.stored.Load()
	if g.sy.stored.Load() >= w {
		return nil
	}
	if leads := g.leads.Load(); leads == nil || (*leads)() {
		return nil
	}
	return g.sy.Stored(w, nil)
}

func (g *guard) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

func (g *guard) DeleteRange(min, max uint64) error {
	last, err := g.LogStore.LastIndex()
	if err != nil {
		return err
	}
	tail := max >= last && min > 0
	if tail { // tail (or everything): lower the watermark first
		keep := min - 1
		if first, err := g.LogStore.FirstIndex(); err == nil && min <= first {
			keep = 0 // the whole log goes (raft, after installing a snapshot)
		} else if g.applied != nil {
			// raft cuts a conflicting suffix, which Raft allows only for
			// entries never committed: never below what was applied.
			if applied := g.applied(); min <= applied {
				g.damage.report(min, fmt.Errorf("%w: raft replaced the entries from index %d on with the leader's, but this node had applied up to %d: "+
					"the group lost entries it had committed (a simultaneous crash of a majority with --durability quorum-memory, or disks that lost synced data) "+
					"and this node's state holds entries the group does not: %w", ErrCutBelowApplied, min, applied, ErrCorrupt))
			}
		}
		g.mu.Lock()
		if g.written.Load() > keep {
			if err := writeWatermark(g.path, keep); err != nil {
				g.mu.Unlock()
				return g.failed("delete", fmt.Errorf("lower log watermark: %w", err))
			}
			g.written.Store(keep)
		}
		g.stored.Store(keep)
		if g.sy != nil {
			g.sy.cut(min)
		}
		g.cuts.Add(1)
		g.mu.Unlock()
	}
	if err := g.LogStore.DeleteRange(min, max); err != nil {
		return g.failed("delete", err)
	}
	if tail {
		// After the store's cut: a read that began before it then keeps
		// nothing of what it read (readCache.put).
		g.dropped(min)
	}
	return nil
}

// loop flushes after an append, then waits watermarkEvery before the next,
// so a busy log costs one watermark write per watermarkEvery.
func (g *guard) loop() {
	defer close(g.done)
	pace := time.NewTimer(watermarkEvery)
	defer pace.Stop()
	for {
		select {
		case <-g.stop:
			g.flush()
			return
		case <-g.grew:
		}
		g.flush()
		pace.Reset(watermarkEvery)
		select {
		case <-g.stop:
			g.flush()
			return
		case <-pace.C:
		}
	}
}

// flush writes the watermark when the log has grown since the last write.
// A failed write is fatal like a failed append: the watermark would stop
// rising, and a later loss of entries above it would go unnoticed.
//
// With synced set, it first waits until what was stored is fsynced, and
// writes nothing if a tail deletion came meanwhile (the entries up to the
// index may then be new ones, not yet synced): the next append wakes it.
func (g *guard) flush() {
	s, cuts := g.stored.Load(), g.cuts.Load()
	if s <= g.written.Load() {
		return
	}
	if g.synced != nil {
		if err := g.synced(); err != nil {
			g.failed("watermark write", fmt.Errorf("wait for the log's fsync: %w", err))
			return
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cuts.Load() != cuts {
		return
	}
	if s > g.written.Load() {
		if err := writeWatermark(g.path, s); err != nil {
			g.failed("watermark write", fmt.Errorf("write log watermark %s: %w", g.path, err))
			return
		}
		g.written.Store(s)
	}
}

func (g *guard) close() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
		<-g.done
	}
}

func readWatermark(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) != 12 || crc32Of(b[:8]) != binary.BigEndian.Uint32(b[8:]) {
		return 0, fmt.Errorf("%w: watermark file %s is damaged", ErrCorrupt, path)
	}
	return binary.BigEndian.Uint64(b[:8]), nil
}

func writeWatermark(path string, idx uint64) error {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], idx)
	binary.BigEndian.PutUint32(b[8:], crc32Of(b[:8]))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b[:], 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
