package server_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// delivered watches a topic through whichever node leads and records, per
// staged id (the STAGED_ID property of a delivered copy), every copy seen
// and when the first was seen.
type delivered struct {
	mu     sync.Mutex
	copies map[string][]broker.Message
	seen   map[string]time.Time
	next   map[int32]uint64
}

func newDelivered() *delivered {
	return &delivered{copies: map[string][]broker.Message{}, seen: map[string]time.Time{}, next: map[int32]uint64{}}
}

// poll reads every queue of topic from where it stopped, on b.
func (d *delivered) poll(t *testing.T, b *broker.Broker, topic string, queues int32) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for q := int32(0); q < queues; q++ {
		r, err := b.Pull(context.Background(), broker.PullRequest{Topic: topic, Queue: q, Offset: d.next[q], MaxMessages: 1000})
		if err != nil || r.Status != broker.PullFound {
			continue
		}
		now := time.Now()
		for _, m := range r.Messages {
			id := m.Properties[mq.PropStagedID]
			if id == "" {
				t.Errorf("delivered message %s/%d@%d has no %s property: %v", topic, q, m.Offset, mq.PropStagedID, m.Properties)
				continue
			}
			for _, p := range []string{mq.PropDelay, mq.PropTimerDeliverMS, mq.PropRealTopic, mq.PropRealQueue, mq.PropSchedulePopMS} {
				if _, ok := m.Properties[p]; ok {
					t.Errorf("delivered message %s keeps the staging property %s", id, p)
				}
			}
			if _, ok := d.seen[id]; !ok {
				d.seen[id] = now
			}
			d.copies[id] = append(d.copies[id], m)
			d.next[q] = m.Offset + 1
		}
	}
}

func (d *delivered) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}

// watch polls every 20 ms until stop is closed; the leader is looked up on
// every round, so it goes on across leader changes and restarts.
func (d *delivered) watch(t *testing.T, c *servertest.Cluster, topic string, queues int32, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for i := 0; i < c.Size(); i++ {
				if n := c.Node(i); n != nil && n.Broker().Readiness() == nil && n.Node().Ready() {
					d.poll(t, n.Broker(), topic, queues)
					break
				}
			}
		}
	}()
	return &wg
}

// check asserts that every expected staged id was delivered exactly once,
// not before its time and at most late after it, with its body.
func (d *delivered) check(t *testing.T, want map[string]sentDelayed, late time.Duration) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, s := range want {
		cp := d.copies[id]
		if len(cp) != 1 {
			t.Errorf("message %s (%s): %d delivered copies, want 1", id, s.body, len(cp))
			continue
		}
		if string(cp[0].Body) != s.body || cp[0].Key != s.key {
			t.Errorf("message %s: delivered body %q key %q, sent %q %q", id, cp[0].Body, cp[0].Key, s.body, s.key)
		}
		if cp[0].Queue != s.queue {
			t.Errorf("message %s: delivered to queue %d, its ack said %d", id, cp[0].Queue, s.queue)
		}
		seen := d.seen[id]
		if seen.Before(s.at) {
			t.Errorf("message %s: seen at %s, before its delivery time %s", id, seen.Format(time.StampMilli), s.at.Format(time.StampMilli))
		}
		due := s.at
		if due.Before(s.sent) {
			due = s.sent
		}
		if seen.Sub(due) > late {
			t.Errorf("message %s: seen %s after it was due, more than %s", id, seen.Sub(due), late)
		}
	}
	if len(d.copies) != len(want) {
		t.Errorf("%d staged ids delivered, %d sent", len(d.copies), len(want))
	}
}

type sentDelayed struct {
	body, key string
	queue     int32
	at        time.Time // the delivery time its ack named
	sent      time.Time // when Send returned: a time already past is due then
}

// sendDelayed sends msgs through the SDK and records what each ack says.
func sendDelayed(t *testing.T, p *client.Producer, topic string, msgs []client.Message, into map[string]sentDelayed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acks, err := p.Send(ctx, topic, msgs...)
	if err != nil {
		t.Fatalf("send delayed: %v", err)
	}
	for i, a := range acks {
		if a.Offset != 0 || a.DeliverAtMs == 0 {
			t.Fatalf("ack of a delayed message: %+v, want offset 0 and a delivery time", a)
		}
		into[a.Id] = sentDelayed{body: string(msgs[i].Body), key: msgs[i].Key, queue: a.Queue, at: client.AckDeliverAt(a), sent: time.Now()}
	}
}

// TestDelayedMessagesDeliveredOnTime: delay levels and delivery times each
// appear once in their topic, not before their time and within bounds after
// it; a time already past is delivered at once; until then the topic holds
// nothing and a lookup says pending, afterwards it names the copy.
func TestDelayedMessagesDeliveredOnTime(t *testing.T) {
	c := servertest.New(t, 3)
	l := c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "dl", 2, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	want := map[string]sentDelayed{}
	start := time.Now()
	var msgs []client.Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, client.Message{Key: fmt.Sprintf("k%d", i), Body: []byte(fmt.Sprintf("level1-%d", i)), DelayLevel: 1})
	}
	sendDelayed(t, p, "dl", msgs, want)
	sendDelayed(t, p, "dl", []client.Message{{Body: []byte("level2"), DelayLevel: 2}}, want)
	msgs = nil
	for i := 0; i < 10; i++ {
		msgs = append(msgs, client.Message{Body: []byte(fmt.Sprintf("at-%d", i)), DeliverAt: start.Add(1500*time.Millisecond + time.Duration(i)*137*time.Millisecond)})
	}
	sendDelayed(t, p, "dl", msgs, want)
	sendDelayed(t, p, "dl", []client.Message{{Body: []byte("past"), DeliverAt: start.Add(-time.Hour)}}, want)
	sendDelayed(t, p, "dl", []client.Message{{Body: []byte("odd"), DeliverAt: start.Add(3*time.Second + 333*time.Millisecond)}}, want)
	for id, s := range want {
		if s.body == "level2" && (s.at.Before(start.Add(5*time.Second)) || s.at.After(time.Now().Add(5*time.Second))) {
			t.Errorf("level 2 ack %s: delivery time %s, want 5s after the send", id, s.at)
		}
	}

	// Before their time: nothing of the later ones is visible, a lookup
	// says pending with the ack's time.
	b := c.Node(l).Broker()
	var later string
	for id, s := range want {
		if s.body == "level2" {
			later = id
		}
	}
	lk, ok, err := b.LookupStaged(later)
	if err != nil || !ok || !lk.Pending || lk.DeliverAt != want[later].at.UnixMilli() || lk.Message.Topic != "dl" || string(lk.Message.Body) != "level2" {
		t.Fatalf("lookup of a pending message: %+v %v %v", lk, ok, err)
	}

	d := newDelivered()
	stop := make(chan struct{})
	wg := d.watch(t, c, "dl", 2, stop)
	waitFor(t, 60*time.Second, "every delayed message delivered", func() bool { return d.count() == len(want) })
	time.Sleep(time.Second) // a second copy would show now
	close(stop)
	wg.Wait()
	d.poll(t, b, "dl", 2)
	d.check(t, want, 5*time.Second)

	lk, ok, err = b.LookupStaged(later)
	if err != nil || !ok || lk.Pending || lk.Message.Topic != "dl" || lk.Message.Properties[mq.PropStagedID] != later {
		t.Fatalf("lookup of a delivered message: %+v %v %v", lk, ok, err)
	}
	cp := d.copies[later][0]
	if lk.Message.ID != cp.ID || lk.Message.Offset != cp.Offset || lk.Message.Queue != cp.Queue {
		t.Fatalf("lookup names %s %d@%d, the copy is %s %d@%d", lk.Message.ID, lk.Message.Queue, lk.Message.Offset, cp.ID, cp.Queue, cp.Offset)
	}
	// A timed message went through several schedule queues; one sent with a
	// time already past through none: both are found by the id of the ack.
	for id, s := range want {
		if !strings.HasPrefix(s.body, "at-") && s.body != "past" {
			continue
		}
		lk, ok, err := b.LookupStaged(id)
		cp := d.copies[id][0]
		if err != nil || !ok || lk.Pending || lk.Message.ID != cp.ID || lk.Message.Offset != cp.Offset || lk.DeliverAt != s.at.UnixMilli() {
			t.Fatalf("lookup of delivered %s (%s): %+v %v %v; the copy is %s@%d", id, s.body, lk, ok, err, cp.ID, cp.Offset)
		}
	}
	// The leader counted each delivery once, and nothing waits any more.
	mfs, err := b.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	figures := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetCounter() != nil {
				figures[mf.GetName()] = m.GetCounter().GetValue()
			} else if m.GetGauge() != nil {
				figures[mf.GetName()] = m.GetGauge().GetValue()
			}
		}
	}
	if figures["raftmq_delayed_delivered_total"] != float64(len(want)) || figures["raftmq_delayed_waiting"] != 0 || figures["raftmq_delayed_restaged_total"] == 0 {
		t.Fatalf("metrics: delivered %v waiting %v restaged %v, want %d, 0 and some",
			figures["raftmq_delayed_delivered_total"], figures["raftmq_delayed_waiting"], figures["raftmq_delayed_restaged_total"], len(want))
	}
	if _, ok, err := b.LookupStaged(cp.ID); ok || err != nil {
		t.Fatalf("lookup of an ordinary message as staged: %v %v", ok, err)
	}
}

// TestDelayedSurvivesLeaderKill: a leader killed between send and
// delivery, while it delivers a burst due at one moment (some deliveries
// applied, some in flight); the new leader delivers everything once.
func TestDelayedSurvivesLeaderKill(t *testing.T) {
	c := servertest.New(t, 3)
	l := c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "dk", 3, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	want := map[string]sentDelayed{}
	start := time.Now()
	for i := 0; i < 40; i++ {
		m := client.Message{Body: []byte(fmt.Sprintf("m%d", i)), DeliverAt: start.Add(500*time.Millisecond + time.Duration(i)*100*time.Millisecond)}
		if i%4 == 0 {
			m = client.Message{Body: []byte(fmt.Sprintf("m%d", i)), DelayLevel: 1 + i%3}
		}
		sendDelayed(t, p, "dk", []client.Message{m}, want)
	}
	burstAt := time.Now().Add(3 * time.Second)
	for i := 0; i < 30; i++ {
		var msgs []client.Message
		for j := 0; j < 100; j++ {
			msgs = append(msgs, client.Message{Body: []byte(fmt.Sprintf("burst%d-%d", i, j)), DeliverAt: burstAt})
		}
		sendDelayed(t, p, "dk", msgs, want)
	}
	d := newDelivered()
	stop := make(chan struct{})
	wg := d.watch(t, c, "dk", 3, stop)
	waitFor(t, 30*time.Second, "the burst to start", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for id := range d.seen {
			if strings.HasPrefix(want[id].body, "burst") {
				return true
			}
		}
		return false
	})
	c.Kill(l)
	t.Logf("killed the leader with %d of %d messages seen delivered", d.count(), len(want))
	c.LeaderExcept(l)
	waitFor(t, 60*time.Second, "every delayed message delivered", func() bool { return d.count() == len(want) })
	c.Restart(l)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	d.check(t, want, 15*time.Second)
}

// TestDelayedSurvivesFullRestart: every node stops (some crash) between
// send and delivery, with a snapshot holding delivered cursors; after the
// restart everything is delivered once.
func TestDelayedSurvivesFullRestart(t *testing.T) {
	c := servertest.New(t, 3)
	c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "dr", 2, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	want := map[string]sentDelayed{}
	start := time.Now()
	for i := 0; i < 20; i++ {
		sendDelayed(t, p, "dr", []client.Message{{Body: []byte(fmt.Sprintf("early%d", i)), DeliverAt: start.Add(300 * time.Millisecond)}}, want)
	}
	for i := 0; i < 20; i++ {
		sendDelayed(t, p, "dr", []client.Message{{Body: []byte(fmt.Sprintf("late%d", i)), DeliverAt: start.Add(4*time.Second + time.Duration(i)*50*time.Millisecond)}}, want)
	}
	sendDelayed(t, p, "dr", []client.Message{{Body: []byte("level3"), DelayLevel: 3}}, want)
	d := newDelivered()
	waitFor(t, 30*time.Second, "the early ones", func() bool {
		d.poll(t, c.Node(c.Leader()).Broker(), "dr", 2)
		return d.count() >= 20
	})
	for i := 0; i < c.Size(); i++ {
		if _, err := c.Node(i).Node().Snapshot(); err != nil {
			t.Fatalf("snapshot node %d: %v", i, err)
		}
	}
	for i := 0; i < c.Size(); i++ {
		if i == 1 {
			c.Kill(i)
		} else {
			c.Stop(i)
		}
	}
	time.Sleep(time.Second)
	for i := 0; i < c.Size(); i++ {
		c.Restart(i)
	}
	stop := make(chan struct{})
	wg := d.watch(t, c, "dr", 2, stop)
	waitFor(t, 60*time.Second, "every delayed message delivered", func() bool { return d.count() == len(want) })
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	d.check(t, want, 30*time.Second)

	// A delivery sent again (as by a leader that lost track of its first
	// attempt's outcome) is a no-op on every node.
	l := c.Leader()
	res, err := c.Node(l).Store().Produce([]*raftlog.Request{{ProducerID: store.ScheduleProducer(store.ScheduleIntakeQueue), Seq: 0, Topic: "dr",
		Messages: []raftlog.Message{{Queue: 0, Body: []byte("early0")}}}}, 0, 10*time.Second).Wait()
	if err != nil || !errors.Is(res[0].Err, store.ErrScheduleStale) {
		t.Fatalf("repeated delivery: %+v %v, want a stale no-op", res, err)
	}
	for i := 0; i < c.Size(); i++ {
		n := c.Node(i)
		waitFor(t, 30*time.Second, fmt.Sprintf("node %d to apply the repeat", i), func() bool { return n.Store().Applied() >= c.Node(l).Store().Applied() })
		ti, err := n.Broker().Topic("dr")
		if err != nil || ti.Queues[0].Max+ti.Queues[1].Max != uint64(len(want)) {
			t.Fatalf("node %d holds %+v (%v), want %d messages in all", i, ti, err, len(want))
		}
	}
}

// TestDelayedBadInput: each refusal is a clear error and stores nothing.
func TestDelayedBadInput(t *testing.T) {
	c := servertest.New(t, 3)
	b := c.Node(c.Leader()).Broker()
	ctx := ctxT(t, 60*time.Second)
	if _, err := b.CreateTopic(ctx, "db", 1, false); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	one := func(m broker.ProduceMessage) broker.ProduceRequest {
		return broker.ProduceRequest{Topic: "db", Messages: []broker.ProduceMessage{m}}
	}
	cases := map[string]broker.ProduceRequest{
		"level 19":          one(broker.ProduceMessage{Body: []byte("x"), DelayLevel: 19}),
		"level -1":          one(broker.ProduceMessage{Body: []byte("x"), DelayLevel: -1}),
		"both":              one(broker.ProduceMessage{Body: []byte("x"), DelayLevel: 2, DeliverAt: now.Add(time.Minute).UnixMilli()}),
		"too far":           one(broker.ProduceMessage{Body: []byte("x"), DeliverAt: now.Add(mq.DefaultMaxDelay + time.Hour).UnixMilli()}),
		"negative":          one(broker.ProduceMessage{Body: []byte("x"), DeliverAt: -5}),
		"end of time":       one(broker.ProduceMessage{Body: []byte("x"), DeliverAt: math.MaxInt64}),
		"huge level":        one(broker.ProduceMessage{Body: []byte("x"), DelayLevel: math.MaxInt}),
		"bad DELAY":         one(broker.ProduceMessage{Body: []byte("x"), Properties: map[string]string{mq.PropDelay: "soon"}}),
		"bad TIMER":         one(broker.ProduceMessage{Body: []byte("x"), Properties: map[string]string{mq.PropTimerDeliverMS: "tomorrow"}}),
		"DELAY and typed":   one(broker.ProduceMessage{Body: []byte("x"), DelayLevel: 2, Properties: map[string]string{mq.PropDelay: "4"}}),
		"schedule topic":    {Topic: mq.ScheduleTopic, Messages: []broker.ProduceMessage{{Body: []byte("x")}}},
		"reserved producer": {Topic: "db", ProducerID: "%SCHEDULE%3", Seq: 0, Messages: []broker.ProduceMessage{{Body: []byte("x"), DelayLevel: 1}}},
		"mixed":             {Topic: "db", Messages: []broker.ProduceMessage{{Body: []byte("x"), DelayLevel: 1}, {Body: []byte("y")}}},
	}
	for name, req := range cases {
		_, err := b.Produce(ctx, req)
		if !errors.Is(err, broker.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an invalid-argument error", name, err)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
	if ti, err := b.Topic("db"); err != nil || ti.Queues[0].Max != 0 {
		t.Fatalf("topic after refusals: %+v %v", ti, err)
	}
	if _, err := b.Topic(mq.ScheduleTopic); err == nil {
		t.Fatalf("the schedule topic exists after refusals only")
	}
	if _, err := b.Pull(ctx, broker.PullRequest{Topic: mq.ScheduleTopic}); !errors.Is(err, broker.ErrInvalidArgument) {
		t.Fatalf("pull of the schedule topic: %v", err)
	}
	if _, err := b.CreateTopic(ctx, mq.ScheduleTopic, 52, true); !errors.Is(err, broker.ErrInvalidArgument) {
		t.Fatalf("create of the schedule topic: %v", err)
	}
	// The DELAY property (RocketMQ clients, consume retry) is a delay
	// level; above the last level it waits the last level, as RocketMQ's.
	res, err := b.Produce(ctx, one(broker.ProduceMessage{Body: []byte("x"), Properties: map[string]string{mq.PropDelay: "1", "user": "u", mq.PropStagedID: "forged"}}))
	if err != nil || res.DeliverAt == nil || res.Acks[0].Offset != 0 {
		t.Fatalf("produce with DELAY=1: %+v %v", res, err)
	}
	waitFor(t, 30*time.Second, "the DELAY=1 message", func() bool {
		r, err := b.Pull(ctx, broker.PullRequest{Topic: "db"})
		return err == nil && len(r.Messages) == 1 && r.Messages[0].Properties["user"] == "u" && r.Messages[0].Properties[mq.PropStagedID] == res.Acks[0].ID()
	})
	res, err = b.Produce(ctx, one(broker.ProduceMessage{Body: []byte("x"), Properties: map[string]string{mq.PropDelay: "40"}}))
	if err != nil || time.Until(time.UnixMilli(res.DeliverAt[0])) < time.Hour {
		t.Fatalf("produce with DELAY=40: %+v %v, want the 2h level", res, err)
	}
}
