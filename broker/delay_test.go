package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/election"
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

// threeVoters is a fake's membership as a group of n1, n2, n3 whose
// transfers are recorded.
type threeVoters struct {
	*fakeReplica
	to []string
}

func (m *threeVoters) Servers() ([]election.Server, error) {
	return []election.Server{{ID: "n1", Voter: true}, {ID: "n2", Voter: true}, {ID: "n3", Voter: true}}, nil
}

func (m *threeVoters) Transfer(id string) error { m.to = append(m.to, id); return nil }

// TestScheduleHandOver: a leader that lacks the body of a waiting message
// hands leadership to the healthy voter that holds it and has applied the
// most, at most once per period, and to nobody when none holds it.
func TestScheduleHandOver(t *testing.T) {
	f := newFakeReplica("n1")
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClientAddr, cfg.RetentionAge = "n1", "n1:9000", 0
	m := &threeVoters{fakeReplica: f}
	b, err := New(cfg, Replica{Writer: f, State: f, Leadership: f, Membership: m, Snapshots: f}, f, f)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now()
	b.view.Set("n2", NodeState{First: 100, Applied: 500, ReceivedAt: now}, nil)
	b.view.Set("n3", NodeState{First: 10, Applied: 400, ReceivedAt: now}, nil)
	for _, c := range []struct {
		index uint64
		want  string
	}{{50, "n3"}, {200, "n2"}, {450, "n2"}, {5, ""}, {600, ""}} {
		if got := b.holderVoter(c.index); got != c.want {
			t.Errorf("holder of entry %d: %q, want %q", c.index, got, c.want)
		}
	}
	b.view.Set("n3", NodeState{First: 10, Applied: 400, ReceivedAt: now, Damaged: true}, nil)
	if got := b.holderVoter(50); got != "" {
		t.Errorf("a damaged holder was chosen: %q", got)
	}
	b.scheduleHandOver(200)
	b.scheduleHandOver(200) // within the period: no second attempt
	if len(m.to) != 1 || m.to[0] != "n2" {
		t.Fatalf("transfers %v, want one to n2", m.to)
	}
}
