package broker

import (
	"context"
	"fmt"

	"github.com/raftmq/raftmq/store"
)

// SearchOffsets returns, for each queue of topic (or only queues), the
// first offset whose message was stored at or after ts (unix ms), or the
// queue's end when none was: RocketMQ's searchOffset. It bisects each queue
// with single-message reads of this node's log (a queue's offsets grow with
// store time), so it costs about log2(messages) reads per queue.
func (b *Broker) SearchOffsets(ctx context.Context, topic string, ts int64, queues []int32) ([]store.OffsetEntry, error) {
	ti, err := b.fsm.Topic(topic)
	if err != nil {
		return nil, b.replicaErr(err)
	}
	qs, err := pickQueues(ti, queues)
	if err != nil {
		return nil, err
	}
	out := make([]store.OffsetEntry, 0, len(qs))
	for _, q := range qs {
		rng := ti.Queues[q]
		lo, hi := rng.Min, rng.Max
		for lo < hi {
			mid := lo + (hi-lo)/2
			res, err := b.Pull(ctx, PullRequest{Topic: topic, Queue: q, Offset: mid, MaxMessages: 1})
			if err != nil {
				return nil, fmt.Errorf("search queue %d by time: read offset %d: %w", q, mid, err)
			}
			if res.Status != PullFound || len(res.Messages) == 0 {
				return nil, fmt.Errorf("%w: search queue %d by time: offset %d is not readable on node %s", ErrUnavailable, q, mid, b.cfg.NodeID)
			}
			if res.Messages[0].Timestamp < ts {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		out = append(out, store.OffsetEntry{Topic: topic, Queue: q, Offset: lo})
	}
	return out, nil
}

// pickQueues is queues checked against ti, or every queue of ti when none
// are named.
func pickQueues(ti store.TopicInfo, queues []int32) ([]int32, error) {
	if len(queues) == 0 {
		all := make([]int32, len(ti.Queues))
		for i := range all {
			all[i] = int32(i)
		}
		return all, nil
	}
	for _, q := range queues {
		if q < 0 || int(q) >= len(ti.Queues) {
			return nil, invalid("queue %d: topic %q has queues 0..%d", q, ti.Name, len(ti.Queues)-1)
		}
	}
	return queues, nil
}
