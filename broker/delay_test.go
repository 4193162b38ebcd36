package broker

import (
	"math/bits"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
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
