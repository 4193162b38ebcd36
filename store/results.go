package store

import (
	"fmt"

	"github.com/raftmq/raftmq/raftlog"
)

// QueueBase is the offset given to the first message of a request in one
// queue, and how many of the request's messages that queue got (0 when
// unknown: a result restored from a format-1 snapshot).
type QueueBase struct {
	Queue uint32
	Count uint32
	Base  uint64
}

// ProduceResult is what the FSM answers for one request of a batch.
type ProduceResult struct {
	Err       error
	Duplicate bool
	// legacy marks a result restored from a format-1 snapshot, which holds
	// neither the digest nor the counts. (Next to Duplicate: the dedupe
	// table holds up to DedupeWindow results per producer, and here it
	// costs no padding.)
	legacy   bool
	LogIndex uint64
	Ordinal  uint32 // ordinal of the request's first message in its entry
	Count    uint32 // messages of the request
	Digest   uint64 // raftlog.RequestView.Digest of the request (0 without a producer id)
	Bases    []QueueBase
}

// Ack is the acknowledgement of one message: its queue and offset, and
// the entry and ordinal that name it.
type Ack struct {
	Queue   uint32
	Ordinal uint32 // in the entry at Index
	Offset  uint64
	Index   uint64 // log index of the message's entry
}

// ID is the message's id (raftlog.MessageID).
func (a Ack) ID() string { return raftlog.MessageID(a.Index, a.Ordinal) }

// Acks turns a result into one ack per message, given each message's queue in
// request order. It refuses, rather than naming an offset that holds another
// message, when the queues do not match the request the result is for: a
// queue the result does not know, more messages for a queue than the request
// put there, or another message count.
func (r *ProduceResult) Acks(queues []uint32) ([]Ack, error) {
	if !r.legacy && len(queues) != int(r.Count) {
		return nil, fmt.Errorf("%w: %d messages, the appended request had %d", ErrMismatchedRetry, len(queues), r.Count)
	}
	acks := make([]Ack, len(queues))
	next := make(map[uint32]int, len(r.Bases)) // queue -> index in left and off
	left := make([]uint32, len(r.Bases))
	off := make([]uint64, len(r.Bases))
	for i, b := range r.Bases {
		next[b.Queue] = i
		left[i], off[i] = b.Count, b.Base
	}
	for i, q := range queues {
		bi, ok := next[q]
		if !ok {
			return nil, fmt.Errorf("%w: message %d is for queue %d, the appended request used queues %v", ErrMismatchedRetry, i, q, r.Bases)
		}
		if !r.legacy {
			if left[bi] == 0 {
				return nil, fmt.Errorf("%w: message %d is one more for queue %d than the %d the appended request put there", ErrMismatchedRetry, i, q, r.Bases[bi].Count)
			}
			left[bi]--
		}
		acks[i] = Ack{Queue: q, Offset: off[bi], Index: r.LogIndex, Ordinal: r.Ordinal + uint32(i)}
		off[bi]++
	}
	return acks, nil
}
