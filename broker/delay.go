package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/broker/delay"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Delayed and timed messages are package delay's: the facade checks them
// at the edge, stages them as they are produced, runs the scheduler on the
// ready leader (schedule.go) and answers lookups of them by id.

// ScheduleState is what the scheduler and lookups read of the schedule
// queues' replicated state. *store.Store implements it.
type ScheduleState interface {
	ScheduleCursors() [store.ScheduleQueues]uint64
	ScheduleFloor() uint64
}

var _ ScheduleState = (*store.Store)(nil)

// MaxMaxDelay is the largest --max-delay: what the schedule queues hold.
const MaxMaxDelay = delay.MaxMaxDelay

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
		w, err := delay.Parse(i, waitOf(m), m.Properties)
		if err != nil {
			return err
		}
		m.DelayLevel, m.DeliverAt = w.Level, w.At
		if err := delay.Check(i, w, now, maxDelay); err != nil {
			return err
		}
		if w.Delayed() {
			delayed++
		}
	}
	if delayed != 0 && delayed != len(req.Messages) {
		return invalid("produce request mixes %d delayed and %d immediate messages; send them in separate requests", delayed, len(req.Messages)-delayed)
	}
	return nil
}

func waitOf(m *ProduceMessage) delay.Wait { return delay.Wait{Level: m.DelayLevel, At: m.DeliverAt} }

func waitsOf(req *ProduceRequest) []delay.Wait {
	w := make([]delay.Wait, len(req.Messages))
	for i := range req.Messages {
		w[i] = waitOf(&req.Messages[i])
	}
	return w
}

// delayOverhead bounds what staging adds to req's encoded size
// (delay.Overhead; nothing for an immediate request).
func delayOverhead(req *ProduceRequest) int {
	if len(req.Messages) == 0 || !isDelayed(&req.Messages[0]) {
		return 0
	}
	return delay.Overhead(req.Topic, len(req.Messages))
}

func isDelayed(m *ProduceMessage) bool { return waitOf(m).Delayed() }

// stage turns the log request of a delayed produce (queues chosen in its
// topic) into the request that stores it in the schedule topic (delay.Stage),
// creating that topic when it is missing.
func (b *Broker) stage(ctx context.Context, req *ProduceRequest, lr *raftlog.Request) error {
	if b.sched == nil {
		return fmt.Errorf("%w: this node's replica keeps no schedule state: delayed messages are not supported", ErrUnavailable)
	}
	if b.fsm.QueueCount(mq.ScheduleTopic) == 0 {
		if _, err := b.w.CreateTopic(ctx, mq.ScheduleTopic, store.ScheduleQueues, true); err != nil {
			return b.replicaErr(err)
		}
	}
	delay.Stage(req.Topic, waitsOf(req), lr)
	return nil
}

// stagedAcks rewrites the acks of a staged request as the producer sees
// them and returns each message's delivery time (delay.Acks).
func (b *Broker) stagedAcks(req *ProduceRequest, lr *raftlog.Request, acks []store.Ack) []int64 {
	return delay.Acks(waitsOf(req), lr, acks, b.rlog.AppendedAt)
}

// scheduleCut keeps a retention cut below every staged message that has
// not left its schedule queue: it is delivered from there.
func (b *Broker) scheduleCut(cut uint64) uint64 {
	if b.sched == nil {
		return cut
	}
	return delay.Cut(cut, b.sched.ScheduleFloor())
}
