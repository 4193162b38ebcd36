package retry

import (
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/raftmq/raftmq/broker/entry"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
)

// Producer ids of the copies the broker stores itself.
const (
	SendBackProducer = "%SENDBACK%"
	ResendProducer   = "%RESEND%"
)

// Properties of an original that a copy does not keep: they would delay or
// redirect the copy (the copy's own delay is its DELAY level).
var droppedOnCopy = []string{mq.PropDelay, mq.PropTimerDeliverMS, mq.PropRealTopic, mq.PropRealQueue, "TIMER_DELAY_SEC", "TIMER_DELAY_MS",
	mq.PropStagedID, mq.PropSchedulePopMS}

// Message is the message a copy stores.
type Message struct {
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
	Timestamp  int64
}

// Copy is what a send-back stores for a message.
type Copy struct {
	Topic          string
	Message        Message
	DeadLettered   bool
	ReconsumeTimes int32
	DelayLevel     int // 0 for a dead letter
}

// Build builds the copy of m that a send-back by group stores;
// maxTimes is the limit in force (the request's override or the group's).
func Build(m *entry.Message, group string, delayLevel, maxTimes int32) Copy {
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
	c := Copy{ReconsumeTimes: n + 1}
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
	c.Message = Message{Key: m.Key, Tag: m.Tag, Properties: props, Body: m.Body, Timestamp: m.Timestamp}
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

// ProducerID is the producer id of the send-backs of a group's
// messages read from one queue: "%SENDBACK%<group>/<topic>/<queue>", the
// topic replaced by its hash when the id would be too long.
func ProducerID(group, topic string, queue int32) string {
	id := fmt.Sprintf("%s%s/%s/%d", SendBackProducer, group, topic, queue)
	if len(id) > raftlog.MaxNameLen {
		h := fnv.New64a()
		h.Write([]byte(topic))
		id = fmt.Sprintf("%s%s/%016x/%d", SendBackProducer, group, h.Sum64(), queue)
	}
	return id
}

// State is what the retry rules read of the applied state.
type State interface {
	MaxReconsumeTimes(group string) (int32, bool)
}

// Policy applies the max-reconsume rules to a node's applied state.
type Policy struct {
	fsm State
}

// New returns the policy over fsm.
func New(fsm State) *Policy { return &Policy{fsm: fsm} }

// MaxReconsume is a group's max reconsume times (RocketMQ's default 16
// when never set).
func (p *Policy) MaxReconsume(group string) int32 {
	if n, ok := p.fsm.MaxReconsumeTimes(group); ok {
		return n
	}
	return mq.DefaultMaxReconsume
}

// Limit is the max reconsume times of a message of group with props: its
// MAX_RECONSUME_TIMES when above 0, else the group's.
func (p *Policy) Limit(group string, props map[string]string) int32 {
	if n, err := strconv.ParseInt(props[mq.PropMaxReconsumeTimes], 10, 32); err == nil && n > 0 && n <= mq.MaxMaxReconsumeTimes {
		return int32(n)
	}
	return p.MaxReconsume(group)
}

// PastLimit reports whether a message's RECONSUME_TIME passes its limit.
func (p *Policy) PastLimit(group string, props map[string]string) bool {
	n, err := strconv.ParseInt(props[mq.PropReconsumeTime], 10, 32)
	return err == nil && int32(n) > p.Limit(group, props)
}

// DeadLetter is the properties of a message produced to a retry topic past
// its limit, as stored in the dead-letter topic: what a copy drops dropped
// and the reason named.
func DeadLetter(props map[string]string, limit int32) map[string]string {
	out := make(map[string]string, len(props)+1)
	for k, v := range props {
		out[k] = v
	}
	for _, k := range droppedOnCopy {
		delete(out, k)
	}
	out[mq.PropDeadLetterReason] = fmt.Sprintf("reconsume count %s is past the max reconsume times %d", out[mq.PropReconsumeTime], limit)
	return out
}

// Resent is the properties of a dead letter resent to its original topic:
// the retry properties cleared.
func Resent(props map[string]string) map[string]string {
	out := make(map[string]string, len(props))
	for k, v := range props {
		out[k] = v
	}
	for _, k := range []string{mq.PropRetryTopic, mq.PropOriginMessageID, mq.PropOriginQueue, mq.PropOriginOffset,
		mq.PropReconsumeTime, mq.PropMaxReconsumeTimes, mq.PropDeadLetterReason, mq.PropDelay} {
		delete(out, k)
	}
	return out
}
