package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/broker/lookup"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/mq"
)

// Lookup by id reads the one entry an id names (package lookup).

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
	return lookup.ParseMessageID(id)
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
var errNotHere = lookup.ErrNotHere

// lookupLeader reads a message by id on the leader (SendBack,
// ResendDeadLetter and transaction decisions, which run there): a message
// it does not hold is ErrNotFound, and when it no longer holds the entry
// it hands leadership to a node that does.
func (b *Broker) lookupLeader(id string) (Message, error) {
	index, ordinal, err := ParseMessageID(id)
	if err != nil {
		return Message{}, err
	}
	m, err := b.readMessage(id, index, ordinal)
	if errors.Is(err, errNotHere) {
		if index <= b.fsm.Applied() {
			b.handOverFor(index)
		}
		return Message{}, b.notFound(id, index, err)
	}
	return m, err
}

// readMessage reads message ordinal of log entry index from this node's log
// and finds its queue offset in the index (lookup.Reader.Message).
func (b *Broker) readMessage(id string, index uint64, ordinal uint32) (Message, error) {
	return b.ids.Message(id, index, ordinal)
}
