package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/raftmq/raftmq/broker/entry"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
)

// A message id names the Raft entry that stored the message and the
// message's ordinal in that entry (raftlog.MessageID): 16 hex digits of log
// index, 8 of ordinal. Lookup reads that one entry and takes the queue
// offset from the FSM's index record of the entry, so it costs one log read
// and one binary search, with no index of ids.

// LookupResult is a message found by id and the node that read it.
type LookupResult struct {
	Message  Message
	ServedBy string
	// Pending: a delayed message not delivered yet (Message is as it will
	// be delivered, offset 0); DeliverAt is its delivery time (unix ms).
	Pending   bool
	DeliverAt int64
}

// ParseMessageID splits a message id into its log index and ordinal.
func ParseMessageID(id string) (index uint64, ordinal uint32, err error) {
	if len(id) != 24 {
		return 0, 0, invalid("message id %q: want 24 hex digits (16 of log index, 8 of ordinal), got %d characters", id, len(id))
	}
	index, err = strconv.ParseUint(id[:16], 16, 64)
	if err != nil || index == 0 {
		return 0, 0, invalid("message id %q: the first 16 characters are not a log index in hex", id)
	}
	o, err := strconv.ParseUint(id[16:], 16, 32)
	if err != nil {
		return 0, 0, invalid("message id %q: the last 8 characters are not an ordinal in hex", id)
	}
	return index, uint32(o), nil
}

// LookupMessage returns the message with the given id, with its topic,
// queue and offset. Any node answers when it has applied and still holds
// the entry; otherwise a follower answers a NotLeaderError (the protocol
// adapter forwards to the leader, as a pull falls back to the leader) and
// the leader answers ErrNotFound.
func (b *Broker) LookupMessage(ctx context.Context, id string) (LookupResult, error) {
	index, ordinal, err := ParseMessageID(id)
	if err != nil {
		return LookupResult{}, err
	}
	if b.closed.Load() {
		return LookupResult{}, ErrShutdown
	}
	isLeader := b.node.Role() == election.Leader
	if isLeader && !b.node.Ready() {
		if err := b.awaitLeader(ctx); err != nil {
			return LookupResult{}, err
		}
	}
	m, err := b.readMessage(id, index, ordinal)
	if err == nil {
		return b.lookedUp(id, index, m)
	}
	if errors.Is(err, errNotHere) && b.node.Role() != election.Leader {
		if lerr := b.awaitLeader(ctx); lerr != nil {
			return LookupResult{}, lerr // names the leader: the adapter forwards
		}
		// This node became the leader meanwhile: read again as the leader.
		if m, err = b.readMessage(id, index, ordinal); err == nil {
			return b.lookedUp(id, index, m)
		}
	}
	if errors.Is(err, errNotHere) {
		return LookupResult{}, b.notFound(id, index, err)
	}
	return LookupResult{}, err
}

// lookedUp is the answer for message m read by id: a staged (delayed)
// message is answered as the scheduler knows it, pending or delivered
// (delay.Scheduler.Staged).
func (b *Broker) lookedUp(id string, index uint64, m Message) (LookupResult, error) {
	if m.Topic == mq.ScheduleTopic {
		st, ok, err := b.delay.Staged(id, index, m)
		if err != nil {
			return LookupResult{}, err
		}
		if ok {
			return LookupResult{Message: st.Message, ServedBy: b.cfg.NodeID, Pending: st.Pending, DeliverAt: st.DeliverAt}, nil
		}
	}
	return LookupResult{Message: m, ServedBy: b.cfg.NodeID}, nil
}

// notFound is the leader's answer for an id whose entry it lacks (err
// wraps errNotHere).
func (b *Broker) notFound(id string, index uint64, err error) error {
	if applied := b.fsm.Applied(); index > applied {
		return fmt.Errorf("%w: no message has id %s: the group's log ends at entry %d", ErrNotFound, id, applied)
	}
	return fmt.Errorf("%w: %w", ErrNotFound, err)
}

// errNotHere: this node has not applied the entry an id names, or no longer
// holds it; the leader may.
var errNotHere = errors.New("not held by this node")

// lookupLeader reads a message by id on the leader (SendBack and
// ResendDeadLetter, which run there): a message it does not hold is
// ErrNotFound.
func (b *Broker) lookupLeader(id string) (Message, error) {
	index, ordinal, err := ParseMessageID(id)
	if err != nil {
		return Message{}, err
	}
	m, err := b.readMessage(id, index, ordinal)
	if errors.Is(err, errNotHere) {
		return Message{}, b.notFound(id, index, err)
	}
	return m, err
}

// readMessage reads message ordinal of log entry index from this node's log
// and finds its queue offset in the index. Errors: errNotHere (wrapped, with
// what this node lacks), ErrNotFound (the entry holds no such stored
// message), or the log's error.
func (b *Broker) readMessage(id string, index uint64, ordinal uint32) (Message, error) {
	if index > b.fsm.Applied() {
		return Message{}, fmt.Errorf("message %s: log entry %d is past what node %s has applied (%d): %w", id, index, b.cfg.NodeID, b.fsm.Applied(), errNotHere)
	}
	if floor := b.fsm.LogFloor(); index < floor {
		return Message{}, fmt.Errorf("%w: message %s (log entry %d) was deleted by retention (the log starts at %d)", ErrNotFound, id, index, floor)
	}
	data, err := b.rlog.Read(index)
	switch {
	case errors.Is(err, raftlog.ErrBelowFloor):
		return Message{}, fmt.Errorf("message %s: node %s no longer holds log entry %d: %w", id, b.cfg.NodeID, index, errNotHere)
	case errors.Is(err, raftlog.ErrCorrupt):
		return Message{}, fmt.Errorf("message %s: log entry %d is damaged on node %s: %w", id, index, b.cfg.NodeID, errNotHere)
	case err != nil:
		return Message{}, fmt.Errorf("message %s: read log entry %d: %w", id, index, err)
	}
	noSuch := fmt.Errorf("%w: no message has id %s (log entry %d holds no stored message with ordinal %d)", ErrNotFound, id, index, ordinal)
	out, _, found, err := entry.At(index, data, ordinal)
	if err != nil {
		return Message{}, fmt.Errorf("message %s: log entry %d on node %s: %w", id, index, b.cfg.NodeID, err)
	}
	if !found {
		return Message{}, noSuch
	}
	if b.fsm.QueueCount(out.Topic) == 0 {
		return Message{}, fmt.Errorf("%w: message %s was stored in topic %q, which no longer exists", ErrNotFound, id, out.Topic)
	}
	loc, ok := b.fsm.LocateEntry(out.Topic, out.Queue, index)
	if !ok && out.Topic == mq.ScheduleTopic {
		// The schedule queues drop the records of delivered messages: a
		// staged message is then answered by its id alone (its offset
		// there means nothing to a user).
		return out, nil
	}
	if !ok {
		return Message{}, noSuch
	}
	// Its offset is its record's base plus the messages of its queue that
	// the requests before it stored in the same entry.
	off, stored, err := entry.OffsetOf(data, out.Topic, out.Queue, loc, ordinal)
	if err != nil {
		return Message{}, fmt.Errorf("message %s: log entry %d on node %s: %w", id, index, b.cfg.NodeID, err)
	}
	if !stored {
		// A request the state machine refused, or a retry it answered
		// with the first attempt's acks: no message was stored under
		// this id.
		return Message{}, noSuch
	}
	out.Offset = off
	return out, nil
}
