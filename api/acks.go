package api

import (
	"fmt"

	"github.com/raftmq/raftmq/mq"
)

// AcksFor is the n acks of the response to a request of n messages,
// packed or not; it fails when the response does not hold n.
func (r *ProduceResponse) AcksFor(n int) ([]*Ack, error) {
	if r.PackedAcks != nil {
		acks, err := r.PackedAcks.Unpack(n)
		if err != nil {
			return nil, fmt.Errorf("broker answered %w", err)
		}
		return acks, nil
	}
	if len(r.Acks) != n {
		return nil, fmt.Errorf("broker answered %d acks for %d messages", len(r.Acks), n)
	}
	return r.Acks, nil
}

// Unpack expands the packed acks of a request of n messages into one Ack
// each. It allocates three times, however many messages there are: the acks,
// the slice of pointers, and one string the ids are slices of. It fails when
// the acks are not for n messages.
func (p *PackedAcks) Unpack(n int) ([]*Ack, error) {
	if len(p.Queues) != n || len(p.OffsetDeltas) != n || (len(p.DeliverAtMs) != 0 && len(p.DeliverAtMs) != n) {
		return nil, fmt.Errorf("packed acks for %d queues, %d offsets and %d delivery times: the request had %d messages",
			len(p.Queues), len(p.OffsetDeltas), len(p.DeliverAtMs), n)
	}
	buf := make([]byte, 0, n*mq.MessageIDLen)
	for i := range n {
		buf = mq.AppendMessageID(buf, p.EntryIndex, p.FirstOrdinal+uint32(i))
	}
	ids := string(buf)
	acks := make([]Ack, n)
	out := make([]*Ack, n)
	var off uint64
	for i := range acks {
		off += uint64(p.OffsetDeltas[i])
		a := &acks[i]
		a.Queue, a.Offset, a.Id = int32(p.Queues[i]), off, ids[i*mq.MessageIDLen:(i+1)*mq.MessageIDLen]
		if len(p.DeliverAtMs) != 0 {
			a.DeliverAtMs = p.DeliverAtMs[i]
		}
		out[i] = a
	}
	return out, nil
}
