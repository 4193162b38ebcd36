package broker

import (
	"strconv"
	"testing"

	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

type noSchedule struct{}

func (noSchedule) ScheduleCursors() [store.ScheduleQueues]uint64 {
	return [store.ScheduleQueues]uint64{}
}
func (noSchedule) ScheduleFloor() uint64 { return 0 }

// TestStagingOverheadBound: what staging adds to a request's encoded size
// stays within what ValidateProduce counts for it (delayOverhead), so a
// request that passes validation is not refused as too large once staged.
func TestStagingOverheadBound(t *testing.T) {
	b, _ := newFakeBroker(t)
	b.sched = noSchedule{}
	topic := "a-topic-with-a-rather-long-name-for-the-bound"
	for _, mk := range []func(i int) ProduceMessage{
		func(i int) ProduceMessage { return ProduceMessage{DelayLevel: 18} },
		func(i int) ProduceMessage {
			return ProduceMessage{DeliverAt: 1<<62 + int64(i), Properties: map[string]string{mq.PropTimerDeliverMS: strconv.FormatInt(1<<62+int64(i), 10), "k": "v"}}
		},
		func(i int) ProduceMessage {
			return ProduceMessage{DelayLevel: 3, Properties: map[string]string{mq.PropDelay: "3"}}
		},
	} {
		req := ProduceRequest{Topic: topic}
		for i := 0; i < 100; i++ {
			req.Messages = append(req.Messages, mk(i))
		}
		lr := raftlog.Request{Topic: topic, Messages: make([]raftlog.Message, len(req.Messages))}
		for i, m := range req.Messages {
			lr.Messages[i] = raftlog.Message{Queue: 1023, Properties: m.Properties, Timestamp: 1}
		}
		before := lr.EncodedSize()
		if err := b.stage(t.Context(), &req, &lr); err != nil {
			t.Fatal(err)
		}
		if grew := lr.EncodedSize() - before; grew > delayOverhead(&req) {
			t.Fatalf("staging added %d bytes, the bound is %d", grew, delayOverhead(&req))
		}
	}
}
