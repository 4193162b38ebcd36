package lookup

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/raftmq/raftmq/broker/brokererr"
	"github.com/raftmq/raftmq/broker/entry"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// A message id names the Raft entry that stored the message and the
// message's ordinal in that entry (raftlog.MessageID): 16 hex digits of log
// index, 8 of ordinal. Lookup reads that one entry and takes the queue
// offset from the FSM's index record of the entry, so it costs one log read
// and one binary search, with no index of ids.

// State is what lookups read of the applied state.
type State interface {
	Applied() uint64
	Changed() <-chan struct{}
	LogFloor() uint64
	QueueCount(topic string) int
	LocateEntry(topic string, q int32, index uint64) (store.Location, bool)
}

// Log is this node's Raft log as lookups read it.
type Log interface {
	Read(index uint64) (raftlog.Entry, error)
	// ReadUncached is Read without the read cache (the key index).
	ReadUncached(index uint64) (raftlog.Entry, error)
	FirstIndex() uint64
}

// ErrNotHere: this node has not applied the entry an id names, or no longer
// holds it; the leader may.
var ErrNotHere = errors.New("not held by this node")

// ErrDecided: the id names a transactional half message whose queue record
// is gone: the half queue drops the records of decided half messages, so
// it (and every half message of its entry) is decided.
var ErrDecided = errors.New("half message already decided")

// Reader reads messages by id out of one node's log.
type Reader struct {
	node string // this node's id, for errors
	fsm  State
	rlog Log
}

// NewReader returns the reader of node's log and state.
func NewReader(node string, fsm State, rlog Log) *Reader {
	return &Reader{node: node, fsm: fsm, rlog: rlog}
}

// ParseMessageID splits a message id into its log index and ordinal.
func ParseMessageID(id string) (index uint64, ordinal uint32, err error) {
	if len(id) != mq.MessageIDLen {
		return 0, 0, brokererr.Invalid("message id %q: want 24 hex digits (16 of log index, 8 of ordinal), got %d characters", id, len(id))
	}
	index, err = strconv.ParseUint(id[:16], 16, 64)
	if err != nil || index == 0 {
		return 0, 0, brokererr.Invalid("message id %q: the first 16 characters are not a log index in hex", id)
	}
	o, err := strconv.ParseUint(id[16:], 16, 32)
	if err != nil {
		return 0, 0, brokererr.Invalid("message id %q: the last 8 characters are not an ordinal in hex", id)
	}
	return index, uint32(o), nil
}

// Message reads message ordinal of log entry index from this node's log
// and finds its queue offset in the index. Errors: ErrNotHere (wrapped, with
// what this node lacks), brokererr.ErrNotFound (the entry holds no such stored
// message), or the log's error.
func (r *Reader) Message(id string, index uint64, ordinal uint32) (entry.Message, error) {
	if index > r.fsm.Applied() {
		return entry.Message{}, fmt.Errorf("message %s: log entry %d is past what node %s has applied (%d): %w", id, index, r.node, r.fsm.Applied(), ErrNotHere)
	}
	if floor := r.fsm.LogFloor(); index < floor {
		return entry.Message{}, fmt.Errorf("%w: message %s (log entry %d) was deleted by retention (the log starts at %d)", brokererr.ErrNotFound, id, index, floor)
	}
	e, err := r.rlog.Read(index)
	switch {
	case errors.Is(err, raftlog.ErrBelowFloor):
		return entry.Message{}, fmt.Errorf("message %s: node %s no longer holds log entry %d: %w", id, r.node, index, ErrNotHere)
	case errors.Is(err, raftlog.ErrCorrupt):
		return entry.Message{}, fmt.Errorf("message %s: log entry %d is damaged on node %s: %w", id, index, r.node, ErrNotHere)
	case err != nil:
		return entry.Message{}, fmt.Errorf("message %s: read log entry %d: %w", id, index, err)
	}
	noSuch := fmt.Errorf("%w: no message has id %s (log entry %d holds no stored message with ordinal %d)", brokererr.ErrNotFound, id, index, ordinal)
	out, _, found, err := entry.At(index, e, ordinal)
	if err != nil {
		return entry.Message{}, fmt.Errorf("message %s: log entry %d on node %s: %w", id, index, r.node, err)
	}
	if !found {
		return entry.Message{}, noSuch
	}
	if r.fsm.QueueCount(out.Topic) == 0 {
		return entry.Message{}, fmt.Errorf("%w: message %s was stored in topic %q, which no longer exists", brokererr.ErrNotFound, id, out.Topic)
	}
	loc, ok := r.fsm.LocateEntry(out.Topic, out.Queue, index)
	if !ok && out.Topic == mq.ScheduleTopic {
		// The schedule queues drop the records of delivered messages: a
		// staged message is then answered by its id alone (its offset
		// there means nothing to a user).
		return out, nil
	}
	if !ok && out.Topic == mq.TxnHalfTopic {
		return out, fmt.Errorf("%w: message %s: %w", brokererr.ErrNotFound, id, ErrDecided)
	}
	if !ok {
		return entry.Message{}, noSuch
	}
	// Its offset is its record's base plus the messages of its queue that
	// the requests before it stored in the same entry.
	off, stored, err := entry.OffsetOf(e, out.Topic, out.Queue, loc, ordinal)
	if err != nil {
		return entry.Message{}, fmt.Errorf("message %s: log entry %d on node %s: %w", id, index, r.node, err)
	}
	if !stored {
		// A request the state machine refused, or a retry it answered
		// with the first attempt's acks: no message was stored under
		// this id.
		return entry.Message{}, noSuch
	}
	out.Offset = off
	return out, nil
}
