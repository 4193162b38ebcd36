package entry

import (
	"fmt"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Message is a stored message as a consumer sees it.
type Message struct {
	Topic      string
	Queue      int32
	Offset     uint64
	ID         string
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
	Timestamp  int64
}

// Stored is one stored message of a queue as Read finds it.
type Stored struct {
	Offset  uint64 // its queue offset
	Ordinal uint32 // its ordinal in the entry (raftlog.MessageID)
	Request int    // the number of its request in the entry
	// View is reused between calls; its Body aliases the entry.
	View *raftlog.MessageView
}

// Read walks the stored messages of queue q of topic in the log entry e,
// in order, as loc (the entry's index record of that queue) describes them:
// requests loc.Skip lists (refused, or duplicates) stored nothing and are
// passed over; every other message of the queue has the next offset from
// loc.Base. fn returning false stops the walk. A walk that reaches the end
// checks that the entry holds the loc.Count messages the index says.
func Read(e raftlog.Entry, topic string, q int32, loc store.Location, fn func(Stored) bool) error {
	batch, err := raftlog.ParseReadBatch(e.Data, e.At)
	if err != nil {
		return err
	}
	skip := 0
	offset := loc.Base
	var ordinal, first uint32
	var req int
	stopped := false
	err = batch.Walk(func(i int, h *raftlog.RequestHeader) bool {
		first, req = ordinal, i
		ordinal += uint32(h.Count)
		for skip < len(loc.Skip) && loc.Skip[skip] < uint32(i) {
			skip++
		}
		if skip < len(loc.Skip) && loc.Skip[skip] == uint32(i) {
			skip++
			return false
		}
		return h.Topic == topic
	}, func(j int, m *raftlog.MessageView) bool {
		if m.Queue != uint32(q) {
			return true
		}
		s := Stored{Offset: offset, Ordinal: first + uint32(j), Request: req, View: m}
		offset++
		stopped = !fn(s)
		return !stopped
	})
	if err == nil && !stopped && offset != loc.Base+uint64(loc.Count) {
		err = fmt.Errorf("entry %d holds %d messages of queue %d from offset %d, the index says %d", loc.LogIndex, offset-loc.Base, q, loc.Base, loc.Count)
	}
	return err
}

// Each walks every message of the log entry e in order, with the number
// of its request, its topic and its ordinal in the entry (raftlog.MessageID);
// the view is reused between calls and its Body aliases e.Data. fn returning
// false stops the walk. An entry that holds no batch has no messages.
func Each(e raftlog.Entry, fn func(request int, topic string, ordinal uint32, v *raftlog.MessageView) bool) error {
	if len(e.Data) == 0 || raftlog.CommandType(e.Data[0]) != raftlog.CmdBatch {
		return nil
	}
	batch, err := raftlog.ParseReadBatch(e.Data, e.At)
	if err != nil {
		return err
	}
	var next, first uint32 // ordinals of the requests' first messages
	var req int
	var topic string
	return batch.Walk(func(i int, h *raftlog.RequestHeader) bool {
		first, req, topic = next, i, h.Topic
		next += uint32(h.Count)
		return true
	}, func(j int, v *raftlog.MessageView) bool {
		return fn(req, topic, first+uint32(j), v)
	})
}

// At returns message ordinal of the log entry e at index, with its
// topic, queue and id but no offset (OffsetOf gives that), and the number
// of its request; ok is false when the entry holds no such message. The
// message's Body aliases e.Data.
func At(index uint64, e raftlog.Entry, ordinal uint32) (m Message, request int, ok bool, err error) {
	err = Each(e, func(i int, topic string, o uint32, v *raftlog.MessageView) bool {
		if o < ordinal {
			return true
		}
		if o == ordinal {
			m, request, ok = Decode(topic, index, ordinal, v), i, true
		}
		return false
	})
	if err != nil {
		return Message{}, 0, false, err
	}
	return m, request, ok, nil
}

// OffsetOf is the queue offset of message ordinal, which loc (the index
// record of its topic and queue in the entry) describes; ok is false when
// its request stored nothing.
func OffsetOf(e raftlog.Entry, topic string, q int32, loc store.Location, ordinal uint32) (offset uint64, ok bool, err error) {
	err = Read(e, topic, q, loc, func(s Stored) bool {
		if s.Ordinal < ordinal {
			return true
		}
		offset, ok = s.Offset, s.Ordinal == ordinal
		return false
	})
	return offset, ok, err
}

// Decode is message v of the entry at index: its properties decoded, its
// Body aliasing the entry, no offset.
func Decode(topic string, index uint64, ordinal uint32, v *raftlog.MessageView) Message {
	return Message{Topic: topic, Queue: int32(v.Queue), ID: raftlog.MessageID(index, ordinal), Key: string(v.Key), Tag: string(v.Tag),
		Properties: v.Properties(), Body: v.Body, Timestamp: v.Timestamp}
}
