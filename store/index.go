package store

import (
	"fmt"
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
	b, err := raftlog.ParseBatch(data)
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

// retainLocked drops the index records of every entry below index below
// and moves each queue's minimum offset to its first remaining message (to
// its end when none remains).
func (f *FSM) retainLocked(below uint64) {
	if below <= f.logFloor {
		return
	}
	f.logFloor = below
	for _, t := range f.topics {
		for i, q := range t.queues {
			floor, err := q.ix.DropBelowIndex(below)
			if err != nil {
				// Files left behind cost disk, not correctness: the
				// minimum below moves all the same.
				f.log.Warn("retention: dropping queue index files failed", "topic", t.name, "queue", i, "error", err)
			}
			q.min = max(q.min, min(floor, q.next))
		}
	}
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
