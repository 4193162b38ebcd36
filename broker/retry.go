package broker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Consume-retry and dead letters (RocketMQ's CONSUMER_SEND_MSG_BACK): a
// consumer that cannot process a message sends it back by id; the leader
// reads the message and stores a copy, through Produce, in the group's retry
// topic %RETRY%<group> with a delay level of 3 + its reconsume count, or in
// %DLQ%<group> once the count passes the group's max reconsume times. Both
// topics (one queue each) are created on demand through the replicated
// CreateTopic. Every decision is the copy's content, so it is replicated
// with it: a new leader knows every copy the old one stored.
//
// A send-back is produced under a producer id of the group and the queue
// the message was read from (sendBackProducerID), with the message's log
// position as sequence, so a SendBack retried after a timeout or a leader
// change (or the same message sent back by two members that both received
// it) stores one copy while the dedupe window (store.DedupeWindow
// sequences per producer id) still holds that sequence. A queue is consumed
// in order, so its sequences rise as its messages are sent back, and only a
// send-back more than a window behind the queue's others falls out: it is
// then stored without dedupe, and a retry of it may store a second copy. At
// least once, never lost.

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

// Producer ids of the copies the broker stores itself.
const (
	sendBackProducer = "%SENDBACK%"
	resendProducer   = "%RESEND%"
)

// Properties of an original that a copy does not keep: they would delay or
// redirect the copy (the copy's own delay is its DELAY level).
var droppedOnCopy = []string{mq.PropDelay, mq.PropTimerDeliverMS, mq.PropRealTopic, mq.PropRealQueue, "TIMER_DELAY_SEC", "TIMER_DELAY_MS",
	mq.PropStagedID, mq.PropSchedulePopMS}

// retryCopy is what SendBack stores for a message.
type retryCopy struct {
	Topic          string
	Message        ProduceMessage
	DeadLettered   bool
	ReconsumeTimes int32
	DelayLevel     int // 0 for a dead letter
}

// buildSendBack builds the copy of m that a send-back by group stores;
// maxTimes is the limit in force (the request's override or the group's).
func buildSendBack(m *Message, group string, delayLevel, maxTimes int32) retryCopy {
	var n int32 // a message of its original topic has not been sent back yet
	if mq.IsRetryTopic(m.Topic) {
		n = reconsumeTimes(m.Properties)
	}
	props := make(map[string]string, len(m.Properties)+4)
	for k, v := range m.Properties {
		props[k] = v
	}
	for _, k := range droppedOnCopy {
		delete(props, k)
	}
	if props[mq.PropRetryTopic] == "" || !mq.IsRetryTopic(m.Topic) {
		// A message of its original topic: the first copy names it.
		// Copies of copies keep what the first copy named.
		props[mq.PropRetryTopic] = m.Topic
	}
	if props[mq.PropOriginMessageID] == "" || !mq.IsRetryTopic(m.Topic) {
		props[mq.PropOriginMessageID] = m.ID
		props[mq.PropOriginQueue] = strconv.Itoa(int(m.Queue))
		props[mq.PropOriginOffset] = strconv.FormatUint(m.Offset, 10)
	}
	c := retryCopy{ReconsumeTimes: n + 1}
	props[mq.PropReconsumeTime] = strconv.Itoa(int(n + 1))
	switch {
	case delayLevel < 0:
		c.DeadLettered = true
		props[mq.PropDeadLetterReason] = "sent to the dead-letter queue by the consumer (delay level -1)"
	case n >= maxTimes:
		c.DeadLettered = true
		props[mq.PropDeadLetterReason] = fmt.Sprintf("reconsumed %d times, the max reconsume times is %d", n, maxTimes)
	case delayLevel > 0:
		c.DelayLevel = int(delayLevel)
	default:
		c.DelayLevel = min(3+int(n), len(mq.DelayLevels))
	}
	if c.DeadLettered {
		c.Topic = mq.DeadLetterTopic(group)
	} else {
		c.Topic = mq.RetryTopic(group)
		delete(props, mq.PropDeadLetterReason)
		props[mq.PropDelay] = strconv.Itoa(c.DelayLevel)
	}
	c.Message = ProduceMessage{Key: m.Key, Tag: m.Tag, Properties: props, Body: m.Body, Timestamp: m.Timestamp}
	return c
}

// reconsumeTimes is a message's RECONSUME_TIME (0 when absent or not a
// count).
func reconsumeTimes(props map[string]string) int32 {
	n, err := strconv.ParseInt(props[mq.PropReconsumeTime], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
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
		maxTimes = b.limitOf(req.Group, m.Properties) // the message's MAX_RECONSUME_TIMES, else the group's
	}
	c := buildSendBack(&m, req.Group, req.DelayLevel, maxTimes)
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
	ack, deliverAt, err := b.produceCopy(ctx, c.Topic, sendBackProducerID(req.Group, m.Topic, m.Queue), index<<32|uint64(ordinal), c.Message)
	if err != nil {
		return SendBackResult{}, err
	}
	out := SendBackResult{ID: ack.ID, Topic: c.Topic, DeadLettered: c.DeadLettered, ReconsumeTimes: c.ReconsumeTimes, DeliverAt: deliverAt}
	if !c.DeadLettered && out.DeliverAt == 0 {
		d, _ := mq.LevelDelay(c.DelayLevel)
		out.DeliverAt = now.Add(d).UnixMilli()
	}
	b.log.Debug("sent back", "group", req.Group, "id", req.ID, "copy", ack.ID, "topic", c.Topic, "reconsume", c.ReconsumeTimes)
	return out, nil
}

// sendBackProducerID is the producer id of the send-backs of a group's
// messages read from one queue: "%SENDBACK%<group>/<topic>/<queue>", the
// topic replaced by its hash when the id would be too long.
func sendBackProducerID(group, topic string, queue int32) string {
	id := fmt.Sprintf("%s%s/%s/%d", sendBackProducer, group, topic, queue)
	if len(id) > raftlog.MaxNameLen {
		h := fnv.New64a()
		h.Write([]byte(topic))
		id = fmt.Sprintf("%s%s/%016x/%d", sendBackProducer, group, h.Sum64(), queue)
	}
	return id
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

// maxReconsume is a group's max reconsume times (RocketMQ's default 16
// when never set).
func (b *Broker) maxReconsume(group string) int32 {
	if n, ok := b.fsm.MaxReconsumeTimes(group); ok {
		return n
	}
	return mq.DefaultMaxReconsume
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
	props := make(map[string]string, len(m.Properties))
	for k, v := range m.Properties {
		props[k] = v
	}
	for _, k := range []string{mq.PropRetryTopic, mq.PropOriginMessageID, mq.PropOriginQueue, mq.PropOriginOffset,
		mq.PropReconsumeTime, mq.PropMaxReconsumeTimes, mq.PropDeadLetterReason, mq.PropDelay} {
		delete(props, k)
	}
	pm := ProduceMessage{Key: m.Key, Tag: m.Tag, Properties: props, Body: m.Body, Timestamp: m.Timestamp}
	req := ProduceRequest{Topic: topic, ProducerID: resendProducer + group, Seq: index<<32 | uint64(ordinal), Messages: []ProduceMessage{pm}}
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
	return GroupSettings{MaxReconsumeTimes: b.maxReconsume(group)}
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
