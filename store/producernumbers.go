package store

import (
	"context"
	"fmt"
)

// Producer numbers. A producer may ask its group for a number n and send
// as producer id "#<n>" (n in decimal), which batch version 3 stores in
// two or three bytes instead of the id's characters. The group hands the numbers
// out in apply order from a replicated counter, kept in the snapshot, so no
// two producers of a group are given the same one. Nothing else is tied to
// a number: "#<n>" is a producer id like any other, deduplicated and
// stored as such.

// opNumberProducer hands out the next producer number.
const opNumberProducer = "number_producer"

// EncodeNumberProducer encodes a command that hands out the group's next
// producer number: the state machine answers it (a uint64).
func EncodeNumberProducer() []byte { return encodeMeta(&metaCmd{Op: opNumberProducer}) }

func (f *FSM) applyNumberProducerLocked() interface{} {
	n := f.producerNumbers
	f.producerNumbers++
	return n
}

// NumberProducer replicates the handing out of a producer number and
// returns it.
func (s *Store) NumberProducer(ctx context.Context) (uint64, error) {
	resp, err := s.applyMetaAnswer(ctx, EncodeNumberProducer())
	if err != nil {
		return 0, fmt.Errorf("number a producer: %w", err)
	}
	n, ok := resp.(uint64)
	if !ok {
		return 0, fmt.Errorf("number a producer: internal: the state machine answered %T", resp)
	}
	return n, nil
}
