package broker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Delayed and timed messages (docs/semantics.md): a produce request whose
// messages carry a delay level or a delivery time is stored at once, as an
// ordinary request, in the schedule topic (api.ScheduleTopic): its queue
// there is the kind of wait (store/schedule.go), and the message keeps
// where it goes (REAL_TOPIC, REAL_QID, chosen now as for any message) and
// how long it waits (DELAY or TIMER_DELIVER_MS). The scheduler
// (schedule.go) delivers it when its time comes.

// ScheduleState is what the scheduler and lookups read of the schedule
// queues' replicated state. *store.Store implements it.
type ScheduleState interface {
	ScheduleCursors() [store.ScheduleQueues]uint64
	ScheduleFloor() uint64
}

var _ ScheduleState = (*store.Store)(nil)

// validateDelay checks the delay of every message of req and moves a delay
// given as a property (DELAY, TIMER_DELIVER_MS: RocketMQ clients and the
// consume-retry path send it so) into the typed fields. A request is
// either delayed in every message or in none. It also refuses what only
// the broker may write: the schedule topic and its producer ids.
func validateDelay(cfg *Config, req *ProduceRequest) error {
	if req.Topic == mq.ScheduleTopic {
		return invalid("topic %s holds the broker's delayed messages; produce to a topic with a delay level or a delivery time instead", mq.ScheduleTopic)
	}
	if store.IsScheduleProducer(req.ProducerID) {
		return invalid("producer id %q is reserved for the broker's deliveries of delayed messages", req.ProducerID)
	}
	maxDelay := cfg.MaxDelay
	if maxDelay <= 0 {
		maxDelay = mq.DefaultMaxDelay
	}
	now := time.Now()
	delayed := 0
	for i := range req.Messages {
		m := &req.Messages[i]
		if err := delayFromProperties(i, m); err != nil {
			return err
		}
		switch {
		case m.DelayLevel != 0 && m.DeliverAt != 0:
			return invalid("message %d has both a delay level (%d) and a delivery time (%d ms); give one", i, m.DelayLevel, m.DeliverAt)
		case m.DelayLevel != 0:
			if _, err := mq.LevelDelay(m.DelayLevel); err != nil {
				return invalid("message %d: %v", i, err)
			}
			delayed++
		case m.DeliverAt < 0:
			return invalid("message %d: delivery time %d ms is before 1970", i, m.DeliverAt)
		case m.DeliverAt > 0:
			if at := time.UnixMilli(m.DeliverAt); at.Sub(now) > maxDelay {
				return invalid("message %d: delivery time %s is more than the broker's maximum delay (--max-delay, %s) ahead",
					i, at.UTC().Format(time.RFC3339), maxDelay)
			}
			delayed++
		}
	}
	if delayed != 0 && delayed != len(req.Messages) {
		return invalid("produce request mixes %d delayed and %d immediate messages; send them in separate requests", delayed, len(req.Messages)-delayed)
	}
	return nil
}

// delayFromProperties sets the typed delay of m from its DELAY or
// TIMER_DELIVER_MS property when the typed field is unset. A DELAY above
// the last level waits the last level, as RocketMQ's broker does (its
// clients send 3 + reconsume count); DELAY 0 is no delay.
func delayFromProperties(i int, m *ProduceMessage) error {
	if v, ok := m.Properties[mq.PropDelay]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return invalid("message %d: property %s=%q is not a delay level 1..%d", i, mq.PropDelay, v, len(mq.DelayLevels))
		}
		n = min(n, len(mq.DelayLevels))
		if m.DelayLevel != 0 && n != 0 && n != m.DelayLevel {
			return invalid("message %d: delay level %d and property %s=%q disagree", i, m.DelayLevel, mq.PropDelay, v)
		}
		if m.DelayLevel == 0 {
			m.DelayLevel = n
		}
	}
	if v, ok := m.Properties[mq.PropTimerDeliverMS]; ok {
		at, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return invalid("message %d: property %s=%q is not a unix time in ms", i, mq.PropTimerDeliverMS, v)
		}
		if m.DeliverAt != 0 && m.DeliverAt != at {
			return invalid("message %d: delivery time %d and property %s=%q disagree", i, m.DeliverAt, mq.PropTimerDeliverMS, v)
		}
		m.DeliverAt = at
	}
	return nil
}

// delayOverhead bounds what staging adds to req's encoded size: per message
// REAL_TOPIC, REAL_QID and the larger of DELAY and TIMER_DELIVER_MS, names,
// values at their widest and their length varints (2 bytes each at most for
// these lengths), and the property count's varint growing by a byte.
func delayOverhead(req *ProduceRequest) int {
	if len(req.Messages) == 0 || !isDelayed(&req.Messages[0]) {
		return 0
	}
	perMessage := len(mq.PropRealTopic) + len(req.Topic) + len(mq.PropRealQueue) + len("1023") +
		len(mq.PropTimerDeliverMS) + len("-9223372036854775808") + 6*2 + 1
	return len(req.Messages) * perMessage
}

func isDelayed(m *ProduceMessage) bool { return m.DelayLevel != 0 || m.DeliverAt != 0 }

// stage turns the log request of a delayed produce (queues chosen in its
// topic) into the request that stores it in the schedule topic, creating
// that topic when it is missing. Only what the request holds decides the
// staged bytes, so a retry stores (and dedupes to) the same request.
func (b *Broker) stage(ctx context.Context, req *ProduceRequest, lr *raftlog.Request) error {
	if b.sched == nil {
		return fmt.Errorf("%w: this node's replica keeps no schedule state: delayed messages are not supported", ErrUnavailable)
	}
	if b.fsm.QueueCount(mq.ScheduleTopic) == 0 {
		if _, err := b.w.CreateTopic(ctx, mq.ScheduleTopic, store.ScheduleQueues, true); err != nil {
			return b.replicaErr(err)
		}
	}
	lr.Topic = mq.ScheduleTopic
	for i := range lr.Messages {
		m, pm := &lr.Messages[i], &req.Messages[i]
		props := make(map[string]string, len(m.Properties)+3)
		for k, v := range m.Properties {
			props[k] = v
		}
		props[mq.PropRealTopic] = req.Topic
		props[mq.PropRealQueue] = strconv.Itoa(int(m.Queue))
		// What the broker writes on staged and delivered copies is its own.
		for _, k := range []string{mq.PropDelay, mq.PropTimerDeliverMS, mq.PropStagedID, mq.PropSchedulePopMS} {
			delete(props, k)
		}
		if pm.DelayLevel != 0 {
			props[mq.PropDelay] = strconv.Itoa(pm.DelayLevel)
			m.Queue = uint32(pm.DelayLevel - 1)
		} else {
			props[mq.PropTimerDeliverMS] = strconv.FormatInt(pm.DeliverAt, 10)
			m.Queue = store.ScheduleIntakeQueue
		}
		m.Properties = props
	}
	return nil
}

// stagedAcks rewrites the acks of a staged request as the producer sees
// them: the message's queue in its topic, offset 0 (assigned at delivery),
// and its delivery time (unix ms), which for a delay level counts from the
// append time of its entry.
func (b *Broker) stagedAcks(req *ProduceRequest, lr *raftlog.Request, acks []store.Ack) []int64 {
	at := make([]int64, len(acks))
	appended := map[uint64]time.Time{} // the acks of a request name one or two entries
	for i := range acks {
		pm := &req.Messages[i]
		q, _ := strconv.Atoi(lr.Messages[i].Properties[mq.PropRealQueue])
		acks[i].Queue, acks[i].Offset = uint32(q), 0
		if pm.DelayLevel == 0 {
			at[i] = pm.DeliverAt
			continue
		}
		d, _ := mq.LevelDelay(pm.DelayLevel)
		at[i] = time.Now().Add(d).UnixMilli()
		if idx, err := raftlog.MessageIndex(acks[i].ID); err == nil {
			t, ok := appended[idx]
			if !ok {
				t, _ = b.rlog.AppendedAt(idx)
				appended[idx] = t
			}
			if !t.IsZero() {
				at[i] = t.Add(d).UnixMilli()
			}
		}
	}
	return at
}

// refuseScheduleTopic refuses reads and creation of the schedule topic: the
// broker creates it, its messages are not due yet and appear in their own
// topics then.
func refuseScheduleTopic(topic string) error {
	if topic == mq.ScheduleTopic {
		return invalid("topic %s is the broker's: it holds delayed messages until their time, which then appear in their own topics", mq.ScheduleTopic)
	}
	return nil
}

// scheduleCut keeps a retention cut below every staged message that has
// not left its schedule queue: it is delivered from there.
func (b *Broker) scheduleCut(cut uint64) uint64 {
	if b.sched == nil {
		return cut
	}
	if f := b.sched.ScheduleFloor(); f > 0 && f < cut {
		return f
	}
	return cut
}
