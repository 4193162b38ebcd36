package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/mq"
)

// A client may store a retry itself by producing to %RETRY%<group> (the
// RocketMQ Go client does when its send-back fails: sendMessageBackAsNormal,
// with RECONSUME_TIME already raised and DELAY = 3 + the old count). The
// broker then applies the dead-letter rule SendBack applies: a message whose
// RECONSUME_TIME passes the limit (its MAX_RECONSUME_TIMES when above 0,
// else the group's) goes to %DLQ%<group> instead. A copy SendBack stored
// itself never passes it (its count is at most the limit), so the rule
// never moves one twice.

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
		if b.pastLimit(group, req.Messages[i].Properties) {
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
		props := make(map[string]string, len(m.Properties)+1)
		for k, v := range m.Properties {
			props[k] = v
		}
		for _, k := range droppedOnCopy {
			delete(props, k)
		}
		props[mq.PropDeadLetterReason] = fmt.Sprintf("reconsume count %s is past the max reconsume times %d", props[mq.PropReconsumeTime], b.limitOf(group, props))
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

func (b *Broker) limitOf(group string, props map[string]string) int32 {
	if n, err := strconv.ParseInt(props[mq.PropMaxReconsumeTimes], 10, 32); err == nil && n > 0 && n <= mq.MaxMaxReconsumeTimes {
		return int32(n)
	}
	return b.maxReconsume(group)
}

func (b *Broker) pastLimit(group string, props map[string]string) bool {
	n, err := strconv.ParseInt(props[mq.PropReconsumeTime], 10, 32)
	return err == nil && int32(n) > b.limitOf(group, props)
}
