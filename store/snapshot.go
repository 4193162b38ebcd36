package store

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/store/queueindex"
)

// The snapshot holds metadata only: topics with their queues' ranges,
// consumer offsets, the dedupe table, the node registry, the held
// orderly-consumption locks and the rest of the state machine. It is a gob
// stream followed by a CRC32C of the stream. Its size depends on topics,
// queues, groups and producers, not on how many messages are kept.
//
// Fields added without a new format (LogFloor, Schedule, MaxReconsume,
// Locks, GroupID, ProducerNumbers) are absent from older snapshots and restore empty; a field that
// older versions wrote and this one no longer has (LockTerm) is skipped
// by the decoder.
//
// Format 5 adds the user table (users.go) with its sealed secrets; older
// formats restore an empty table.
//
// Format 3 leaves the index records out: each node keeps them on its disk
// (queueindex), synced before the snapshot is written, and restore cuts
// them back to the snapshot. Only the records of what still waits in the
// schedule and half queues stay in it (pendingRecordsLocked). Formats 1 and 2 carry them; a node restoring
// one writes them to its disk index when that does not already match.
//
// Format 2 adds to every remembered result the request's digest and message
// count, and to each of its queue bases the messages of that queue. Format 1
// is still read: its results are marked legacy (NoDigest) and a retry is
// matched against them as fitsLegacy says, which is as far as they can be
// checked; they keep the mark when written again in format 2.

type snapRecord struct {
	Base, Index uint64
	Count       uint32
	Skip        []uint32
}

type snapQueue struct {
	Next, Min uint64
	Records   []snapRecord // formats 1 and 2: every record; later: what waits in a schedule or half queue
}

type snapTopic struct {
	Name    string
	Queues  []snapQueue
	Perm    uint32 // 0 in snapshots from before permissions: read and write
	Created uint64 // format 3: log index of the command that created it
}

type snapProducer struct {
	ID      string
	Floor   uint64
	Seqs    []uint64 // oldest first
	Results []snapResult
}

type snapResult struct {
	LogIndex uint64
	Ordinal  uint32
	Bases    []QueueBase // Count is 0 in format 1
	Count    uint32      // format 2
	Digest   uint64      // format 2
	NoDigest bool        // format 2: restored from format 1, Count and Digest unknown
}

type snapState struct {
	Format    int
	Topics    []snapTopic
	Offsets   map[string]map[string]map[int32]uint64
	Producers []snapProducer // least recently used first
	Nodes     map[string]NodeInfo
	LogFloor  uint64 // absent (0) in snapshots from before retention
	Applied   uint64 // last entry applied to the state (0 in older snapshots)

	// Schedule: the delivered cursors of the schedule queues (absent in
	// older snapshots and while no delayed message was delivered).
	Schedule *snapSchedule
	// Txn: the decisions of the half queue (format 4; absent in older
	// snapshots and while no half message was decided).
	Txn *snapTxn
	// MaxReconsume: group -> max reconsume times (absent in older snapshots).
	MaxReconsume map[string]int32
	// Locks: the orderly-consumption locks held (absent in older
	// snapshots, which restore none).
	Locks []snapLock
	// Users: the user table with sealed secrets (format 5; absent in
	// older snapshots, which restore an empty table).
	Users []User
	// GroupID: the group's id (absent in older snapshots: the next ready
	// leader sets one).
	GroupID string
	// ProducerNumbers: how many producer numbers the group handed out
	// (absent in older snapshots, written before any was).
	ProducerNumbers uint64
}

// captured is a cheap copy made under the read lock; the encoding happens in
// Persist, outside the lock.
type captured struct {
	topics    []capturedTopic
	offsets   map[string]map[string]map[int32]uint64
	producers []snapProducer
	nodes     map[string]NodeInfo
	logFloor  uint64
	applied   uint64
	sched     schedule
	txn       txnState

	maxReconsume map[string]int32
	locks        []snapLock
	users        []User
	groupID      string

	producerNumbers uint64
}

type capturedTopic struct {
	snapTopic
}

// pendingRecordsLocked returns the index records of what still waits in
// queue i of the schedule topic (from its delivered cursor) or of the half
// topic (from its decided cursor); none for other queues. A snapshot
// carries them because the leader's scheduler and transaction checker read
// those queues on the node itself: a node that installs the snapshot
// indexes only from its end on, and as leader would otherwise not see what
// waits below. Their number is the pending backlog, not what is retained.
func (f *FSM) pendingRecordsLocked(t *topic, i int) []snapRecord {
	var from uint64
	switch t.name {
	case ScheduleTopic:
		from = f.sched.cursor[i]
	case TxnHalfTopic:
		from = f.txn.below
	default:
		return nil
	}
	q := t.queues[i]
	var out []snapRecord
	for off := max(from, q.min, q.ix.Floor()); off < q.next; {
		recs, err := q.ix.Find(off, 4096)
		if err != nil || len(recs) == 0 {
			// A damaged index: the restoring node indexes from the end.
			return nil
		}
		for _, r := range recs {
			out = append(out, snapRecord{Base: r.Base, Index: r.Index, Count: r.Count, Skip: r.Skip})
		}
		off = recs[len(recs)-1].End()
	}
	return out
}

func (f *FSM) captureLocked() *captured {
	c := &captured{offsets: map[string]map[string]map[int32]uint64{}, nodes: map[string]NodeInfo{}, logFloor: f.logFloor,
		applied: f.applied.Load()}
	c.sched = f.sched
	c.txn = f.txn.clone()
	for _, t := range f.topics {
		ct := capturedTopic{snapTopic{Name: t.name, Queues: make([]snapQueue, len(t.queues)), Perm: t.perm, Created: t.created}}
		for i, q := range t.queues {
			ct.Queues[i] = snapQueue{Next: q.next, Min: q.min, Records: f.pendingRecordsLocked(t, i)}
		}
		c.topics = append(c.topics, ct)
	}
	for g, ts := range f.offsets {
		c.offsets[g] = map[string]map[int32]uint64{}
		for t, qs := range ts {
			m := make(map[int32]uint64, len(qs))
			for q, o := range qs {
				m[q] = o
			}
			c.offsets[g][t] = m
		}
	}
	for e := f.lru.Front(); e != nil; e = e.Next() {
		p := e.Value.(*producer)
		sp := snapProducer{ID: p.id, Floor: p.floor}
		for i := range p.ring {
			seq := p.ring[(p.head+i)%len(p.ring)]
			r := p.results[seq]
			sp.Seqs = append(sp.Seqs, seq)
			sp.Results = append(sp.Results, snapResult{LogIndex: r.LogIndex, Ordinal: r.Ordinal, Bases: r.Bases,
				Count: r.Count, Digest: r.Digest, NoDigest: r.legacy})
		}
		c.producers = append(c.producers, sp)
	}
	for k, v := range f.nodes {
		c.nodes[k] = v
	}
	c.locks = f.captureLocksLocked()
	c.users = f.captureUsersLocked()
	c.groupID = f.GroupID()
	c.producerNumbers = f.producerNumbers
	c.maxReconsume = make(map[string]int32, len(f.maxReconsume))
	for g, n := range f.maxReconsume {
		c.maxReconsume[g] = n
	}
	return c
}

// loadLocked loads a snapshot into a reset state machine, binding each
// queue to its index on disk as it stood when the snapshot was taken
// (loadIndexLocked).
func (f *FSM) loadLocked(st *snapState) error {
	live := make([]queueindex.TopicKey, 0, len(st.Topics))
	keep := map[*queueindex.Queue]bool{}
	for _, st := range st.Topics {
		live = append(live, queueindex.TopicKey{Name: st.Name, Created: st.Created})
	}
	// Close what the replaced state had open; drop the directories of
	// topics the snapshot does not hold (deleted, or never applied here).
	if err := f.idx.Prune(live, keep); err != nil {
		return err
	}
	for _, snapT := range st.Topics {
		t := &topic{name: snapT.Name, created: snapT.Created, queues: make([]*queue, len(snapT.Queues)), perm: snapT.Perm}
		if t.perm == 0 {
			t.perm = PermReadWrite
		}
		ixs, err := f.idx.OpenTopic(t.key(), len(t.queues))
		if err != nil {
			return err
		}
		for i, sq := range snapT.Queues {
			t.queues[i] = &queue{ix: ixs[i], next: sq.Next, min: sq.Min}
			if err := f.loadIndexLocked(t, i, sq, st.Applied); err != nil {
				return fmt.Errorf("topic %q queue %d: %w", t.name, i, err)
			}
		}
		f.topics[t.name] = t
	}
	if st.Offsets != nil {
		f.offsets = st.Offsets
	}
	for _, sp := range st.Producers {
		p := &producer{id: sp.ID, floor: sp.Floor, results: map[uint64]*ProduceResult{}, ring: sp.Seqs}
		for i, seq := range sp.Seqs {
			r := sp.Results[i]
			p.results[seq] = &ProduceResult{LogIndex: r.LogIndex, Ordinal: r.Ordinal, Bases: r.Bases,
				Count: r.Count, Digest: r.Digest, legacy: r.NoDigest}
		}
		p.elem = f.lru.PushBack(p)
		f.producers[p.id] = p
	}
	if st.Nodes != nil {
		f.nodes = st.Nodes
	}
	f.logFloor = st.LogFloor
	f.sched.load(st.Schedule)
	if err := f.txn.load(st.Txn); err != nil { // checked by readSnapshot
		return err
	}
	if st.MaxReconsume != nil {
		f.maxReconsume = st.MaxReconsume
	}
	f.loadLocksLocked(st.Locks)
	f.loadUsersLocked(st.Users)
	f.setGroupIDLocked(st.GroupID)
	f.producerNumbers = st.ProducerNumbers
	return nil
}

// loadIndexLocked cuts queue i's index back to the snapshot (records of
// entries after applied are applied again) and checks that it ends where
// the snapshot says the queue ends. When it does not (the node installed a
// leader's snapshot past its own log, lost index files, or the cut met a
// damaged record), it is rebuilt
// from the snapshot's records (formats 1 and 2) or restarted at the
// queue's end: offsets below are then served by the peers that hold them,
// and rebuilt from the log in the background where this node holds it
// (rebuild.go).
func (f *FSM) loadIndexLocked(t *topic, i int, sq snapQueue, applied uint64) error {
	ix := t.queues[i].ix
	if err := ix.Truncate(applied); err != nil {
		// The index is derived state: a damaged one never stops a restore
		// (raft would fall back to an older snapshot, whose log retention
		// may have deleted). The queue is indexed anew below.
		f.log.Warn("queue index damaged: dropping it", "topic", t.name, "queue", i, "error", err)
		if err := ix.Reset(0); err != nil {
			return err
		}
	}
	if ix.Next() == sq.Next && (len(sq.Records) == 0 || ix.Floor() <= sq.Records[0].Base) {
		return nil
	}
	if len(sq.Records) > 0 {
		if err := ix.Reset(sq.Records[0].Base); err != nil {
			return err
		}
		for _, r := range sq.Records {
			if err := ix.Append(queueindex.Record{Base: r.Base, Index: r.Index, Count: r.Count, Skip: r.Skip}); err != nil {
				return err
			}
		}
		return nil
	}
	if ix.Next() != 0 || sq.Next != sq.Min {
		f.log.Warn("queue index does not match the snapshot: indexing from the queue's end on, peers serve what lies below",
			"topic", t.name, "queue", i, "index_end", ix.Next(), "queue_end", sq.Next)
	}
	end := ix.Next()
	if err := ix.Reset(sq.Next); err != nil {
		return err
	}
	t.queues[i].heldAbove = applied // what the entries after the snapshot store is indexed as they apply
	if sq.Next != sq.Min {
		f.requestRebuildBelowLocked(t, i, applied, fmt.Errorf("the index ended at offset %d, the snapshot at %d", end, sq.Next))
	}
	return nil
}

type fsmSnapshot struct {
	state *captured
	idx   *queueindex.Store
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	// The index records the snapshot does not carry must outlive it.
	err := s.idx.Sync()
	if err == nil {
		err = writeSnapshot(sink, s.state)
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

func writeSnapshot(w io.Writer, c *captured) error {
	st := snapState{Format: snapshotFormat, Offsets: c.offsets, Producers: c.producers, Nodes: c.nodes, LogFloor: c.logFloor, Applied: c.applied}
	st.Schedule = c.sched.snap()
	st.Txn = c.txn.snap()
	st.MaxReconsume, st.Locks = c.maxReconsume, c.locks
	st.Users, st.GroupID, st.ProducerNumbers = c.users, c.groupID, c.producerNumbers
	for _, ct := range c.topics {
		st.Topics = append(st.Topics, ct.snapTopic)
	}
	h := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<16)
	if err := gob.NewEncoder(bw).Encode(&st); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	var sum [4]byte
	crc := h.Sum32()
	sum[0], sum[1], sum[2], sum[3] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	_, err := w.Write(sum[:])
	return err
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CheckSnapshot reads a snapshot's state as Restore would and reports
// whether Restore would accept it (its CRC32C, encoding and format checks),
// without loading it. A node checks its snapshots at start with it, before
// raft restores one.
func CheckSnapshot(r io.Reader) error {
	_, err := readSnapshot(r)
	return err
}

func readSnapshot(r io.Reader) (*snapState, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: snapshot of %d bytes", ErrCorruptCommand, len(data))
	}
	body, sum := data[:len(data)-4], data[len(data)-4:]
	want := uint32(sum[0])<<24 | uint32(sum[1])<<16 | uint32(sum[2])<<8 | uint32(sum[3])
	if got := crc32.Checksum(body, castagnoli); got != want {
		return nil, fmt.Errorf("%w: snapshot crc32c %08x, want %08x", ErrCorruptCommand, got, want)
	}
	var st snapState
	if err := gob.NewDecoder(bytes.NewReader(body)).Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: decode snapshot: %w", ErrCorruptCommand, err)
	}
	if st.Format < 1 || st.Format > snapshotFormat {
		return nil, fmt.Errorf("%w: snapshot format %d, want 1..%d", ErrCorruptCommand, st.Format, snapshotFormat)
	}
	if err := (&schedule{}).load(st.Schedule); err != nil {
		return nil, err
	}
	if err := (&txnState{}).load(st.Txn); err != nil {
		return nil, err
	}
	for _, l := range st.Locks {
		if l.Member == "" {
			return nil, fmt.Errorf("%w: a lock of group %q without a member", ErrCorruptCommand, l.Group)
		}
	}
	for _, p := range st.Producers {
		if len(p.Seqs) != len(p.Results) || len(p.Seqs) > DedupeWindow {
			return nil, fmt.Errorf("%w: producer %q has %d sequences and %d results", ErrCorruptCommand, p.ID, len(p.Seqs), len(p.Results))
		}
		for i := range p.Results {
			r := &p.Results[i]
			if st.Format == 1 {
				r.NoDigest, r.Count, r.Digest = true, 0, 0
				for j := range r.Bases {
					r.Bases[j].Count = 0
				}
				continue
			}
			if err := checkSnapResult(r); err != nil {
				return nil, fmt.Errorf("%w: producer %q sequence %d: %w", ErrCorruptCommand, p.ID, p.Seqs[i], err)
			}
		}
	}
	return &st, nil
}

// checkSnapResult checks that a format-2 result is one the FSM could have
// remembered: without the digest mark, its queue counts add up to its
// message count; with it, no counts at all.
func checkSnapResult(r *snapResult) error {
	var sum uint64
	for _, b := range r.Bases {
		sum += uint64(b.Count)
	}
	switch {
	case r.NoDigest && (sum != 0 || r.Count != 0 || r.Digest != 0):
		return fmt.Errorf("result without digest has counts (%d messages, %d in queues)", r.Count, sum)
	case !r.NoDigest && sum != uint64(r.Count):
		return fmt.Errorf("%d messages, %d in its queues", r.Count, sum)
	}
	return nil
}

// Snapshot captures the metadata; message bodies stay in the log.
//
// A damaged FSM (see ApplyBatch) refuses: raft labels a snapshot with the
// index of the last entry it handed to the FSM, which this state does not
// hold, and a restart from it would lose the entries after the damage.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if at, err := f.Damaged(); at != 0 {
		return nil, fmt.Errorf("snapshot refused: %w", err)
	}
	// The write lock: Flush moves the queues' buffered records to their
	// files, which readers look at.
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.idx.Flush(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &fsmSnapshot{state: f.captureLocked(), idx: f.idx}, nil
}

// Restore replaces the state with a snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.mu.Lock()
	// What the replaced state applied is written first: the records up to
	// the snapshot among it are kept.
	err = f.idx.Flush()
	f.reset()
	if err == nil {
		err = f.loadLocked(st)
	}
	f.appliedMu = st.Applied
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("restore snapshot: queue index: %w", err)
	}
	// Raft applies the entries after the snapshot next; until one comes,
	// the node has applied what the snapshot holds.
	f.applied.Store(st.Applied)
	f.wake()
	return nil
}
