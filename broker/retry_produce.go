package broker

import (
	"context"
	"strings"

	"github.com/raftmq/raftmq/broker/retry"
	"github.com/raftmq/raftmq/mq"
)

// A client may store a retry itself by producing to %RETRY%<group>; the
// broker then applies the dead-letter rule SendBack applies (package retry).

// deadLetterProduce moves a produce request to the group's dead-letter topic
// when it is a request to a retry topic whose messages are all past their
// limit. A request that mixes messages past and within the limit is refused:
// the two halves go to different topics, and one request is one topic.
func (b *Broker) deadLetterProduce(ctx context.Context, req *ProduceRequest) error {
	if !mq.IsRetryTopic(req.Topic) || strings.HasPrefix(req.ProducerID, "%") {
		// Producer ids that start with % are the broker's own (SendBack's
		// copies, the delay scheduler's deliveries): they decided already.
		return nil
	}
	group := req.Topic[len(mq.RetryTopic("")):]
	past := 0
	for i := range req.Messages {
		if b.retry.PastLimit(group, req.Messages[i].Properties) {
			past++
		}
	}
	switch {
	case past == 0:
		return nil
	case past < len(req.Messages):
		return invalid("produce to %s: %d of %d messages are past their max reconsume times and go to %s; send them in requests of their own",
			req.Topic, past, len(req.Messages), mq.DeadLetterTopic(group))
	}
	dlq := mq.DeadLetterTopic(group)
	if err := b.ensureSystemTopic(ctx, dlq); err != nil {
		return err
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		props := retry.DeadLetter(m.Properties, b.retry.Limit(group, m.Properties))
		m.Properties, m.HasQueue = props, false
		// ValidateProduce already took the DELAY the client sent along
		// (3 + count) into the typed fields: a dead letter waits for
		// nothing (RocketMQ's SendMessageProcessor sets its level to 0).
		m.DelayLevel, m.DeliverAt = 0, 0
	}
	b.log.Debug("produce to a retry topic dead-lettered", "topic", req.Topic, "messages", len(req.Messages))
	req.Topic = dlq
	return nil
}
