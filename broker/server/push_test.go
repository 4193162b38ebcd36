package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
)

// TestRetryAcrossLeaderKill: every message fails its first two deliveries;
// the leader is killed while the retries are under way. Every message is
// still consumed successfully in the end, none is dead-lettered, and each
// is seen at least three times (extra deliveries are allowed: at least
// once).
func TestRetryAcrossLeaderKill(t *testing.T) {
	c, cl := retryCluster(t)
	ctx := ctxT(t, 180*time.Second)
	const group, topic, n = "g-kill", "kill", 60
	if _, err := cl.CreateTopic(ctx, topic, 2, false); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := range n {
		bodies = append(bodies, fmt.Sprintf("k%02d", i))
	}
	produceBodies(ctx, t, cl, topic, -1, bodies...)
	d := newDeliveries()
	var slow sync.Once
	started := make(chan struct{})
	cfg := pushConfig(topic, group, d.handler(func(b string, n int32) bool {
		slow.Do(func() { close(started) })
		time.Sleep(20 * time.Millisecond) // spread the retries over the kill
		return n < 2
	}))
	var errMu sync.Mutex
	var errs []error
	cfg.OnError = func(err error) { errMu.Lock(); errs = append(errs, err); errMu.Unlock() }
	pc, err := cl.NewPushConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	<-started
	total := func() (seen, done int) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, s := range d.seen {
			seen += len(s)
		}
		return seen, len(d.ok)
	}
	waitUntil(t, 60*time.Second, "retries under way", func() bool { s, _ := total(); return s >= 20 })
	seen, done := total()
	if done == n {
		t.Fatalf("every message was done before the kill (%d deliveries)", seen)
	}
	l := c.Leader()
	t.Logf("killing leader n%d after %d deliveries, %d messages done", l+1, seen, done)
	c.Kill(l)
	time.Sleep(500 * time.Millisecond)
	c.Restart(l)
	waitUntil(t, 120*time.Second, "every message to succeed", func() bool {
		for _, b := range bodies {
			if d.succeeded(b) == 0 {
				return false
			}
		}
		return true
	})
	extra := 0
	for _, b := range bodies {
		got := d.counts(b)
		if len(got) < 3 {
			t.Errorf("%s seen %d times (%v), want at least 3", b, len(got), got)
		}
		extra += len(got) - 3
		for i, n := range got {
			if n > 2 {
				t.Errorf("%s delivery %d has reconsume count %d, above 2: %v", b, i, n, got)
			}
		}
	}
	if dlq := readAll(ctx, t, cl, mq.DeadLetterTopic(group)); len(dlq) != 0 {
		t.Errorf("%d dead letters, want none", len(dlq))
	}
	errMu.Lock()
	t.Logf("%d extra deliveries over %d messages; %d recovered errors", extra, n, len(errs))
	errMu.Unlock()
}

// TestConsumerDiesHoldingMessages: a member that dies while its handler
// holds messages commits nothing past them, so the member that takes its
// queues gets every one of them.
func TestConsumerDiesHoldingMessages(t *testing.T) {
	_, cl := retryCluster(t)
	ctx := ctxT(t, 120*time.Second)
	const group, topic = "g-die", "die"
	if _, err := cl.CreateTopic(ctx, topic, 4, false); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := range 40 {
		bodies = append(bodies, fmt.Sprintf("d%02d", i))
	}
	produceBodies(ctx, t, cl, topic, -1, bodies...)
	held := make(chan string, 100)
	var heldOnce sync.Once
	a, err := cl.NewPushConsumer(ctx, pushConfig(topic, group, func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			held <- string(m.Body)
		}
		heldOnce.Do(func() {})
		<-ctx.Done() // never finishes: the process dies holding it
		return client.ConsumeSuccess
	}))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "a to hold messages", func() bool { return len(held) >= 4 })
	a.Kill()
	d := newDeliveries()
	b, err := cl.NewPushConsumer(ctx, pushConfig(topic, group, d.handler(func(string, int32) bool { return false })))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	waitUntil(t, 60*time.Second, "b to consume every message", func() bool {
		for _, body := range bodies {
			if d.succeeded(body) == 0 {
				return false
			}
		}
		return true
	})
	close(held)
	for body := range held {
		if d.succeeded(body) == 0 {
			t.Errorf("%s, held by the dead member, never reached the next owner", body)
		}
	}
}

// orderLog records the order in which an orderly handler saw messages.
type orderLog struct {
	mu  sync.Mutex
	seq []string
}

func (o *orderLog) add(s string) { o.mu.Lock(); o.seq = append(o.seq, s); o.mu.Unlock() }
func (o *orderLog) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seq...)
}

// TestOrderlyBlocksQueue: in orderly mode a failing message blocks its
// queue: no later message of the queue is delivered before it succeeds, or,
// after max reconsume times, is dead-lettered; then the queue moves on.
func TestOrderlyBlocksQueue(t *testing.T) {
	_, cl := retryCluster(t)
	ctx := ctxT(t, 120*time.Second)
	const group, topic = "g-order", "order"
	if _, err := cl.CreateTopic(ctx, topic, 1, false); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := range 8 {
		bodies = append(bodies, fmt.Sprintf("o%d", i))
	}
	acks := produceBodies(ctx, t, cl, topic, 0, bodies...)
	var log orderLog
	cfg := pushConfig(topic, group, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			log.add(fmt.Sprintf("%s/%d", m.Body, m.ReconsumeTimes))
			if string(m.Body) == "o2" && m.ReconsumeTimes < 2 {
				return client.ConsumeRetryLater
			}
			if string(m.Body) == "o5" {
				return client.ConsumeRetryLater // always: dead-lettered after 3
			}
		}
		return client.ConsumeSuccess
	})
	cfg.Orderly = true
	cfg.SuspendTime = 100 * time.Millisecond
	cfg.MaxReconsumeTimes = 3
	pc, err := cl.NewPushConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	want := "[o0/0 o1/0 o2/0 o2/1 o2/2 o3/0 o4/0 o5/0 o5/1 o5/2 o5/3 o6/0 o7/0]"
	waitUntil(t, 60*time.Second, "o7", func() bool { s := log.get(); return len(s) > 0 && s[len(s)-1] == "o7/0" })
	time.Sleep(300 * time.Millisecond)
	if got := fmt.Sprint(log.get()); got != want {
		t.Errorf("orderly deliveries\n got %s\nwant %s", got, want)
	}
	dlq := readAll(ctx, t, cl, mq.DeadLetterTopic(group))
	if len(dlq) != 1 || string(dlq[0].Body) != "o5" || dlq[0].Properties[mq.PropOriginMessageID] != acks[5].Id {
		t.Errorf("dead letters %v, want o5 alone", dlq)
	}
	if retry := readAll(ctx, t, cl, mq.RetryTopic(group)); len(retry) != 0 {
		t.Errorf("orderly consumer sent %d messages to the retry topic, want none", len(retry))
	}
}

// TestOrderlyRebalanceNoOverlap: when a second orderly member joins and
// queues move to it, no queue is ever handled by two members at once (the
// previous owner unlocks only after its batch), every message is handled,
// and within a queue handling never goes backwards past a message already
// done except to replay from the committed offset after the move.
func TestOrderlyRebalanceNoOverlap(t *testing.T) { testOrderlyNoOverlap(t, false) }

// TestOrderlyLeaderKillNoOverlap: the same with the leader killed while
// both members consume: the locks are replicated, so a holder renews at
// the new leader at once and no other member is granted its queue, no
// queue is handled by two members at once, and every message is still
// handled.
func TestOrderlyLeaderKillNoOverlap(t *testing.T) { testOrderlyNoOverlap(t, true) }

func testOrderlyNoOverlap(t *testing.T, kill bool) {
	c, cl := retryCluster(t)
	ctx := ctxT(t, 120*time.Second)
	const group, topic, perQueue = "g-orb", "orb", 40
	if _, err := cl.CreateTopic(ctx, topic, 4, false); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	busy := map[int32]string{} // queue -> member handling it now
	done := map[string]bool{}
	handled := map[string]int{} // member -> batches
	var overlap []string
	handler := func(member string) client.Handler {
		return func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
			q := msgs[0].Queue
			mu.Lock()
			if other, ok := busy[q]; ok {
				overlap = append(overlap, fmt.Sprintf("queue %d: %s started while %s handled it", q, member, other))
			}
			busy[q] = member
			handled[member]++
			mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			mu.Lock()
			delete(busy, q)
			for _, m := range msgs {
				done[string(m.Body)] = true
			}
			mu.Unlock()
			return client.ConsumeSuccess
		}
	}
	orderly := func(member string) client.PushConfig {
		cfg := pushConfig(topic, group, handler(member))
		cfg.Orderly = true
		cfg.MemberID = member
		return cfg
	}
	var bodies []string
	for q := range int32(4) {
		var bs []string
		for i := range perQueue {
			bs = append(bs, fmt.Sprintf("q%d-%02d", q, i))
		}
		produceBodies(ctx, t, cl, topic, q, bs...)
		bodies = append(bodies, bs...)
	}
	a, err := cl.NewPushConsumer(ctx, orderly("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	waitUntil(t, 30*time.Second, "a to start", func() bool { mu.Lock(); defer mu.Unlock(); return len(done) > 10 })
	b, err := cl.NewPushConsumer(ctx, orderly("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if kill {
		waitUntil(t, 30*time.Second, "b to hold queues", func() bool { return len(b.Assigned()) > 0 })
		// A holder of another group, granted by the leader about to die.
		probe := []*api.QueueRef{{Topic: topic, Queue: 0}}
		if r, err := cl.LockQueues(ctx, group+"-probe", "holder", probe); err != nil || len(r.Locked) != 1 {
			t.Fatalf("probe lock before the kill: %v %v", r, err)
		}
		l := c.Leader()
		c.Kill(l)
		defer c.Restart(l)
		// The new leader knows the holder: its renewal is granted at once,
		// and another member is refused while the renewed lock lasts.
		sent := time.Now()
		if r, err := cl.LockQueues(ctx, group+"-probe", "holder", probe); err != nil || len(r.Locked) != 1 {
			t.Fatalf("the holder's renewal at the new leader: %v %v, want its lock kept", r, err)
		}
		renewed := time.Since(sent)
		r, err := cl.LockQueues(ctx, group+"-probe", "intruder", probe)
		if err != nil {
			t.Fatal(err)
		}
		if since := time.Since(sent); since < 2*time.Second && len(r.Locked) != 0 { // 2 s: the lease of retryCluster
			t.Errorf("another member was granted the holder's queue %v after the leader change (%v after the renewal)", r.Locked, since)
		}
		t.Logf("the holder renewed at the new leader %v after the kill", renewed)
	}
	waitUntil(t, 60*time.Second, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, body := range bodies {
			if !done[body] {
				return false
			}
		}
		return true
	})
	waitUntil(t, 30*time.Second, "both members to hold queues", func() bool { return len(a.Assigned()) > 0 && len(b.Assigned()) > 0 })
	mu.Lock()
	defer mu.Unlock()
	for _, o := range overlap {
		t.Error(o)
	}
	if handled["b"] == 0 && !kill {
		t.Errorf("b handled nothing (a %d batches): the queues never moved while messages were left", handled["a"])
	}
	t.Logf("batches handled: a %d, b %d", handled["a"], handled["b"])
}

// TestPushConsumerTags: a push consumer with a tag filter is handed only
// its tags, and its retries come back although the retry topic is read
// whole.
func TestPushConsumerTags(t *testing.T) {
	_, cl := retryCluster(t)
	ctx := ctxT(t, 60*time.Second)
	p := cl.NewProducer()
	for _, m := range []client.Message{{Tag: "A", Body: []byte("a1")}, {Tag: "B", Body: []byte("b1")}, {Tag: "A", Body: []byte("a2")}} {
		if _, err := p.Send(ctx, "tagged", m); err != nil {
			t.Fatal(err)
		}
	}
	d := newDeliveries()
	cfg := pushConfig("tagged", "g-tags", d.handler(func(b string, n int32) bool { return b == "a2" && n == 0 }))
	cfg.Tags = "A"
	pc, err := cl.NewPushConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	waitUntil(t, 30*time.Second, "a1 and the retried a2", func() bool { return d.succeeded("a1") == 1 && d.succeeded("a2") == 1 })
	time.Sleep(500 * time.Millisecond)
	if n := len(d.counts("b1")); n != 0 {
		t.Errorf("b1 (tag B) handed to a consumer of tag A %d times", n)
	}
	if got := fmt.Sprint(d.counts("a2")); got != "[0 1]" {
		t.Errorf("a2 delivered with counts %s, want [0 1]", got)
	}
}
