package delay

import (
	"math/bits"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/broker/entry"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// noTopics is an applied state with no topics.
type noTopics struct{}

func (noTopics) Changed() <-chan struct{} { return nil }
func (noTopics) Locate(string, int32, uint64, int) ([]store.Location, store.QueueRange, error) {
	return nil, store.QueueRange{}, store.ErrUnknownTopic
}
func (noTopics) Topic(string) (store.TopicInfo, error) {
	return store.TopicInfo{}, store.ErrUnknownTopic
}
func (noTopics) QueueCount(string) int { return 0 }

func TestScheduleTopicNamesAgree(t *testing.T) {
	if store.ScheduleTopic != mq.ScheduleTopic || store.ScheduleLevels != len(mq.DelayLevels) {
		t.Fatalf("replica's schedule topic %q with %d levels, api's %q with %d", store.ScheduleTopic, store.ScheduleLevels, mq.ScheduleTopic, len(mq.DelayLevels))
	}
}

// TestCascadeStages: a timed message moves through the cascade in
// popcount(wait / unit) stages plus a final one for the remainder, never
// leaves a stage after its time, and the last stage leaves exactly at it.
func TestCascadeStages(t *testing.T) {
	s := New(hclog.NewNullLogger(), noTopics{}, nil, nil, 0, Hooks{})
	base := time.UnixMilli(1_700_000_000_000)
	for _, wait := range []time.Duration{0, time.Millisecond, 15 * time.Millisecond, 16 * time.Millisecond, time.Second,
		1500*time.Millisecond + 7*time.Millisecond, 10 * time.Minute, 72*time.Hour + 123*time.Millisecond} {
		at := base.Add(wait)
		m := &entry.Message{ID: "000000000000000100000000", Properties: map[string]string{
			mq.PropRealTopic: "t", mq.PropRealQueue: "1", mq.PropTimerDeliverMS: strconv.FormatInt(at.UnixMilli(), 10), "user": "u"}}
		q, due, stages := uint32(store.ScheduleIntakeQueue), base, 0
		for {
			stages++
			// The round runs just after due: "now" is a little later.
			topic, lm := s.nextStage(q, m, due, due.Add(time.Millisecond))
			if topic != mq.ScheduleTopic {
				if topic != "t" || lm.Queue != 1 || lm.Properties["user"] != "u" || lm.Properties[mq.PropStagedID] != "000000000000000100000000" ||
					lm.Properties[mq.PropTimerDeliverMS] != "" || lm.Properties[mq.PropRealTopic] != "" {
					t.Fatalf("wait %s: delivered as %s %+v", wait, topic, lm)
				}
				break
			}
			pop, err := strconv.ParseInt(lm.Properties[mq.PropSchedulePopMS], 10, 64)
			if err != nil || time.UnixMilli(pop).After(at) {
				t.Fatalf("wait %s: stage %d into queue %d leaves at %d, after the time %d", wait, stages, lm.Queue, pop, at.UnixMilli())
			}
			q, due = lm.Queue, time.UnixMilli(pop)
			m = &entry.Message{ID: "000000000000000200000000", Properties: lm.Properties}
		}
		units := uint64(wait / store.ScheduleUnit)
		want := 1 + bits.OnesCount64(units) // intake, then one per set bit
		if wait%store.ScheduleUnit != 0 {
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
