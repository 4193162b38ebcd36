package broker

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/replica"
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
func (b *Broker) LookupStaged(id string) (StagedLookup, bool, error) {
	if b.sched == nil {
		return StagedLookup{}, false, nil
	}
	index, ordinal, err := parseID(id)
	if err != nil {
		return StagedLookup{}, false, err
	}
	m, err := b.messageAt(index, ordinal)
	if err != nil {
		return StagedLookup{}, false, err
	}
	if m.Topic != api.ScheduleTopic {
		return StagedLookup{}, false, nil
	}
	out := StagedLookup{DeliverAt: b.deliverTime(index, &m)}
	// Follow the message through its schedule queues (a timed message is
	// staged again at each cascade level) to its delivered copy.
	for hop := 0; hop <= replica.ScheduleQueues; hop++ {
		idx, ord, left, ok := b.sched.StagedCopy(uint32(m.Queue), m.Offset)
		if !left {
			out.Pending = true
			out.Message = m
			out.Message.ID = id
			out.Message.Topic = m.Properties[api.PropRealTopic]
			q, _ := strconv.Atoi(m.Properties[api.PropRealQueue])
			out.Message.Queue, out.Message.Offset = int32(q), 0
			return out, true, nil
		}
		if !ok {
			return StagedLookup{}, true, fmt.Errorf("%w: delayed message %s was delivered, and the record of its delivery was deleted by retention", ErrNotFound, id)
		}
		if m, err = b.messageAt(idx, ord); err != nil {
			return StagedLookup{}, true, fmt.Errorf("delayed message %s: its delivered copy: %w", id, err)
		}
		if m.Topic != api.ScheduleTopic {
			out.Message = m
			return out, true, nil
		}
	}
	return StagedLookup{}, true, fmt.Errorf("delayed message %s: more stages than schedule queues", id)
}

// deliverTime is when the staged message m (of entry index) is due.
func (b *Broker) deliverTime(index uint64, m *Message) int64 {
	if v, err := strconv.ParseInt(m.Properties[api.PropTimerDeliverMS], 10, 64); err == nil {
		return v
	}
	n, _ := strconv.Atoi(m.Properties[api.PropDelay])
	d, err := api.LevelDelay(n)
	if err != nil {
		return 0
	}
	t, err := b.rlog.AppendedAt(index)
	if err != nil || t.IsZero() {
		return 0
	}
	return t.Add(d).UnixMilli()
}

// parseID splits a message id (raftlog.MessageID) into log index and
// ordinal.
func parseID(id string) (uint64, uint32, error) {
	index, err := raftlog.MessageIndex(id)
	if err != nil || index == 0 {
		return 0, 0, invalid("message id %q: want 24 hex digits (16 of log index, 8 of ordinal)", id)
	}
	o, err := strconv.ParseUint(id[16:], 16, 32)
	if err != nil {
		return 0, 0, invalid("message id %q: the last 8 characters are not an ordinal in hex", id)
	}
	return index, uint32(o), nil
}

// messageAt reads message ordinal of log entry index with its topic, queue
// and queue offset (from the entry's index record).
func (b *Broker) messageAt(index uint64, ordinal uint32) (Message, error) {
	id := raftlog.MessageID(index, ordinal)
	if index > b.fsm.Applied() {
		return Message{}, fmt.Errorf("%w: message %s: log entry %d is past what node %s has applied", ErrNotFound, id, index, b.cfg.NodeID)
	}
	data, err := b.rlog.Read(index)
	if err != nil {
		if errors.Is(err, raftlog.ErrBelowFloor) {
			return Message{}, fmt.Errorf("%w: message %s: node %s no longer holds log entry %d", ErrNotFound, id, b.cfg.NodeID, index)
		}
		return Message{}, fmt.Errorf("message %s: read log entry %d: %w", id, index, err)
	}
	noSuch := fmt.Errorf("%w: no stored message has id %s", ErrNotFound, id)
	if len(data) == 0 || raftlog.CommandType(data[0]) != raftlog.CmdBatch {
		return Message{}, noSuch
	}
	batch, err := raftlog.ParseReadBatch(data)
	if err != nil {
		return Message{}, fmt.Errorf("message %s: %w", id, err)
	}
	type qk struct {
		topic string
		queue uint32
	}
	before := map[qk]uint64{} // stored messages of each queue before the one sought
	var found bool
	var req int
	var out Message
	var next uint32
	err = batch.Each(func(i int, rv *raftlog.RequestView) bool {
		first := next
		next += uint32(rv.Count)
		rv.Messages(func(j int, mv *raftlog.MessageView) bool {
			if first+uint32(j) == ordinal {
				found, req = true, i
				out = Message{Topic: rv.Topic, Queue: int32(mv.Queue), ID: id, Key: string(mv.Key), Tag: string(mv.Tag),
					Properties: mv.Properties(), Body: mv.Body, Timestamp: mv.Timestamp}
				return false
			}
			before[qk{rv.Topic, mv.Queue}]++
			return true
		})
		return !found
	})
	if err != nil {
		return Message{}, fmt.Errorf("message %s: %w", id, err)
	}
	if !found {
		return Message{}, noSuch
	}
	loc, ok := b.sched.EntryRecord(out.Topic, uint32(out.Queue), index)
	if !ok || isSkipped(loc.Skip, req) {
		return Message{}, noSuch
	}
	// The requests the state machine skipped stored nothing: recount
	// without them.
	var stored uint64
	if len(loc.Skip) == 0 {
		stored = before[qk{out.Topic, uint32(out.Queue)}]
	} else {
		var n uint32
		_ = batch.Each(func(i int, rv *raftlog.RequestView) bool {
			firstOrd := n
			n += uint32(rv.Count)
			if i > req {
				return false
			}
			if isSkipped(loc.Skip, i) || rv.Topic != out.Topic {
				return true
			}
			rv.Messages(func(j int, mv *raftlog.MessageView) bool {
				if firstOrd+uint32(j) >= ordinal {
					return false
				}
				if mv.Queue == uint32(out.Queue) {
					stored++
				}
				return true
			})
			return true
		})
	}
	out.Offset = loc.Base + stored
	return out, nil
}

func isSkipped(skip []uint32, req int) bool {
	for _, s := range skip {
		if s == uint32(req) {
			return true
		}
	}
	return false
}
