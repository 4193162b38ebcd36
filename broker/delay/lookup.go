package delay

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/broker/brokererr"
	"github.com/raftmq/raftmq/broker/entry"
	"github.com/raftmq/raftmq/mq"
)

// Lookup is what a lookup by id of a delayed message finds.
type Lookup struct {
	// Pending: the message waits. Message is then as it will be delivered:
	// its topic and queue, offset 0, the staged id and staging properties.
	Pending   bool
	DeliverAt int64 // unix ms
	// Message is, once delivered, the delivered copy with its topic, queue
	// and offset (its STAGED_ID property is the id looked up).
	Message entry.Message
}

// Staged looks up message m, read by the id its produce ack named out of
// log entry index, when that is a delayed message: ok is false when m is a
// message of another topic (an ordinary lookup answers it). It answers
// from this node's applied state; the leader's is the freshest.
//
// No record of deliveries is kept: a message is pending while its time is
// ahead (a delivery is never early); after it, its copy is searched in its
// topic's queue from the entries appended shortly before its time on
// (lookupWindow), by the copy's STAGED_ID, and it is pending while not
// found there.
func (s *Scheduler) Staged(id string, index uint64, m entry.Message) (Lookup, bool, error) {
	if s.cursors == nil || m.Topic != mq.ScheduleTopic {
		return Lookup{}, false, nil
	}
	out := Lookup{DeliverAt: s.deliverTime(index, &m)}
	topic := m.Properties[mq.PropRealTopic]
	q, _ := strconv.Atoi(m.Properties[mq.PropRealQueue])
	if n := s.fsm.QueueCount(topic); n > 0 {
		q %= n
	}
	due := time.UnixMilli(out.DeliverAt)
	if at, err := s.rlog.AppendedAt(index); err == nil && due.Before(at) {
		due = at // a time already past when it was sent: due at once
	}
	if time.Now().Before(due) {
		return pendingLookup(out, id, m, topic, q), true, nil
	}
	cp, found, err := s.findDelivered(topic, int32(q), id, due)
	if err != nil {
		return Lookup{}, true, fmt.Errorf("delayed message %s: %w", id, err)
	}
	if !found {
		return pendingLookup(out, id, m, topic, q), true, nil
	}
	out.Message = cp
	return out, true, nil
}

func pendingLookup(out Lookup, id string, m entry.Message, topic string, q int) Lookup {
	out.Pending = true
	out.Message = m
	out.Message.ID, out.Message.Topic, out.Message.Queue, out.Message.Offset = id, topic, int32(q), 0
	return out
}

// Bounds of the search of a delivered copy: it starts at the first entry of
// the queue appended lookupWindow before the message was due (the leaders'
// clocks may differ by that much) and reads at most lookupScan messages.
const (
	lookupWindow = 10 * time.Second
	lookupScan   = 100_000
)

// findDelivered searches queue q of topic for the copy of staged message id
// that was due at due.
func (s *Scheduler) findDelivered(topic string, q int32, id string, due time.Time) (entry.Message, bool, error) {
	ti, err := s.fsm.Topic(topic)
	if err != nil || int(q) >= len(ti.Queues) || q < 0 {
		return entry.Message{}, false, nil // its topic is gone: never delivered there
	}
	rng := ti.Queues[q]
	from := due.Add(-lookupWindow)
	// The first offset whose entry was appended at or after from (append
	// times grow with the log, up to the leaders' clocks).
	lo, hi := rng.Min, rng.Max
	for lo < hi {
		mid := lo + (hi-lo)/2
		locs, _, err := s.fsm.Locate(topic, q, mid, 1)
		if err != nil || len(locs) == 0 {
			break
		}
		at, err := s.rlog.AppendedAt(locs[0].LogIndex)
		if err != nil {
			lo = mid + 1 // not held here (retention): later
			continue
		}
		if at.Before(from) {
			lo = locs[0].Base + uint64(locs[0].Count)
		} else {
			hi = mid
		}
	}
	next := lo
	for scanned := 0; next < rng.Max && scanned < lookupScan; {
		locs, _, err := s.fsm.Locate(topic, q, next, 64)
		if err != nil || len(locs) == 0 {
			return entry.Message{}, false, err
		}
		msgs, after, err := s.hooks.Read(topic, q, next, locs, 4096, 16<<20)
		var ns *NotServedError
		if errors.As(err, &ns) {
			return entry.Message{}, false, fmt.Errorf("%w: %s", brokererr.ErrNotFound, ns.Why)
		}
		if err != nil {
			return entry.Message{}, false, err
		}
		if len(msgs) == 0 {
			return entry.Message{}, false, fmt.Errorf("%w: %s", brokererr.ErrNotFound, "")
		}
		for _, m := range msgs {
			if m.Properties[mq.PropStagedID] == id {
				return m, true, nil
			}
		}
		scanned += len(msgs)
		next = after
	}
	return entry.Message{}, false, nil
}

// deliverTime is when the staged message m (of entry index) is due.
func (s *Scheduler) deliverTime(index uint64, m *entry.Message) int64 {
	if v, err := strconv.ParseInt(m.Properties[mq.PropTimerDeliverMS], 10, 64); err == nil {
		return v
	}
	n, _ := strconv.Atoi(m.Properties[mq.PropDelay])
	d, err := mq.LevelDelay(n)
	if err != nil {
		return 0
	}
	t, err := s.rlog.AppendedAt(index)
	if err != nil || t.IsZero() {
		return 0
	}
	return t.Add(d).UnixMilli()
}
