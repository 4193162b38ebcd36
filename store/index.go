package store

import (
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/queueindex"
)

// queue is a queue's state: its range, replicated, and its index records,
// on this node's disk (queueindex).
type queue struct {
	ix   *queueindex.Queue
	next uint64 // offset of the next message
	min  uint64 // lowest retained offset
	// rebuilding: its index was found damaged and is being rebuilt from
	// the log (rebuild.go); this node serves none of it meanwhile.
	rebuilding atomic.Bool
	// heldAbove: the index holds every message stored in an entry above
	// this log index that retention has not dropped (0: not known), set
	// where the index restarts at an offset (a restore, a rebuild). Like
	// ix, it is this node's.
	heldAbove uint64
	// headLater: a rebuild left the index's head to peers because this
	// node's log started above it; retention moving the log floor may
	// bring the head within the log (retryHeadLocked).
	headLater atomic.Bool
}

type topic struct {
	name    string
	created uint64 // log index of the command that created it (0: from an old snapshot)
	queues  []*queue
	perm    uint32 // PermRead | PermWrite bits
}

func (t *topic) key() queueindex.TopicKey {
	return queueindex.TopicKey{Name: t.name, Created: t.created}
}

// applyBatchLocked assigns offsets to every request of the entry and records
// one index record per queue touched.
func (f *FSM) applyBatchLocked(index uint64, data []byte) interface{} {
	b, err := raftlog.ParseBatch(data, 0) // offsets and the index need no timestamps
	if err != nil {
		return f.markDamagedLocked(index, err)
	}
	results := make([]*ProduceResult, 0, b.Requests())
	type qkey struct {
		t *topic
		q uint32
	}
	recs := map[qkey]*queueindex.Record{}
	var order []qkey
	var ordinal uint32
	var skipped []uint32
	err = b.Each(func(i int, rv *raftlog.RequestView) bool {
		res := &ProduceResult{LogIndex: index, Ordinal: ordinal, Count: uint32(rv.Count)}
		ordinal += uint32(rv.Count)
		var digest uint64 // computed by dedupeLocked when the request has a producer id
		results = append(results, res)
		t := f.topics[rv.Topic]
		sq, isDelivery := parseScheduleProducer(rv.ProducerID)
		if isDelivery {
			// A delivery out of a schedule queue (schedule.go): the cursor,
			// not the dedupe table, makes it happen once.
			if err := f.scheduleCheckLocked(sq, rv.Seq, rv.Count); err != nil {
				res.Err = err
				skipped = append(skipped, uint32(i))
				return true
			}
			f.scheduleAdvanceLocked(sq, rv.Seq, rv.Count)
		} else if hq, isCommit := parseTxnProducer(rv.ProducerID); isCommit {
			// The commit of one half message (txn.go): its decision, not
			// the dedupe table, makes it happen once.
			isDelivery = true
			err := f.txnCheckLocked(hq, rv.Seq)
			if err == nil && rv.Count != 1 {
				err = fmt.Errorf("%w: a commit holds %d messages, want 1", ErrInvalidQueue, rv.Count)
			}
			if err != nil {
				res.Err = err
				skipped = append(skipped, uint32(i))
				return true
			}
			f.txnDecideLocked(hq, rv.Seq)
		}
		if t == nil {
			res.Err = fmt.Errorf("%w: %q", ErrUnknownTopic, rv.Topic)
		} else if !isDelivery {
			if prev, err := f.dedupeLocked(t, rv, &digest); err != nil {
				res.Err = err
			} else if prev != nil {
				*res = *prev
				res.Duplicate = true
			}
		}
		if res.Err == nil && !res.Duplicate {
			rv.Messages(func(_ int, m *raftlog.MessageView) bool {
				if int(m.Queue) >= len(t.queues) {
					res.Err = fmt.Errorf("%w: queue %d of topic %q with %d queues", ErrInvalidQueue, m.Queue, t.name, len(t.queues))
					return false
				}
				return true
			})
		}
		if res.Err != nil || res.Duplicate {
			if isDelivery {
				// Its topic is gone (or lost queues) since the messages
				// were staged: they left their schedule (or half) queue,
				// stored nowhere.
				f.log.Warn("delayed or committed messages dropped at delivery", "index", index, "topic", rv.Topic, "messages", rv.Count, "error", res.Err)
			}
			skipped = append(skipped, uint32(i))
			return true
		}
		rv.Messages(func(_ int, m *raftlog.MessageView) bool {
			k := qkey{t, m.Queue}
			r := recs[k]
			if r == nil {
				q := t.queues[m.Queue]
				r = &queueindex.Record{Base: q.next, Index: index}
				recs[k] = r
				order = append(order, k)
			}
			bi := -1
			for j := range res.Bases {
				if res.Bases[j].Queue == m.Queue {
					bi = j
					break
				}
			}
			if bi < 0 {
				bi = len(res.Bases)
				res.Bases = append(res.Bases, QueueBase{Queue: m.Queue, Base: r.End()})
			}
			res.Bases[bi].Count++
			r.Count++
			return true
		})
		if rv.ProducerID != "" && !isDelivery {
			res.Digest = digest
			f.rememberLocked(rv.ProducerID, rv.Seq, index, res)
		}
		return true
	})
	if err != nil {
		// The CRC matched, so this is an encoder bug, not disk rot: every
		// node holds these bytes and rejects the whole entry alike, so
		// offsets stay the same everywhere. Not a skip of a damaged entry.
		f.log.Error("rejecting malformed batch", "index", index, "error", err)
		return fmt.Errorf("entry %d: %w", index, err)
	}
	for _, k := range order {
		r := recs[k]
		if len(skipped) > 0 {
			r.Skip = skipped
		}
		q := k.t.queues[k.q]
		if err := q.ix.Append(*r); err != nil {
			return f.indexFailedLocked(index, fmt.Errorf("queue index of %s/%d: %w", k.t.name, k.q, err))
		}
		q.next = r.End()
	}
	return results
}

// Location points at the messages of one queue in one Raft entry.
type Location struct {
	Base     uint64   // queue offset of the first message of the queue in the entry
	LogIndex uint64   // Raft index of the entry
	Count    uint32   // messages of the queue in the entry
	Skip     []uint32 // request numbers in the entry that were not appended
}

// retainLocked drops this node's index records of every entry below index
// below and moves each queue's minimum offset: to the minimum mins lists
// for it, or where mins is nil (a command of an older version), to the
// queue's first remaining message in this node's index (to its end when
// none remains). Either way never past the queue's end, never down.
//
// A node's index may lack its head (it was damaged, or the node installed
// a snapshot and indexes from its end on); its first remaining record is
// then above the queue's true minimum, and the minimum, which is
// replicated state, would differ from its peers'. So the leader decides the
// minimums once, from its own index (RetainMins), and every node applies
// them alike. A queue it could not tell keeps its minimum: one too low is
// moved by a later cut, one too high would hide messages.
func (f *FSM) retainLocked(below uint64, mins *RetainMins) {
	if below <= f.logFloor {
		return
	}
	f.logFloor = below
	var listed map[*queue]uint64
	if mins != nil {
		listed = map[*queue]uint64{}
		for _, tm := range mins.Topics {
			t := f.topics[tm.Topic]
			if t == nil || t.created > mins.At {
				continue // deleted, or created since the leader looked: not the topic it listed
			}
			for i, m := range tm.Mins[:min(len(tm.Mins), len(t.queues))] {
				listed[t.queues[i]] = m
			}
		}
	}
	for _, t := range f.topics {
		for i, q := range t.queues {
			floor, err := q.ix.DropBelowIndex(below)
			if err != nil {
				// Files left behind cost disk, not correctness: the
				// minimum below moves all the same.
				f.log.Warn("retention: dropping queue index files failed", "topic", t.name, "queue", i, "error", err)
			}
			if mins != nil {
				floor = listed[q] // 0 when not listed: the minimum stays
			}
			q.min = max(q.min, min(floor, q.next))
			f.retryHeadLocked(t, i)
		}
	}
}

// TopicMins are the minimum offsets of a topic's queues after a retention
// cut, in queue order; 0 keeps a queue's minimum as it is.
type TopicMins struct {
	Topic string   `json:"t"`
	Mins  []uint64 `json:"m"`
}

// RetainMins are the minimums a retention cut moves the queues to, as the
// leader's index told them when it had applied log index At. A topic
// created after At is not the one listed under its name, and is left out.
type RetainMins struct {
	At     uint64      `json:"at"`
	Topics []TopicMins `json:"topics,omitempty"`
}

// maxRetainMinsBytes bounds the minimums one retain command carries; the
// topics past it are left out of that cut (their minimums stay, for a
// later cut to move).
const maxRetainMinsBytes = 4 << 20

// RetainMins returns the queues' minimums once the messages of the log
// entries below index below are dropped, as this node's index tells them:
// the base of the first record at or above below, or the queue's end when
// none is. Only queues whose minimum moves are listed, and only those this
// node's index can tell (minAtLocked). The topics are taken from a point
// that moves with below, so that a cut that cannot list every topic leaves
// out others at the next one.
func (f *FSM) RetainMins(below uint64) *RetainMins {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rm := &RetainMins{At: f.appliedMu}
	names := make([]string, 0, len(f.topics))
	for name := range f.topics {
		names = append(names, name)
	}
	if len(names) == 0 {
		return rm
	}
	sort.Strings(names)
	size, start := 0, int(below%uint64(len(names)))
	for k := range names {
		t := f.topics[names[(start+k)%len(names)]]
		mins := make([]uint64, len(t.queues))
		moves := false
		for i, q := range t.queues {
			if m, ok := f.minAtLocked(t, i, below); ok && m > q.min {
				mins[i], moves = m, true
			}
		}
		if !moves {
			continue
		}
		if size += len(t.name) + 16 + 21*len(mins); size > maxRetainMinsBytes {
			f.log.Warn("retention: the cut moves the minimums of more queues than one command carries; the rest move at a later cut", "below", below, "topics_listed", len(rm.Topics))
			break
		}
		rm.Topics = append(rm.Topics, TopicMins{Topic: t.name, Mins: mins})
	}
	return rm
}

// minAtLocked is queue n of t's minimum once the messages of the entries
// below log index below are dropped, from this node's index; false when
// the index cannot tell: it is being rebuilt or cannot be read, or it lacks
// the queue's head (its floor is above the minimum) and may lack records
// at or above below too (it holds none at or below below, nor every
// message of the entries from below on: heldAbove).
func (f *FSM) minAtLocked(t *topic, n int, below uint64) (uint64, bool) {
	q := t.queues[n]
	if q.rebuilding.Load() {
		return 0, false
	}
	if floor := q.ix.Floor(); floor > q.min && (q.heldAbove == 0 || q.heldAbove >= below) {
		recs, err := q.ix.Find(floor, 1)
		if err != nil {
			f.requestRebuildLocked(t, n, false, fmt.Errorf("%w: topic %q queue %d offset %d: %w", ErrIndexDamaged, t.name, n, floor, err))
			return 0, false
		}
		// Records are dense in offsets and in log index order: when the
		// first held one is of an entry at or below below, so is every
		// record before the first at or above below, and that one is held.
		if len(recs) == 0 || recs[0].Index > below {
			return 0, false
		}
	}
	m, err := q.ix.FloorAt(below)
	if err != nil {
		f.requestRebuildLocked(t, n, false, fmt.Errorf("%w: topic %q queue %d at log index %d: %w", ErrIndexDamaged, t.name, n, below, err))
		return 0, false
	}
	return min(m, q.next), true
}

// LogFloor is the log index below which retention has dropped every message
// (0: nothing dropped). A node may delete its log below it once a snapshot
// covers it.
func (f *FSM) LogFloor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.logFloor
}

// QueueRange is the retained range of a queue: [Min, Max).
type QueueRange struct {
	Min, Max uint64
	// Held is the first offset whose index this node holds (Min, unless
	// the node installed a snapshot: it holds from the snapshot's end on
	// and peers serve what lies below).
	Held uint64
}

func (q *queue) rangeLocked() QueueRange {
	return QueueRange{Min: q.min, Max: q.next, Held: max(q.min, q.ix.Floor())}
}

// Locate returns up to limit locations covering offsets from offset on, and
// the queue's range as this node has applied it.
func (f *FSM) Locate(topicName string, q int32, offset uint64, limit int) ([]Location, QueueRange, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[topicName]
	if t == nil {
		return nil, QueueRange{}, fmt.Errorf("%w: %q", ErrUnknownTopic, topicName)
	}
	if q < 0 || int(q) >= len(t.queues) {
		return nil, QueueRange{}, fmt.Errorf("%w: queue %d of topic %q with %d queues", ErrInvalidQueue, q, topicName, len(t.queues))
	}
	qu := t.queues[q]
	rng := qu.rangeLocked()
	if offset < rng.Held || offset >= qu.next {
		return nil, rng, nil
	}
	if qu.rebuilding.Load() {
		return nil, rng, fmt.Errorf("%w: topic %q queue %d", ErrIndexRebuilding, topicName, q)
	}
	recs, err := qu.ix.Find(offset, limit)
	if err != nil {
		err = fmt.Errorf("%w: topic %q queue %d offset %d: %w", ErrIndexDamaged, topicName, q, offset, err)
		f.requestRebuildLocked(t, int(q), false, err)
		return nil, rng, err
	}
	out := make([]Location, len(recs))
	for i, r := range recs {
		out[i] = location(r)
	}
	return out, rng, nil
}

func location(r queueindex.Record) Location {
	return Location{Base: r.Base, LogIndex: r.Index, Count: r.Count, Skip: r.Skip}
}
