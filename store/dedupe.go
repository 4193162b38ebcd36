package store

import (
	"container/list"
	"fmt"

	"github.com/raftmq/raftmq/raftlog"
)

// producer is the dedupe state of one producer id.
type producer struct {
	id      string
	results map[uint64]*ProduceResult
	ring    []uint64 // sequences in the order they were remembered
	head    int
	floor   uint64 // highest sequence forgotten; older ones are refused
	elem    *list.Element
}

// dedupeLocked looks a request up in the dedupe table. It returns the
// remembered result when the request is a retry of the one remembered under
// its (producer id, sequence): same digest and message count. Another
// request under a remembered (producer id, sequence) gets ErrSequenceReused.
// It sets *digest to the request's digest when the request has a producer id.
func (f *FSM) dedupeLocked(t *topic, rv *raftlog.RequestView, digest *uint64) (*ProduceResult, error) {
	id, seq := rv.ProducerID, rv.Seq
	if id == "" {
		return nil, nil
	}
	*digest = rv.Digest()
	p := f.producers[id]
	if p == nil {
		return nil, nil
	}
	if r, ok := p.results[seq]; ok {
		if r.legacy {
			if err := fitsLegacy(t, r, rv); err != nil {
				return nil, err
			}
			return r, nil
		}
		switch {
		case uint32(rv.Count) != r.Count:
			return nil, fmt.Errorf("%w: producer %q sequence %d held %d messages (entry %d), this request holds %d; nothing of it was stored",
				ErrSequenceReused, id, seq, r.Count, r.LogIndex, rv.Count)
		case *digest != r.Digest:
			return nil, fmt.Errorf("%w: producer %q sequence %d held other content (entry %d): topic, queues, keys, tags, properties or bodies differ (digest %016x, this request %016x); nothing of it was stored",
				ErrSequenceReused, id, seq, r.LogIndex, r.Digest, *digest)
		}
		return r, nil
	}
	if len(p.ring) == DedupeWindow && seq <= p.floor {
		return nil, fmt.Errorf("%w: producer %q sequence %d, window starts after %d", ErrStaleSequence, id, seq, p.floor)
	}
	return nil, nil
}

// fitsLegacy checks a request against a result restored from a format-1
// snapshot, which holds neither digest nor counts. The request is taken as
// a retry when each of its messages goes to a queue the remembered request
// used and, counted from the remembered base, stays within what that entry
// appended to the queue of this topic: every ack then names an offset the
// same entry wrote, never one of a later entry or one not yet written. The
// content itself cannot be compared. Refusing every request under such a
// sequence would be wrong the other way: a true retry of a request that was
// stored would be told, for good, that nothing was stored, and a producer
// that then sends it under a new sequence stores it twice. Results of this
// kind leave the table as the producer's window moves on (DedupeWindow
// later sequences); every node stores nothing for the request either way.
func fitsLegacy(t *topic, r *ProduceResult, rv *raftlog.RequestView) error {
	end := make(map[uint32]uint64, len(r.Bases)) // queue -> next offset of the request
	for _, b := range r.Bases {
		end[b.Queue] = b.Base
	}
	var err error
	rv.Messages(func(j int, m *raftlog.MessageView) bool {
		off, ok := end[m.Queue]
		if !ok {
			err = fmt.Errorf("%w: producer %q sequence %d used queues %v (entry %d), message %d of this request is for queue %d; nothing of it was stored",
				ErrSequenceReused, rv.ProducerID, rv.Seq, r.Bases, r.LogIndex, j, m.Queue)
			return false
		}
		end[m.Queue] = off + 1
		return true
	})
	if err != nil {
		return err
	}
	for _, b := range r.Bases {
		if !entryHolds(t, b.Queue, r.LogIndex, end[b.Queue]) {
			return fmt.Errorf("%w: producer %q sequence %d: entry %d holds fewer messages in queue %d of topic %q than this request has; nothing of it was stored",
				ErrSequenceReused, rv.ProducerID, rv.Seq, r.LogIndex, b.Queue, t.name)
		}
	}
	return nil
}

// entryHolds tells whether the record of entry index in queue q of t ends at
// or after offset end.
func entryHolds(t *topic, q uint32, index, end uint64) bool {
	if int(q) >= len(t.queues) {
		return false
	}
	r, ok, err := t.queues[q].ix.FindIndex(index)
	// A read error answers "no": the retry is refused, never given an ack
	// naming offsets the entry may not hold.
	return err == nil && ok && end <= r.End()
}

func (f *FSM) rememberLocked(id string, seq, index uint64, res *ProduceResult) {
	p := f.producers[id]
	if p == nil {
		if len(f.producers) >= MaxProducers {
			old := f.lru.Remove(f.lru.Front()).(*producer)
			delete(f.producers, old.id)
		}
		p = &producer{id: id, results: map[uint64]*ProduceResult{}}
		p.elem = f.lru.PushBack(p)
		f.producers[id] = p
	} else {
		f.lru.MoveToBack(p.elem)
	}
	stored := &ProduceResult{LogIndex: res.LogIndex, Ordinal: res.Ordinal, Count: res.Count, Digest: res.Digest, Bases: res.Bases}
	if len(p.ring) < DedupeWindow {
		p.ring = append(p.ring, seq)
	} else {
		old := p.ring[p.head]
		delete(p.results, old)
		p.floor = max(p.floor, old)
		p.ring[p.head] = seq
		p.head = (p.head + 1) % DedupeWindow
	}
	p.results[seq] = stored
}
