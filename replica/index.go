package replica

import (
	"fmt"
	"sort"

	"github.com/raftmq/raftmq/raftlog"
)

// record is one index record: the messages of one queue inside one Raft
// entry. skip lists the request numbers of the entry that were not appended
// (duplicates, errors); it is nil in the common case, and a pointer so that
// a record takes 32 bytes, not 48 (the index grows by one record per entry
// and queue: TestRecordSize).
type record struct {
	base  uint64
	index uint64
	count uint32
	skip  *[]uint32
}

func (r *record) skipped() []uint32 {
	if r.skip == nil {
		return nil
	}
	return *r.skip
}

func skipPtr(s []uint32) *[]uint32 {
	if len(s) == 0 {
		return nil
	}
	return &s
}

type queue struct {
	records []record
	next    uint64 // offset of the next message
	min     uint64 // lowest retained offset
}

type topic struct {
	name   string
	queues []*queue
	perm   uint32 // PermRead | PermWrite bits
}

// applyBatchLocked assigns offsets to every request of the entry and records
// one index record per queue touched.
func (f *fsm) applyBatchLocked(index uint64, data []byte) interface{} {
	b, err := raftlog.ParseBatch(data)
	if err != nil {
		return f.markDamagedLocked(index, err)
	}
	results := make([]*ProduceResult, 0, b.Requests())
	type qkey struct {
		t *topic
		q uint32
	}
	recs := map[qkey]*record{}
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
				// were staged: they left their schedule queue, stored nowhere.
				f.log.Warn("delayed messages dropped at delivery", "index", index, "topic", rv.Topic, "messages", rv.Count, "error", res.Err)
			}
			skipped = append(skipped, uint32(i))
			return true
		}
		rv.Messages(func(_ int, m *raftlog.MessageView) bool {
			k := qkey{t, m.Queue}
			r := recs[k]
			if r == nil {
				q := t.queues[m.Queue]
				r = &record{base: q.next, index: index}
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
				res.Bases = append(res.Bases, QueueBase{Queue: m.Queue, Base: r.base + uint64(r.count)})
			}
			res.Bases[bi].Count++
			r.count++
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
		r.skip = skipPtr(skipped)
		q := k.t.queues[k.q]
		q.records = append(q.records, *r)
		q.next += uint64(r.count)
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

// retainLocked drops the index records of every entry below index below and
// moves each queue's minimum offset to its first remaining message (to its
// end when none remains).
func (f *fsm) retainLocked(below uint64) {
	if below <= f.logFloor {
		return
	}
	f.logFloor = below
	for _, t := range f.topics {
		for _, q := range t.queues {
			i := sort.Search(len(q.records), func(i int) bool { return q.records[i].index >= below })
			if i == 0 {
				continue
			}
			// A copy, not a reslice: the dropped records' memory is freed.
			// (Snapshots share the old array, which nobody writes again.)
			q.records = append([]record(nil), q.records[i:]...)
			if len(q.records) > 0 {
				q.min = max(q.min, q.records[0].base)
			} else {
				q.min = q.next
			}
		}
	}
}

// LogFloor is the log index below which retention has dropped every message
// (0: nothing dropped). A node may delete its log below it once a snapshot
// covers it.
func (f *fsm) LogFloor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.logFloor
}

// QueueRange is the retained range of a queue: [Min, Max).
type QueueRange struct {
	Min, Max uint64
}

// Locate returns up to limit locations covering offsets from offset on, and
// the queue's range as this node has applied it.
func (f *fsm) Locate(topicName string, q int32, offset uint64, limit int) ([]Location, QueueRange, error) {
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
	rng := QueueRange{Min: qu.min, Max: qu.next}
	if offset < qu.min || offset >= qu.next {
		return nil, rng, nil
	}
	recs := qu.records
	i := sort.Search(len(recs), func(i int) bool { return recs[i].base+uint64(recs[i].count) > offset })
	var out []Location
	for ; i < len(recs) && len(out) < limit; i++ {
		r := recs[i]
		out = append(out, Location{Base: r.base, LogIndex: r.index, Count: r.count, Skip: r.skipped()})
	}
	return out, rng, nil
}
