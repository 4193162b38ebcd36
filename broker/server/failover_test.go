package server_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	hist "github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/servertest"
)

// history records what producers were told: counts for the test, and every
// send for internal/history's checker.
type history struct {
	mu      sync.Mutex
	acked   map[string]ackRec // body -> ack
	failed  int
	ackedAt []time.Time
	rec     *hist.Recorder
}

type ackRec struct {
	queue  int32
	offset uint64
}

func newHistory() *history {
	return &history{acked: map[string]ackRec{}, rec: hist.NewRecorder()}
}

func (h *history) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

var runs atomic.Int64

// runProducers sends numbered messages from n idempotent producers until
// stop is closed.
func runProducers(t *testing.T, cl *client.Client, topic string, n int, h *history, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	run := runs.Add(1)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p := cl.NewProducer()
			key := fmt.Sprintf("r%d-k%d", run, w)
			for seq := 0; seq < 100000; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("r%d-w%d-%06d", run, w, seq)
				msg := client.Message{Key: key, Body: []byte(body)}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				invoke := h.rec.Now()
				acks, err := p.Send(ctx, topic, msg)
				cancel()
				h.rec.AddOp(hist.Sent(fmt.Sprintf("r%d-w%d", run, w), uint64(seq), []client.Message{msg}, invoke, h.rec.Now(), acks, err))
				h.mu.Lock()
				if err != nil {
					h.failed++
				} else {
					h.acked[body] = ackRec{acks[0].Queue, acks[0].Offset}
					h.ackedAt = append(h.ackedAt, time.Now())
				}
				h.mu.Unlock()
			}
		}(w)
	}
	return &wg
}

// consumeAll reads every queue of topic from offset 0 up to the end offsets
// the leader reports, through the client's consumer pinned to all queues.
func consumeAll(t *testing.T, cl *client.Client, topic string, followerReads bool) ([]client.Record, *client.Consumer) {
	t.Helper()
	ctx := ctxT(t, 60*time.Second)
	ti, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]uint64{}
	cfg := client.DefaultConsumerConfig(topic, fmt.Sprintf("check-%d", time.Now().UnixNano()))
	for _, q := range ti.QueueInfo {
		end[q.Queue] = q.MaxOffset
		cfg.Queues = append(cfg.Queues, q.Queue)
	}
	cfg.FollowerReads = followerReads
	cfg.Wait = 100 * time.Millisecond
	cfg.MaxMessages = 64 // several pulls per queue, so suggestions are followed
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var all []client.Record
	for !cons.CaughtUp(end) {
		if ctx.Err() != nil {
			t.Fatalf("consume: not caught up (positions %v, end %v)", cons.Positions(), end)
		}
		recs, err := cons.Poll(ctx)
		if err != nil && !client.Retryable(err) {
			t.Fatalf("poll: %v", err)
		}
		all = append(all, recs...)
	}
	return all, cons
}

// checkHistory: every acknowledged message is in the log exactly once at
// its acknowledged place, nothing is duplicated, offsets are dense and each
// key's messages keep their send order (internal/history).
func checkHistory(t *testing.T, h *history, recs []client.Record) {
	t.Helper()
	if r := hist.CheckRead(h.rec, hist.LogOf(hist.Records(recs)), nil); !r.OK() {
		t.Errorf("the log does not match what producers were told: %s", r.Errors())
	}
}

func TestKillLeaderUnderLoad(t *testing.T) {
	c := servertest.New(t, 3, servertest.InMemory())
	l := c.Leader()
	cl := c.Client(t)
	if _, err := cl.CreateTopic(ctxT(t, 10*time.Second), "f", 4, false); err != nil {
		t.Fatal(err)
	}
	h := newHistory()
	stop := make(chan struct{})
	wg := runProducers(t, cl, "f", 4, h, stop)
	waitFor(t, 30*time.Second, "200 acks", func() bool { return h.count() >= 200 })
	c.Kill(l)
	nl := c.LeaderExcept(l)
	before := h.count()
	waitFor(t, 30*time.Second, "200 acks after the kill", func() bool { return h.count() >= before+200 })
	close(stop)
	wg.Wait()
	c.Restart(l)
	t.Logf("leader %d killed, new leader %d, %d acked, %d failed", l, nl, h.count(), h.failed)
	recs, _ := consumeAll(t, cl, "f", true)
	checkHistory(t, h, recs)
}

func TestPartitionedLeaderAcknowledgesNothing(t *testing.T) {
	c := servertest.New(t, 3, servertest.InMemory())
	l := c.Leader()
	ctx := ctxT(t, 60*time.Second)
	old := c.Node(l).Broker()
	if _, err := old.CreateTopic(ctx, "p", 1, false); err != nil {
		t.Fatal(err)
	}
	send := func(b *broker.Broker, body string, d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := b.Produce(ctx, broker.ProduceRequest{Topic: "p", Messages: []broker.ProduceMessage{{Body: []byte(body)}}})
		return err
	}
	for i := 0; i < 5; i++ {
		if _, err := produceTo(ctx, t, c, broker.ProduceRequest{Topic: "p", ProducerID: "pp", Seq: uint64(i),
			Messages: []broker.ProduceMessage{{Body: []byte(fmt.Sprintf("before-%d", i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	l = c.Leader()
	old = c.Node(l).Broker()
	c.Partition(l)
	if err := send(old, "minority", 2*time.Second); err == nil {
		t.Fatal("the partitioned leader acknowledged a write")
	}
	c.LeaderExcept(l)
	for i := 0; i < 5; i++ {
		if _, err := produceTo(ctx, t, c, broker.ProduceRequest{Topic: "p", ProducerID: "pa", Seq: uint64(i),
			Messages: []broker.ProduceMessage{{Body: []byte(fmt.Sprintf("after-%d", i))}}}); err != nil {
			t.Fatalf("write to the majority's leader: %v", err)
		}
	}
	// While cut off, the old leader serves only what it had committed.
	r, err := old.Pull(ctx, broker.PullRequest{Topic: "p", Queue: 0, Offset: 0, MaxMessages: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Messages {
		if string(m.Body) == "minority" {
			t.Fatal("the partitioned leader served an uncommitted message")
		}
	}
	c.Heal()
	// After healing every node holds the same queue.
	var want []string
	waitFor(t, 30*time.Second, "all nodes to hold the same queue", func() bool {
		var first []string
		for i := range c.Size() {
			r, err := c.Node(i).Broker().Pull(ctx, broker.PullRequest{Topic: "p", Queue: 0, Offset: 0, MaxMessages: 100})
			if err != nil {
				return false
			}
			var got []string
			for _, m := range r.Messages {
				got = append(got, string(m.Body))
			}
			if i == 0 {
				first = got
			} else if fmt.Sprint(got) != fmt.Sprint(first) {
				return false
			}
		}
		want = first
		return len(first) == 10
	})
	for _, b := range want {
		if b == "minority" {
			t.Fatal("an unacknowledged write from the minority survived")
		}
	}
}

func TestFollowerReadsWhenLeaderLoaded(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "r", 2, false); err != nil {
		t.Fatal(err)
	}
	h := newHistory()
	stop := make(chan struct{})
	wg := runProducers(t, cl, "r", 2, h, stop)
	waitFor(t, 30*time.Second, "300 acks", func() bool { return h.count() >= 300 })
	close(stop)
	wg.Wait()
	leaderID := c.Node(l).Node().ID()
	c.Node(l).Broker().SetLoadOverride(1)
	// Wait until the leader has heard from its followers.
	waitFor(t, 10*time.Second, "followers seen healthy", func() bool {
		st, err := c.Node(l).Broker().Status()
		if err != nil {
			return false
		}
		healthy := 0
		for _, n := range st.Nodes {
			if n.Healthy {
				healthy++
			}
		}
		return healthy == 3
	})
	recs, cons := consumeAll(t, cl, "r", true)
	checkHistory(t, h, recs)
	served := cons.ServedBy()
	if served[leaderID] == len(recs) {
		t.Fatalf("a loaded leader served every message itself: %v", served)
	}
	t.Logf("served by: %v", served)

	// A follower dies: reads carry on (from the other follower or the leader).
	for i := range c.Nodes() {
		if i != l {
			c.Kill(i)
			break
		}
	}
	stop = make(chan struct{})
	wg = runProducers(t, cl, "r", 2, h, stop)
	before := h.count()
	waitFor(t, 30*time.Second, "100 more acks", func() bool { return h.count() >= before+100 })
	close(stop)
	wg.Wait()
	recs, _ = consumeAll(t, cl, "r", true)
	checkHistory(t, h, recs)
}

func TestConsumerGroupBalancesQueues(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.Broker.HeartbeatInterval = 200 * time.Millisecond
		cfg.Broker.SessionTimeout = 2 * time.Second
	})
	c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 90*time.Second)
	if _, err := cl.CreateTopic(ctx, "g", 8, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	want := map[string]bool{}
	for i := 0; i < 200; i++ {
		body := fmt.Sprintf("m%d", i)
		if _, err := p.Send(ctx, "g", client.Message{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		want[body] = true
	}
	var mu sync.Mutex
	got := map[string]bool{}
	var cons []*client.Consumer
	stopAll := make(chan struct{})
	var wg sync.WaitGroup
	startConsumer := func() (*client.Consumer, chan struct{}) {
		cfg := client.DefaultConsumerConfig("g", "grp")
		cfg.Wait = 100 * time.Millisecond
		cn, err := cl.NewConsumer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-stopAll:
					return
				default:
				}
				recs, _ := cn.Poll(ctx)
				mu.Lock()
				for _, r := range recs {
					got[string(r.Body)] = true
				}
				mu.Unlock()
			}
		}()
		return cn, stop
	}
	var stops []chan struct{}
	for i := 0; i < 3; i++ {
		cn, st := startConsumer()
		cons = append(cons, cn)
		stops = append(stops, st)
	}
	balanced := func(cs []*client.Consumer, sizes string) bool {
		owner := map[int32]int{}
		var lens []int
		for i, cn := range cs {
			a := cn.Assigned()
			lens = append(lens, len(a))
			for _, q := range a {
				if _, dup := owner[q]; dup {
					return false
				}
				owner[q] = i
			}
		}
		sort.Ints(lens)
		return len(owner) == 8 && fmt.Sprint(lens) == sizes
	}
	waitFor(t, 30*time.Second, "3 members holding 8 queues as 2,3,3", func() bool { return balanced(cons, "[2 3 3]") })
	waitFor(t, 30*time.Second, "all 200 messages consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(want)
	})
	// One member leaves: its queues move to the other two.
	close(stops[0])
	if err := cons[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "2 members holding 8 queues as 4,4", func() bool { return balanced(cons[1:], "[4 4]") })
	for i := 200; i < 300; i++ {
		body := fmt.Sprintf("m%d", i)
		if _, err := p.Send(ctx, "g", client.Message{Body: []byte(body)}); err != nil {
			t.Fatal(err)
		}
		want[body] = true
	}
	waitFor(t, 30*time.Second, "all 300 messages consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(want)
	})
	close(stopAll)
	wg.Wait()
	for _, cn := range cons[1:] {
		cn.Close(ctx)
	}
}

func TestRestartAllNodesKeepsEverything(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	ctx := ctxT(t, 60*time.Second)
	b := c.Node(l).Broker()
	if _, err := b.CreateTopic(ctx, "d", 2, false); err != nil {
		t.Fatal(err)
	}
	var first broker.ProduceResult
	for i := 0; i < 50; i++ {
		res, err := c.produce(ctx, broker.ProduceRequest{Topic: "d", ProducerID: "px", Seq: uint64(i),
			Messages: []broker.ProduceMessage{{Key: "k", Body: []byte(fmt.Sprintf("m%d", i))}}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 7 {
			first = res
		}
	}
	for i := range c.Nodes() {
		c.stop(i, i%2 == 0) // some crash, some stop gracefully
	}
	for i := range c.Nodes() {
		c.Restart(i)
	}
	// The dedupe table survived: a late retry of sequence 7 is not appended again.
	res, err := c.produce(ctx, broker.ProduceRequest{Topic: "d", ProducerID: "px", Seq: 7,
		Messages: []broker.ProduceMessage{{Key: "k", Body: []byte("m7")}}})
	if err != nil || !res.Duplicate || res.Acks[0] != first.Acks[0] {
		t.Fatalf("retry after restart: %+v %v (first %+v)", res, err, first)
	}
	q := int32(first.Acks[0].Queue)
	for i, s := range c.Nodes() {
		waitFor(t, 20*time.Second, fmt.Sprintf("node %d to serve all 50", i), func() bool {
			r, err := s.Broker().Pull(ctx, broker.PullRequest{Topic: "d", Queue: q, MaxMessages: 100})
			return err == nil && len(r.Messages) == 50
		})
	}
}

// TestRetryOnNewLeaderGetsSameAcks is the regression test for the chaos
// campaign's "ack-position" finding: a retried request without keys went to
// a new leader, whose round robin picked other queues than the first
// attempt; the group (rightly) answered "duplicate" with the first attempt's
// offsets, and the acks paired them with the wrong queues.
func TestRetryOnNewLeaderGetsSameAcks(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	ctx := ctxT(t, 60*time.Second)
	if _, err := c.Node(l).Broker().CreateTopic(ctx, "rr", 4, false); err != nil {
		t.Fatal(err)
	}
	req := broker.ProduceRequest{Topic: "rr", ProducerID: "retrier", Seq: 42}
	for i := 0; i < 7; i++ {
		req.Messages = append(req.Messages, broker.ProduceMessage{Body: []byte(fmt.Sprintf("m%d", i))})
	}
	first, err := c.produce(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// Move leadership, and move the new leader's round-robin counter on.
	if _, _, err := c.Node(l).Broker().TransferLeader(ctx, ""); err != nil {
		t.Fatal(err)
	}
	nl := c.LeaderExcept(l)
	if _, err := c.Node(nl).Broker().Produce(ctx, broker.ProduceRequest{Topic: "rr",
		Messages: []broker.ProduceMessage{{Body: []byte("other")}}}); err != nil {
		t.Fatal(err)
	}
	again, err := c.produce(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate {
		t.Fatal("the retry was appended again")
	}
	if fmt.Sprint(again.Acks) != fmt.Sprint(first.Acks) {
		t.Fatalf("retry acks %v differ from the first acks %v", again.Acks, first.Acks)
	}
	// And the acks point at the messages.
	for i, a := range first.Acks {
		r, err := c.Node(nl).Broker().Pull(ctx, broker.PullRequest{Topic: "rr", Queue: int32(a.Queue), Offset: a.Offset, MaxMessages: 1})
		if err != nil || len(r.Messages) != 1 || string(r.Messages[0].Body) != fmt.Sprintf("m%d", i) || r.Messages[0].ID != a.ID() {
			t.Fatalf("ack %d %+v does not point at m%d: %+v %v", i, a, i, r.Messages, err)
		}
	}
}
