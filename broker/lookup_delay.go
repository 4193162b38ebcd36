package broker

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/broker/route"
	"github.com/raftmq/raftmq/mq"
)

// StagedLookup is what a lookup by id of a delayed message finds.
type StagedLookup struct {
	// Pending: the message waits. Message is then as it will be delivered:
	// its topic and queue, offset 0, the staged id and staging properties.
	Pending   bool
	DeliverAt int64 // unix ms
	// Message is, once delivered, the delivered copy with its topic, queue
	// and offset (its STAGED_ID property is the id looked up).
	Message Message
}

// LookupStaged looks up a message by the id its produce ack named, when
// that is a delayed message: ok is false when id names a message of another
// topic (an ordinary lookup answers it). It answers from this node's
// applied state; the leader's is the freshest.
//
// No record of deliveries is kept: a message is pending while its time is
// ahead (a delivery is never early); after it, its copy is searched in its
// topic's queue from the entries appended shortly before its time on
// (lookupWindow), by the copy's STAGED_ID, and it is pending while not
// found there.
func (b *Broker) LookupStaged(id string) (StagedLookup, bool, error) {
	if b.sched == nil {
		return StagedLookup{}, false, nil
	}
	index, ordinal, err := ParseMessageID(id)
	if err != nil {
		return StagedLookup{}, false, err
	}
	m, err := b.readMessage(id, index, ordinal)
	if errors.Is(err, errNotHere) {
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return StagedLookup{}, false, err
	}
	return b.staged(id, index, m)
}

// staged answers LookupStaged for message m, read by id from log entry
// index.
func (b *Broker) staged(id string, index uint64, m Message) (StagedLookup, bool, error) {
	if b.sched == nil || m.Topic != mq.ScheduleTopic {
		return StagedLookup{}, false, nil
	}
	out := StagedLookup{DeliverAt: b.deliverTime(index, &m)}
	topic := m.Properties[mq.PropRealTopic]
	q, _ := strconv.Atoi(m.Properties[mq.PropRealQueue])
	if n := b.fsm.QueueCount(topic); n > 0 {
		q %= n
	}
	due := time.UnixMilli(out.DeliverAt)
	if at, err := b.rlog.AppendedAt(index); err == nil && due.Before(at) {
		due = at // a time already past when it was sent: due at once
	}
	if time.Now().Before(due) {
		return b.pendingLookup(out, id, m, topic, q), true, nil
	}
	cp, found, err := b.findDelivered(topic, int32(q), id, due)
	if err != nil {
		return StagedLookup{}, true, fmt.Errorf("delayed message %s: %w", id, err)
	}
	if !found {
		return b.pendingLookup(out, id, m, topic, q), true, nil
	}
	out.Message = cp
	return out, true, nil
}

func (b *Broker) pendingLookup(out StagedLookup, id string, m Message, topic string, q int) StagedLookup {
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
func (b *Broker) findDelivered(topic string, q int32, id string, due time.Time) (Message, bool, error) {
	ti, err := b.fsm.Topic(topic)
	if err != nil || int(q) >= len(ti.Queues) || q < 0 {
		return Message{}, false, nil // its topic is gone: never delivered there
	}
	rng := ti.Queues[q]
	from := due.Add(-lookupWindow)
	// The first offset whose entry was appended at or after from (append
	// times grow with the log, up to the leaders' clocks).
	lo, hi := rng.Min, rng.Max
	for lo < hi {
		mid := lo + (hi-lo)/2
		locs, _, err := b.fsm.Locate(topic, q, mid, 1)
		if err != nil || len(locs) == 0 {
			break
		}
		at, err := b.rlog.AppendedAt(locs[0].LogIndex)
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
		locs, _, err := b.fsm.Locate(topic, q, next, 64)
		if err != nil || len(locs) == 0 {
			return Message{}, false, err
		}
		pr := PullRequest{Topic: topic, Queue: q, Offset: next, MaxMessages: 4096, MaxBytes: 16 << 20}
		res := PullResult{NextOffset: next}
		local, why, err := b.read(locs, &pr, &res)
		if err != nil {
			return Message{}, false, err
		}
		if local != route.LocalServed || len(res.Messages) == 0 {
			return Message{}, false, fmt.Errorf("%w: %s", ErrNotFound, why)
		}
		for _, m := range res.Messages {
			if m.Properties[mq.PropStagedID] == id {
				return m, true, nil
			}
		}
		scanned += len(res.Messages)
		next = res.NextOffset
	}
	return Message{}, false, nil
}

// deliverTime is when the staged message m (of entry index) is due.
func (b *Broker) deliverTime(index uint64, m *Message) int64 {
	if v, err := strconv.ParseInt(m.Properties[mq.PropTimerDeliverMS], 10, 64); err == nil {
		return v
	}
	n, _ := strconv.Atoi(m.Properties[mq.PropDelay])
	d, err := mq.LevelDelay(n)
	if err != nil {
		return 0
	}
	t, err := b.rlog.AppendedAt(index)
	if err != nil || t.IsZero() {
		return 0
	}
	return t.Add(d).UnixMilli()
}
