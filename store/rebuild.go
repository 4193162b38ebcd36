package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/queueindex"
)

// LogReader reads this node's Raft log: what a damaged queue index is
// rebuilt from (*raftlog.Stores).
type LogReader interface {
	// ReadUncached returns entry idx, checked
	// (raftlog.ErrBelowFloor when this node no longer holds it).
	ReadUncached(idx uint64) (raftlog.Entry, error)
	// FirstIndex is the first entry this node holds (0: none).
	FirstIndex() uint64
}

// Rebuild tuning: records read from a damaged index under the read lock at
// once; how far behind the queue's end a rebuild may be when it takes the
// write lock to finish; rounds before it finishes regardless.
const (
	rebuildChunk  = 4096
	rebuildFinish = 256
	rebuildRounds = 16
)

// checkIndexEvery is how often the rebuilder looks for index files that are
// shorter than what was written to them, or gone.
var checkIndexEvery = 10 * time.Second

// rebuildGroupMax is how many queues a group rebuilds together (each
// holds its new index's files open meanwhile).
const rebuildGroupMax = 64

// rebuilds is the goroutine that rebuilds damaged queue indexes from the log
// (StartRebuilds), the queues waiting together (rebuildGroup), and what it
// waits for.
type rebuilds struct {
	log  LogReader
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu   sync.Mutex
	want []rebuildReq    // oldest first
	busy map[*queue]bool // being rebuilt

	rebuilt, refused atomic.Uint64
}

// rebuildReq names a queue to rebuild; the queue pointer tells whether it is
// still the queue of that name when its turn comes (a topic deleted, or a
// snapshot restored since, replaces it).
type rebuildReq struct {
	topic string
	n     int
	q     *queue
	// below: only what lies below the index's floor is missing (the
	// index was restarted at the queue's end at start); the index serves
	// meanwhile.
	below bool
}

// StartRebuilds starts the goroutine that rebuilds a queue's index from
// log when a lookup finds it damaged, when its files are found shorter than
// what was written to them, or when a restart had to restart it at the
// queue's end. Call it once, before raft starts; Close stops it.
func (f *FSM) StartRebuilds(log LogReader) {
	rb := &rebuilds{log: log, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	f.mu.Lock()
	f.rb = rb
	f.mu.Unlock()
	go f.runRebuilds(rb)
}

// IndexRebuilds counts the queue indexes rebuilt from the log and the
// damaged ranges that could not be (this node no longer held their
// entries, or they did not add up): those are served by peers.
func (f *FSM) IndexRebuilds() (rebuilt, refused uint64) {
	f.mu.RLock()
	rb := f.rb
	f.mu.RUnlock()
	if rb == nil {
		return 0, 0
	}
	return rb.rebuilt.Load(), rb.refused.Load()
}

// stopRebuilds stops the rebuilder and waits for it (a rebuild under way is
// dropped; its queue is rebuilt at the next start).
func (f *FSM) stopRebuilds() {
	f.mu.RLock()
	rb := f.rb
	f.mu.RUnlock()
	if rb == nil {
		return
	}
	rb.once.Do(func() { close(rb.stop) })
	<-rb.done
}

// requestRebuildLocked asks for queue n of t to be rebuilt (once; later asks
// while it waits are dropped). Unless below, the queue serves nothing from
// this node until it is rebuilt. It needs f.mu, for reading at least.
func (f *FSM) requestRebuildLocked(t *topic, n int, below bool, why error) {
	rb := f.rb
	if rb == nil {
		return
	}
	q := t.queues[n]
	if !below {
		q.rebuilding.Store(true)
	}
	rb.mu.Lock()
	dup := rb.busy[q]
	for _, r := range rb.want {
		dup = dup || r.q == q
	}
	if !dup {
		rb.want = append(rb.want, rebuildReq{topic: t.name, n: n, q: q, below: below})
	}
	rb.mu.Unlock()
	if dup {
		return
	}
	if below {
		f.log.Warn("queue index: rebuilding what lies below its floor from the log; peers serve it meanwhile", "topic", t.name, "queue", n, "error", why)
	} else {
		f.log.Error("queue index damaged: rebuilding it from the log; this node serves the queue again once it is rebuilt", "topic", t.name, "queue", n, "error", why)
	}
	select {
	case rb.kick <- struct{}{}:
	default:
	}
}

// requestRebuildBelowLocked asks for what lies below the floor of queue n
// of t to be rebuilt after a restore that restarted its index at the
// queue's end, when that restore is the node's start from its own newest
// snapshot (applied is the restored snapshot's). Below a snapshot installed
// from the leader nothing is rebuilt: this node's log there may hold
// entries the group never committed.
func (f *FSM) requestRebuildBelowLocked(t *topic, n int, applied uint64, why error) {
	if f.appliedMu != 0 || applied == 0 || applied != f.startSnap {
		return
	}
	f.requestRebuildLocked(t, n, true, why)
}

func (f *FSM) runRebuilds(rb *rebuilds) {
	defer close(rb.done)
	tick := time.NewTicker(checkIndexEvery)
	defer tick.Stop()
	for {
		select {
		case <-rb.stop:
			return
		case <-rb.kick:
		case <-tick.C:
			f.checkIndexFiles()
		}
		for f.rebuildWaiting(rb) {
			select {
			case <-rb.stop:
				return
			default:
			}
		}
	}
}

// rebuildWaiting rebuilds the queues waiting for a rebuild (up to
// rebuildGroupMax of them, oldest first) together; false when none waits.
// It takes them under f.mu for reading: a restore asks for all the queues
// it restarted under the write lock, so they are taken as one group.
func (f *FSM) rebuildWaiting(rb *rebuilds) bool {
	f.mu.RLock()
	rb.mu.Lock()
	reqs := rb.want[:min(len(rb.want), rebuildGroupMax)]
	rb.want = rb.want[len(reqs):]
	if rb.busy == nil {
		rb.busy = map[*queue]bool{}
	}
	for _, r := range reqs {
		rb.busy[r.q] = true
	}
	rb.mu.Unlock()
	f.mu.RUnlock()
	if len(reqs) == 0 {
		return false
	}
	f.rebuildGroup(rb, reqs)
	rb.mu.Lock()
	clear(rb.busy)
	rb.mu.Unlock()
	return true
}

// checkIndexFiles asks for a rebuild of every queue whose index files are
// shorter than what was written to them (reads of the tail come from
// memory, so a file lost under them would otherwise go unseen until a read
// of older offsets or a restart).
//
// The sizes to expect are taken under the read lock, the files' sizes read
// without it (one stat per file), and a queue found short is checked again
// under the lock before it is rebuilt (retention or a rebuild may have
// removed the file meanwhile).
func (f *FSM) checkIndexFiles() {
	type want struct {
		t     *topic
		n     int
		files []queueindex.FileSize
	}
	var wants []want
	f.mu.RLock()
	for _, t := range f.topics {
		for i, q := range t.queues {
			if !q.rebuilding.Load() {
				wants = append(wants, want{t, i, q.ix.Sizes()})
			}
		}
	}
	f.mu.RUnlock()
	for _, w := range wants {
		if f.idx.CheckSizes(w.files) == nil {
			continue
		}
		f.mu.RLock()
		if f.topics[w.t.name] == w.t && !w.t.queues[w.n].rebuilding.Load() {
			if err := w.t.queues[w.n].ix.Check(); err != nil {
				f.requestRebuildLocked(w.t, w.n, false, err)
			}
		}
		f.mu.RUnlock()
	}
}

// queueRebuild is one rebuild: a new index (nq) beside the queue's, filled
// from the records of the old one that pass their checksums, in order,
// and from the log where they do not.
type queueRebuild struct {
	f   *FSM
	rb  *rebuilds
	req rebuildReq
	t   *topic
	// m: the rebuild's place in a group that reads the log once for all
	// (nil: it reads the log itself).
	m *groupMember
	// queues: the topic's queue count (fixed for the topic's life).
	queues int
	nq     *queueindex.Queue
	pos    queueindex.ScanPos

	headOK bool // what lies below the first intact record may come from the log
	locked bool // f.mu is held for writing (the last step): rlock does nothing
	// headLater: the head was not rebuilt because the log starts above it
	// (headFromLogLocked).
	headLater bool
	// heldAbove: nq holds every message stored in an entry above this log
	// index (set where nq restarts at an offset; 0: not known).
	heldAbove uint64

	have bool   // nq starts somewhere (a record, or a start after a refused range)
	last uint64 // log index of nq's last record (or below which the next gap starts)

	fromIndex, fromLog, entries, refused int
}

// rlock takes f.mu for reading unless the rebuild holds it for writing;
// runlock releases what rlock took.
func (b *queueRebuild) rlock() {
	if !b.locked {
		b.f.mu.RLock()
	}
}

func (b *queueRebuild) runlock() {
	if !b.locked {
		b.f.mu.RUnlock()
	}
}

// nqDo runs fn on the new index under the read lock (unless the rebuild
// holds it for writing): the writer removes index directories (a topic
// deleted, a snapshot restored) only under the write lock, so none is
// removed under a write to it. A queue gone meanwhile gets errGone.
func (b *queueRebuild) nqDo(fn func(*queueindex.Queue) error) error {
	b.rlock()
	defer b.runlock()
	if !b.valid() {
		return errGone
	}
	return fn(b.nq)
}

// reset restarts the new index at offset start (nqDo).
func (b *queueRebuild) reset(start uint64) error {
	return b.nqDo(func(nq *queueindex.Queue) error { return nq.Reset(start) })
}

// valid reports whether the queue is still the one asked for (f.mu held).
func (b *queueRebuild) valid() bool {
	t := b.f.topics[b.req.topic]
	return t != nil && t == b.t && b.req.n < len(t.queues) && t.queues[b.req.n] == b.req.q
}

// rebuild rebuilds the queue req names; m is its place in a group
// (rebuildGroup), nil when it is rebuilt alone.
func (f *FSM) rebuild(rb *rebuilds, req rebuildReq, m *groupMember) {
	start := time.Now()
	b := &queueRebuild{f: f, rb: rb, req: req, m: m}
	f.mu.RLock()
	b.t = f.topics[req.topic]
	ok := b.valid()
	if ok {
		b.queues = len(b.t.queues)
		if m != nil {
			m.queues = b.queues
		}
		// The index held the queue from its minimum (its head may be
		// damaged); an index that starts above it never held what lies
		// below (the node installed a snapshot), and its log there may
		// hold entries the group never committed.
		b.headOK = req.below || req.q.ix.Floor() <= req.q.min
	}
	var err error
	if ok && req.below && !b.headFromLogLocked() {
		f.log.Warn("queue index: not rebuilt below its floor: this node does not hold those entries; peers serve them",
			"topic", req.topic, "queue", req.n, "floor", req.q.ix.Floor(), "log_first", rb.log.FirstIndex(), "log_floor", f.logFloor)
		req.q.headLater.Store(b.headLater)
		ok = false
	}
	if ok {
		b.nq, err = f.idx.OpenRebuild(req.q.ix)
	}
	f.mu.RUnlock()
	if !ok {
		return
	}
	if err == nil {
		err = b.run()
	}
	if errors.Is(err, errStopped) {
		b.nq.Discard()
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	locked := time.Now()
	q := req.q
	if !b.valid() { // deleted, or a snapshot restored since
		b.nq.Discard()
		return
	}
	if err == nil {
		err = b.finishLocked()
	}
	if err == nil {
		if b.heldAbove != 0 { // else nq holds whatever the old index held
			q.heldAbove = b.heldAbove
		}
		q.headLater.Store(b.headLater)
	}
	if err == nil && b.fromIndex+b.fromLog == 0 && b.refused > 0 {
		// Every range was refused and no record kept: the index starts
		// at the queue's end, where the restart or the damage left it.
		f.log.Warn("queue index: nothing of it could be rebuilt from this node's log; peers serve what lies below its floor",
			"topic", req.topic, "queue", req.n, "floor", q.ix.Floor(), "took", time.Since(start).Round(time.Millisecond))
		q.rebuilding.Store(false)
		return
	}
	if err == nil {
		rb.rebuilt.Add(1)
		f.log.Info("queue index rebuilt", "topic", req.topic, "queue", req.n, "from", q.ix.Floor(), "to", q.next,
			"records_kept", b.fromIndex, "records_from_log", b.fromLog, "entries_read", b.entries, "ranges_refused", b.refused,
			"took", time.Since(start).Round(time.Millisecond), "applies_held", time.Since(locked).Round(time.Microsecond))
		q.rebuilding.Store(false)
		return
	}
	if b.nq != nil {
		b.nq.Discard()
	}
	// The index restarts at the queue's end, as a restart over a
	// damaged index does: peers serve what lies below.
	rb.refused.Add(1)
	f.log.Error("queue index: rebuild failed; indexing from the queue's end on, peers serve what lies below",
		"topic", req.topic, "queue", req.n, "queue_end", q.next, "took", time.Since(start).Round(time.Millisecond), "error", err)
	if rerr := q.ix.Reset(q.next); rerr != nil {
		f.indexFailedLocked(f.appliedMu+1, fmt.Errorf("queue index of %s/%d: %w", req.topic, req.n, rerr))
	}
	q.heldAbove = f.appliedMu
	q.rebuilding.Store(false)
}

// run fills nq from the old index and the log with no lock held but for
// short reads, round after round, until nq is close to the queue's end.
func (b *queueRebuild) run() error {
	f, q := b.f, b.req.q
	for round := 0; round < rebuildRounds; round++ {
		for done := false; !done; {
			select {
			case <-b.rb.stop:
				return errStopped
			default:
			}
			f.mu.RLock()
			if !b.valid() {
				f.mu.RUnlock()
				return errGone
			}
			var recs []queueindex.Scanned
			recs, b.pos, done = q.ix.Scan(b.pos, rebuildChunk)
			floor, end, applied := q.min, q.next, f.appliedMu
			f.mu.RUnlock()
			if err := b.take(recs, floor); err != nil {
				return err
			}
			if done {
				// The records missing at the end (a torn or lost last
				// file) come from the log up to what was applied then.
				if err := b.fillTo(end, applied); err != nil {
					return err
				}
			}
		}
		f.mu.RLock()
		behind := q.next - b.nq.Next()
		f.mu.RUnlock()
		if behind < rebuildFinish {
			break
		}
	}
	return nil
}

// finishLocked takes what was appended since the last round and puts nq in
// the queue's place (f.mu held for writing).
func (b *queueRebuild) finishLocked() error {
	f, q := b.f, b.req.q
	b.locked = true
	for done := false; !done; {
		var recs []queueindex.Scanned
		recs, b.pos, done = q.ix.Scan(b.pos, rebuildChunk)
		if err := b.take(recs, q.min); err != nil {
			return err
		}
	}
	if err := b.fillTo(q.next, f.appliedMu); err != nil {
		return err
	}
	if b.nq.Next() != q.next {
		return fmt.Errorf("the rebuilt index ends at offset %d, the queue at %d", b.nq.Next(), q.next)
	}
	if f.logFloor > 0 {
		if _, err := b.nq.DropBelowIndex(f.logFloor); err != nil {
			return err
		}
	}
	if err := b.nq.DropBelowOffset(q.min); err != nil {
		return err
	}
	if err := q.ix.Replace(b.nq); err != nil {
		return err
	}
	b.nq = nil
	return nil
}

// take appends the intact records of a scan that follow what nq holds,
// filling the gap before each from the log. Records wholly below floor (the
// queue's minimum) are not wanted; one that does not follow the last (a
// damaged record whose checksum holds by chance) is passed over.
func (b *queueRebuild) take(recs []queueindex.Scanned, floor uint64) error {
	for _, s := range recs {
		r := s.Record
		if !s.OK || r.End() <= floor {
			continue
		}
		if !b.have {
			if err := b.startAt(r, floor); err != nil {
				return err
			}
		} else if r.Base < b.nq.Next() || r.Index <= b.last {
			continue
		} else if r.Base > b.nq.Next() {
			if err := b.fill(b.last, r.Index, r.Base); err != nil {
				return err
			}
		}
		if err := b.nqDo(func(nq *queueindex.Queue) error { return nq.Append(r) }); err != nil {
			return err
		}
		b.last = r.Index
		b.fromIndex++
	}
	return nil
}

// startAt starts nq at the first intact record r: from floor on when
// r.Base is above it and the log holds what lies between, else at r.
func (b *queueRebuild) startAt(r queueindex.Record, floor uint64) error {
	b.have = true
	if r.Base > floor {
		b.rlock()
		ok, from := b.headFromLogLocked(), b.f.headIndexLocked(b.t)
		b.runlock()
		if ok {
			if err := b.reset(floor); err != nil {
				return err
			}
			b.last = from - 1
			return b.fill(b.last, r.Index, r.Base)
		}
	}
	b.last = 0
	return b.reset(r.Base)
}

// headFromLogLocked tells whether the log holds the queue from its minimum
// on: its entries from FSM.headIndexLocked on. A schedule or half queue's
// minimum follows its cursor, not a log index, so theirs is never rebuilt
// from the log. When only the log's start stands in the way, it notes
// headLater: the log floor may move up to the log's start.
func (b *queueRebuild) headFromLogLocked() bool {
	if !b.headOK || b.t.created == 0 || b.t.name == ScheduleTopic || b.t.name == TxnHalfTopic {
		return false
	}
	if b.f.logHoldsHeadLocked(b.rb, b.t) {
		return true
	}
	b.headLater = true
	return false
}

// retryHeadLocked asks again for the head of queue n of t to be rebuilt
// from the log when a rebuild left it to peers because this node's log
// started above it, and the log floor has since moved to where the log
// holds the queue's minimum (the node restarted from a snapshot older
// than the last cut, whose log is deleted up to it). f.mu is held for
// writing.
func (f *FSM) retryHeadLocked(t *topic, n int) {
	q := t.queues[n]
	if f.rb == nil || !q.headLater.Load() {
		return
	}
	if q.ix.Floor() <= q.min {
		q.headLater.Store(false) // the index holds the head (a cut moved the minimum up to it)
		return
	}
	if !f.logHoldsHeadLocked(f.rb, t) {
		return
	}
	q.headLater.Store(false)
	f.requestRebuildLocked(t, n, true, fmt.Errorf("the log floor moved to %d, and this node's log starts at %d", f.logFloor, f.rb.log.FirstIndex()))
}

// headIndexLocked is the first log index that may hold the message at the
// minimum of a queue of t: after the topic's creation and at or above the
// log floor retention moved the minimum to.
func (f *FSM) headIndexLocked(t *topic) uint64 { return max(t.created+1, f.logFloor) }

// logHoldsHeadLocked tells whether this node's log (rb's) holds the
// entries of t from headIndexLocked on.
func (f *FSM) logHoldsHeadLocked(rb *rebuilds, t *topic) bool {
	first := rb.log.FirstIndex()
	return first != 0 && first <= f.headIndexLocked(t)
}

// fillTo fills nq from the log up to the queue's end (offset end, reached
// at log index applied).
func (b *queueRebuild) fillTo(end, applied uint64) error {
	if !b.have {
		b.have = true
		b.rlock()
		from, ok := b.f.headIndexLocked(b.t), b.headFromLogLocked()
		floor := b.req.q.min
		b.runlock()
		if !ok {
			b.last = applied
			b.heldAbove = applied
			return b.reset(end)
		}
		if err := b.reset(floor); err != nil {
			return err
		}
		b.last = from - 1
	}
	if b.nq.Next() >= end {
		return nil
	}
	return b.fill(b.last, applied+1, end)
}

// fill appends the records of the entries strictly between log indexes lo
// and hi, from nq's end to offset end, derived from the entries as apply
// derives them (each request of the queue's topic adds its messages of the
// queue). Apply may have refused a request there (a retry of one already
// stored, a delivery or commit out of turn), which the entry alone does not
// tell: the records are kept only when the messages add up to exactly what
// the range must hold. A first pass counts every request; when that does
// not add up, a second leaves out the requests the dedupe table remembers
// as stored by another entry and the repeats of a producer id and sequence
// within retryLookback entries. When neither adds up, or this node no
// longer holds an entry of the range, the range is refused: nq restarts at
// end, and peers serve below it. Each pass appends as it goes, so memory
// does not grow with the range.
func (b *queueRebuild) fill(lo, hi, end uint64) error {
	base, last := b.nq.Next(), b.last
	var err error
	for _, careful := range []bool{false, true} {
		if err = b.pass(lo, hi, end, careful); err == nil {
			return nil
		}
		if errors.Is(err, errStopped) || errors.Is(err, errAppend) {
			return err
		}
		// Drop what the pass appended.
		b.last = last
		if err := b.nqDo(func(nq *queueindex.Queue) error {
			if err := nq.Flush(); err != nil {
				return err
			}
			return nq.Truncate(last)
		}); err != nil {
			return err
		}
		if b.nq.Next() != base {
			return fmt.Errorf("the rebuilt index cut back to log index %d ends at offset %d, not %d", last, b.nq.Next(), base)
		}
		if !errors.Is(err, errNotAddingUp) {
			break // a read error: the second pass would meet it too
		}
	}
	b.refused++
	b.rb.refused.Add(1)
	b.f.log.Warn("queue index: a damaged range cannot be rebuilt from this node's log; peers serve it and what lies below",
		"topic", b.req.topic, "queue", b.req.n, "offsets_from", base, "offsets_to", end, "log_from", lo+1, "log_to", hi-1, "error", err)
	b.last = hi - 1
	b.heldAbove = hi - 1
	return b.reset(end)
}

var (
	// errStopped: the node is closing; the rebuild is dropped.
	errStopped = errors.New("stopped")
	// errNotAddingUp: a range's entries do not hold the messages it must.
	errNotAddingUp = errors.New("the entries do not add up")
	// errAppend: the new index refused a record (a disk error), or its
	// queue is gone.
	errAppend = errors.New("append to the rebuilt index")
	// errGone: the queue was deleted or replaced (a snapshot restored).
	errGone = errors.New("the queue is gone")
)

// pass is one pass of fill over the entries strictly between lo and hi.
// careful leaves out what fill's second pass leaves out.
func (b *queueRebuild) pass(lo, hi, end uint64, careful bool) error {
	base := b.nq.Next()
	var win *retryWindow
	if careful {
		win = &retryWindow{seen: map[seqKey]uint64{}}
		if err := b.sequencesBefore(lo+1, win); err != nil {
			return err
		}
	}
	var cands []candidate
	appended := 0
	for idx := max(lo+1, b.t.created+1); idx < hi; idx++ {
		if idx%1024 == 0 {
			select {
			case <-b.rb.stop:
				return errStopped
			default:
			}
		}
		var err error
		if cands, err = b.entryCandidates(idx, hi, cands[:0]); err != nil {
			return err
		}
		if len(cands) == 0 {
			continue
		}
		r := queueindex.Record{Base: b.nq.Next(), Index: idx}
		var skip map[int]bool
		if careful {
			skip = b.storedElsewhere(idx, cands)
			for i, c := range cands {
				if c.producer != "" && win.repeat(seqKey{c.producer, c.seq}, idx) {
					skip[i] = true
				}
			}
		}
		for i, c := range cands {
			if skip[i] {
				r.Skip = append(r.Skip, c.req)
			} else {
				r.Count += c.count
			}
		}
		if r.Count == 0 {
			continue
		}
		if r.End() > end {
			return fmt.Errorf("%w: entry %d holds messages past offset %d", errNotAddingUp, idx, end)
		}
		if err := b.nqDo(func(nq *queueindex.Queue) error { return nq.Append(r) }); err != nil {
			return fmt.Errorf("%w: %w", errAppend, err)
		}
		appended++
		b.last = idx
	}
	if b.nq.Next() != end {
		return fmt.Errorf("%w: they hold %d messages of the queue, the range %d..%d holds %d", errNotAddingUp, b.nq.Next()-base, base, end, end-base)
	}
	b.fromLog += appended
	return nil
}

// candidate is a request of the rebuilt queue in an entry of the log.
type candidate struct {
	req      uint32 // its number in the entry
	count    uint32 // its messages in the queue
	producer string // an ordinary producer id ("" when none, or a delivery or commit)
	seq      uint64
}

// entryCandidates appends to cands the requests of entry idx with messages
// of the queue (none for a metadata entry). hi bounds the entries the
// caller reads next (a group reads ahead up to it).
func (b *queueRebuild) entryCandidates(idx, hi uint64, cands []candidate) ([]candidate, error) {
	b.entries++
	if b.m != nil && !b.locked {
		// Under the write lock (the last step) the group is not waited
		// for: the others may wait for the lock.
		if out, ok, err := b.m.candidates(idx, hi, cands); ok {
			return out, err
		}
	}
	e, err := b.rb.log.ReadUncached(idx)
	data := e.Data
	if b.m != nil {
		b.m.g.read++
	}
	if err != nil {
		return cands, err
	}
	if len(data) == 0 || raftlog.CommandType(data[0]) != raftlog.CmdBatch {
		return cands, nil
	}
	batch, err := raftlog.ParseReadBatch(data, e.At)
	if err == nil {
		var counts []uint32
		err = batch.Each(func(i int, rv *raftlog.RequestView) bool {
			if rv.Topic != b.t.name {
				return true
			}
			var top uint32
			counts, top = queueCounts(rv, counts)
			if n := inQueue(counts, top, b.queues, b.req.n); n > 0 {
				cands = append(cands, requestCandidate(rv, i, n))
			}
			return true
		})
	}
	if err != nil {
		return cands, fmt.Errorf("entry %d: %w", idx, err)
	}
	return cands, nil
}

// storedElsewhere marks the candidates of entry idx whose producer id and
// sequence the dedupe table remembers as stored by another entry: apply
// refused them.
func (b *queueRebuild) storedElsewhere(idx uint64, cands []candidate) map[int]bool {
	out := map[int]bool{}
	b.rlock()
	defer b.runlock()
	for i, c := range cands {
		if c.producer == "" {
			continue
		}
		if p := b.f.producers[c.producer]; p != nil {
			if r := p.results[c.seq]; r != nil && r.LogIndex != idx {
				out[i] = true
			}
		}
	}
	return out
}

// retryLookback is how many entries back a retry's first attempt is looked
// for in the log.
const retryLookback = 1024

type seqKey struct {
	producer string
	seq      uint64
}

// retryWindow is the producer ids and sequences of the requests of the
// last retryLookback entries read.
type retryWindow struct {
	seen  map[seqKey]uint64 // -> the last entry holding it
	order []seqKey
	at    []uint64
}

// repeat reports whether k was seen within retryLookback entries before
// idx, and records it at idx.
func (w *retryWindow) repeat(k seqKey, idx uint64) bool {
	for len(w.order) > 0 && w.at[0]+retryLookback < idx {
		if w.seen[w.order[0]] == w.at[0] {
			delete(w.seen, w.order[0])
		}
		w.order, w.at = w.order[1:], w.at[1:]
	}
	at, ok := w.seen[k]
	w.seen[k] = idx
	w.order, w.at = append(w.order, k), append(w.at, idx)
	return ok && at+retryLookback >= idx
}

// sequencesBefore puts in win the producer ids and sequences of the
// requests of up to retryLookback entries before log index from (those the
// log holds).
func (b *queueRebuild) sequencesBefore(from uint64, win *retryWindow) error {
	lo := max(b.t.created+1, b.rb.log.FirstIndex())
	if from > retryLookback {
		lo = max(lo, from-retryLookback)
	}
	var cands []candidate
	for idx := lo; idx < from; idx++ {
		var err error
		if cands, err = b.entryCandidates(idx, from, cands[:0]); err != nil {
			return err
		}
		for _, c := range cands {
			if c.producer != "" {
				win.repeat(seqKey{c.producer, c.seq}, idx)
			}
		}
	}
	return nil
}

// queueCounts counts rv's messages per queue into counts (reused, and
// grown to the highest queue named) and returns the highest queue named.
// Apply refuses a request naming a queue at or above its topic's queue
// count: it has no messages in any queue.
func queueCounts(rv *raftlog.RequestView, counts []uint32) ([]uint32, uint32) {
	clear(counts)
	var top uint32
	rv.Messages(func(_ int, m *raftlog.MessageView) bool {
		if int(m.Queue) >= len(counts) {
			if int(m.Queue) >= MaxQueues { // no topic has that many
				top = m.Queue
				return false
			}
			counts = append(counts, make([]uint32, int(m.Queue)+1-len(counts))...)
		}
		top = max(top, m.Queue)
		counts[m.Queue]++
		return true
	})
	return counts, top
}

// inQueue is what queueCounts counted in queue n of a topic of queues
// queues (0 when the request names a queue out of range: apply refuses
// it).
func inQueue(counts []uint32, top uint32, queues, n int) uint32 {
	if int(top) >= queues || n >= len(counts) {
		return 0
	}
	return counts[n]
}

// requestCandidate is request i, rv, of an entry with count messages in
// the rebuilt queue.
func requestCandidate(rv *raftlog.RequestView, i int, count uint32) candidate {
	c := candidate{req: uint32(i), count: count}
	_, delivery := parseScheduleProducer(rv.ProducerID)
	_, commit := parseTxnProducer(rv.ProducerID)
	if !delivery && !commit {
		c.producer, c.seq = rv.ProducerID, rv.Seq
	}
	return c
}

// IndexRebuilds is FSM.IndexRebuilds of this node.
func (s *Store) IndexRebuilds() (rebuilt, refused uint64) { return s.fsm.IndexRebuilds() }
