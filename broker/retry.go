package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/broker/retry"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// Consume-retry and dead letters: package retry has the rules (the copy a
// send-back stores, producer ids, the max-reconsume limits); the facade
// reads the message, stores the copy through Produce and creates the retry
// and dead-letter topics.

// SendBackRequest is a consumer's "consume later" for one message.
type SendBackRequest struct {
	Group string
	ID    string
	// DelayLevel: 0 picks 3 + the reconsume count; -1 dead-letters at once;
	// 1..18 a level of its own.
	DelayLevel int32
	// MaxReconsumeTimes overrides, when above 0, the message's
	// MAX_RECONSUME_TIMES property and the group's setting.
	MaxReconsumeTimes int32
}

// SendBackResult is the stored copy.
type SendBackResult struct {
	ID             string
	Topic          string
	DeadLettered   bool
	ReconsumeTimes int32
	DeliverAt      int64 // unix ms; 0 for a dead letter
}

// SendBack stores the retry (or dead-letter) copy of a consumed message
// (leader only).
func (b *Broker) SendBack(ctx context.Context, req SendBackRequest) (SendBackResult, error) {
	if err := store.ValidateName("group", req.Group); err != nil {
		return SendBackResult{}, storeErr(err)
	}
	if err := store.ValidateName("topic", mq.DeadLetterTopic(req.Group)); err != nil {
		return SendBackResult{}, invalid("group %q: its retry topic name %s is too long (%v)", req.Group, mq.DeadLetterTopic(req.Group), err)
	}
	if req.DelayLevel < -1 || int(req.DelayLevel) > len(mq.DelayLevels) {
		return SendBackResult{}, invalid("delay level %d: want -1 (dead-letter now), 0 (3 + reconsume count) or 1..%d", req.DelayLevel, len(mq.DelayLevels))
	}
	if req.MaxReconsumeTimes < 0 || req.MaxReconsumeTimes > mq.MaxMaxReconsumeTimes {
		return SendBackResult{}, invalid("max reconsume times %d: want 0 (the group's setting) or 1..%d", req.MaxReconsumeTimes, mq.MaxMaxReconsumeTimes)
	}
	if _, _, err := ParseMessageID(req.ID); err != nil {
		return SendBackResult{}, err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return SendBackResult{}, err
	}
	m, err := b.lookupLeader(req.ID)
	if err != nil {
		return SendBackResult{}, err
	}
	switch {
	case mq.IsDeadLetterTopic(m.Topic):
		return SendBackResult{}, fmt.Errorf("%w: message %s is a dead letter (%s); `raftmq dlq resend` sends it back to its topic", ErrFailedPrecondition, req.ID, m.Topic)
	case mq.IsRetryTopic(m.Topic) && m.Topic != mq.RetryTopic(req.Group):
		return SendBackResult{}, fmt.Errorf("%w: message %s is in %s, another group's retry topic", ErrFailedPrecondition, req.ID, m.Topic)
	case m.Topic == mq.ScheduleTopic:
		return SendBackResult{}, fmt.Errorf("%w: message %s is a delayed message not yet delivered", ErrFailedPrecondition, req.ID)
	}
	maxTimes := req.MaxReconsumeTimes
	if maxTimes == 0 {
		maxTimes = b.retry.Limit(req.Group, m.Properties) // the message's MAX_RECONSUME_TIMES, else the group's
	}
	c := retry.Build(&m, req.Group, req.DelayLevel, maxTimes)
	if req.MaxReconsumeTimes > 0 {
		// The copy carries the consumer's limit: a produce to the retry
		// topic applies it (retry_produce.go), not the group's.
		c.Message.Properties[mq.PropMaxReconsumeTimes] = strconv.Itoa(int(req.MaxReconsumeTimes))
	}
	if err := b.ensureSystemTopic(ctx, c.Topic); err != nil {
		return SendBackResult{}, err
	}
	index, ordinal, _ := ParseMessageID(req.ID)
	now := time.Now()
	cm := ProduceMessage{Key: c.Message.Key, Tag: c.Message.Tag, Properties: c.Message.Properties, Body: c.Message.Body, Timestamp: c.Message.Timestamp}
	ack, deliverAt, err := b.produceCopy(ctx, c.Topic, retry.ProducerID(req.Group, m.Topic, m.Queue), index<<32|uint64(ordinal), cm)
	if err != nil {
		return SendBackResult{}, err
	}
	out := SendBackResult{ID: ack.ID(), Topic: c.Topic, DeadLettered: c.DeadLettered, ReconsumeTimes: c.ReconsumeTimes, DeliverAt: deliverAt}
	b.m.ops.sentBack(c.DeadLettered)
	if !c.DeadLettered && out.DeliverAt == 0 {
		d, _ := mq.LevelDelay(c.DelayLevel)
		out.DeliverAt = now.Add(d).UnixMilli()
	}
	b.log.Debug("sent back", "group", req.Group, "id", req.ID, "copy", ack.ID(), "topic", c.Topic, "reconsume", c.ReconsumeTimes)
	return out, nil
}

// produceCopy stores one message the broker builds itself, under
// (producer, seq) so that a retried call stores it once; when that sequence
// is out of the producer's dedupe window, or was used for other content, it
// stores the message without dedupe.
// It returns the ack and, for a delayed copy, its delivery time (unix ms).
func (b *Broker) produceCopy(ctx context.Context, topic, producer string, seq uint64, m ProduceMessage) (store.Ack, int64, error) {
	req := ProduceRequest{Topic: topic, ProducerID: producer, Seq: seq, Messages: []ProduceMessage{m}}
	res, err := b.Produce(ctx, req)
	if errors.Is(err, store.ErrStaleSequence) || errors.Is(err, ErrSequenceReused) {
		req.ProducerID, req.Seq = "", 0
		res, err = b.Produce(ctx, req)
	}
	if err != nil {
		return store.Ack{}, 0, err
	}
	if len(res.Acks) != 1 {
		return store.Ack{}, 0, fmt.Errorf("internal: produce of one message answered %d acks", len(res.Acks))
	}
	var at int64
	if len(res.DeliverAt) == 1 {
		at = res.DeliverAt[0]
	}
	return res.Acks[0], at, nil
}

// ensureSystemTopic creates a retry or dead-letter topic with one queue
// unless it exists (with any queue count); a dead-letter topic is read-only
// (perm 4: only the broker writes it).
func (b *Broker) ensureSystemTopic(ctx context.Context, topic string) error {
	if b.fsm.QueueCount(topic) > 0 {
		return nil
	}
	_, err := b.CreateTopic(ctx, topic, 1, true)
	if errors.Is(err, ErrAlreadyExists) {
		return nil
	}
	if err == nil && mq.IsDeadLetterTopic(topic) {
		// Clients cannot produce to a system topic anyway: a failure here
		// costs only the label, never the dead letter.
		if _, perr := b.w.UpdateTopic(ctx, topic, store.PermRead); perr != nil {
			b.log.Warn("dead-letter topic left writable", "topic", topic, "error", perr)
		}
	}
	return err
}

// ResendResult is where a dead letter went.
type ResendResult struct {
	Topic string
	Ack   store.Ack
	// Duplicate: this dead letter had already been resent (within the
	// dedupe window); Ack is that first resend's.
	Duplicate bool
}

// ResendDeadLetter produces a message of %DLQ%<group> to its original topic
// (RETRY_TOPIC) with the retry properties cleared (leader only). Resending
// the same dead letter again answers the first resend (while the dedupe
// window holds it).
func (b *Broker) ResendDeadLetter(ctx context.Context, group, id string) (ResendResult, error) {
	if err := store.ValidateName("group", group); err != nil {
		return ResendResult{}, storeErr(err)
	}
	index, ordinal, err := ParseMessageID(id)
	if err != nil {
		return ResendResult{}, err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return ResendResult{}, err
	}
	m, err := b.lookupLeader(id)
	if err != nil {
		return ResendResult{}, err
	}
	dlq := mq.DeadLetterTopic(group)
	if m.Topic != dlq {
		return ResendResult{}, fmt.Errorf("%w: message %s is in topic %s, not a dead letter of group %s (%s)", ErrNotFound, id, m.Topic, group, dlq)
	}
	topic := m.Properties[mq.PropRetryTopic]
	if topic == "" || mq.IsSystemTopic(topic) {
		return ResendResult{}, fmt.Errorf("%w: dead letter %s names no original topic (%s=%q)", ErrFailedPrecondition, id, mq.PropRetryTopic, topic)
	}
	props := retry.Resent(m.Properties)
	pm := ProduceMessage{Key: m.Key, Tag: m.Tag, Properties: props, Body: m.Body, Timestamp: m.Timestamp}
	req := ProduceRequest{Topic: topic, ProducerID: retry.ResendProducer + group, Seq: index<<32 | uint64(ordinal), Messages: []ProduceMessage{pm}}
	// As a client's produce: the original topic's write permission holds.
	res, err := b.ClientProduce(ctx, req)
	if errors.Is(err, store.ErrStaleSequence) || errors.Is(err, ErrSequenceReused) {
		req.ProducerID, req.Seq = "", 0
		res, err = b.ClientProduce(ctx, req)
	}
	if err != nil {
		return ResendResult{}, err
	}
	if len(res.Acks) != 1 {
		return ResendResult{}, fmt.Errorf("internal: produce of one message answered %d acks", len(res.Acks))
	}
	return ResendResult{Topic: topic, Ack: res.Acks[0], Duplicate: res.Duplicate}, nil
}

// GroupSettings are a consumer group's replicated settings.
type GroupSettings struct {
	MaxReconsumeTimes int32
}

// UpdateGroup changes a group's settings (leader only); a nil field keeps
// its value. It answers the settings in force afterwards.
func (b *Broker) UpdateGroup(ctx context.Context, group string, maxReconsume *int32) (GroupSettings, error) {
	if err := store.ValidateName("group", group); err != nil {
		return GroupSettings{}, storeErr(err)
	}
	if maxReconsume != nil && (*maxReconsume < 0 || *maxReconsume > mq.MaxMaxReconsumeTimes) {
		return GroupSettings{}, invalid("max reconsume times %d: want 0..%d (0: the first failure dead-letters)", *maxReconsume, mq.MaxMaxReconsumeTimes)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return GroupSettings{}, err
	}
	if maxReconsume != nil {
		if err := b.w.SetMaxReconsumeTimes(ctx, group, *maxReconsume); err != nil {
			return GroupSettings{}, b.replicaErr(err)
		}
	}
	return b.GroupSettings(group), nil
}

// GroupSettings returns a group's settings as this node has applied them,
// defaults filled in.
func (b *Broker) GroupSettings(group string) GroupSettings {
	return GroupSettings{MaxReconsumeTimes: b.retry.MaxReconsume(group)}
}

// ensureRetryTopic creates the group's retry topic when a member subscribes
// to it (RocketMQ creates it at the consumer's heartbeat).
func (b *Broker) ensureRetryTopic(ctx context.Context, group string, topics []string) error {
	for _, t := range topics {
		if t == mq.RetryTopic(group) {
			return b.ensureSystemTopic(ctx, t)
		}
	}
	return nil
}
