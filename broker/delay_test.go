package broker

import (
	"math/bits"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/replica"
)

func TestScheduleTopicNamesAgree(t *testing.T) {
	if replica.ScheduleTopic != api.ScheduleTopic || replica.ScheduleLevels != len(api.DelayLevels) {
		t.Fatalf("replica's schedule topic %q with %d levels, api's %q with %d", replica.ScheduleTopic, replica.ScheduleLevels, api.ScheduleTopic, len(api.DelayLevels))
	}
}

// TestCascadeStages: a timed message moves through the cascade in
// popcount(wait / unit) stages plus a final one for the remainder, never
// leaves a stage after its time, and the last stage leaves exactly at it.
func TestCascadeStages(t *testing.T) {
	b, _ := newFakeBroker(t)
	base := time.UnixMilli(1_700_000_000_000)
	for _, wait := range []time.Duration{0, time.Millisecond, 15 * time.Millisecond, 16 * time.Millisecond, time.Second,
		1500*time.Millisecond + 7*time.Millisecond, 10 * time.Minute, 72*time.Hour + 123*time.Millisecond} {
		at := base.Add(wait)
		m := &Message{ID: "000000000000000100000000", Properties: map[string]string{
			api.PropRealTopic: "t", api.PropRealQueue: "1", api.PropTimerDeliverMS: strconv.FormatInt(at.UnixMilli(), 10), "user": "u"}}
		q, due, stages := uint32(replica.ScheduleIntakeQueue), base, 0
		for {
			stages++
			// The round runs just after due: "now" is a little later.
			topic, lm := b.nextStage(q, m, due, due.Add(time.Millisecond))
			if topic != api.ScheduleTopic {
				if topic != "t" || lm.Queue != 1 || lm.Properties["user"] != "u" || lm.Properties[api.PropStagedID] != "000000000000000100000000" ||
					lm.Properties[api.PropTimerDeliverMS] != "" || lm.Properties[api.PropRealTopic] != "" {
					t.Fatalf("wait %s: delivered as %s %+v", wait, topic, lm)
				}
				break
			}
			pop, err := strconv.ParseInt(lm.Properties[api.PropSchedulePopMS], 10, 64)
			if err != nil || time.UnixMilli(pop).After(at) {
				t.Fatalf("wait %s: stage %d into queue %d leaves at %d, after the time %d", wait, stages, lm.Queue, pop, at.UnixMilli())
			}
			q, due = lm.Queue, time.UnixMilli(pop)
			m = &Message{ID: "000000000000000200000000", Properties: lm.Properties}
		}
		units := uint64(wait / replica.ScheduleUnit)
		want := 1 + bits.OnesCount64(units) // intake, then one per set bit
		if wait%replica.ScheduleUnit != 0 {
			want++ // the final queue
		}
		if wait > time.Millisecond && stages != want {
			t.Errorf("wait %s: %d stages, want %d", wait, stages, want)
		}
		if !due.Equal(at) && wait > time.Millisecond {
			t.Errorf("wait %s: last stage left at %s, the time is %s", wait, due, at)
		}
	}
}

type noSchedule struct{}

func (noSchedule) ScheduleCursors() [replica.ScheduleQueues]uint64 {
	return [replica.ScheduleQueues]uint64{}
}
func (noSchedule) EntryRecord(string, uint32, uint64) (replica.Location, bool) {
	return replica.Location{}, false
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
			return ProduceMessage{DeliverAt: 1<<62 + int64(i), Properties: map[string]string{api.PropTimerDeliverMS: strconv.FormatInt(1<<62+int64(i), 10), "k": "v"}}
		},
		func(i int) ProduceMessage {
			return ProduceMessage{DelayLevel: 3, Properties: map[string]string{api.PropDelay: "3"}}
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
