package integration

// Request-reply and consumer group changes with the unmodified Go client
// (docs/rocketmq.md, "Request-reply" and "Consumer group changes").

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/raftmq/raftmq/namesrv"
	rmq "github.com/raftmq/raftmq/remoting"
)

func rmqCreateRouted(t *testing.T, c *procCluster, ns *namesrv.Server, topic string, queues int) {
	t.Helper()
	c.mustCLI("", "topic", "create", topic, "--queues", fmt.Sprint(queues), "-s", c.addrs())
	procWaitFor(t, 60*time.Second, topic+" registered with the name server", func() (bool, string) {
		g := ns.Groups()["raftmq"]
		if g == nil || g.Topics[topic] == 0 {
			return false, "no route for " + topic
		}
		return true, ""
	})
}

// rmqReplier is a push consumer of rmq-rpc that answers every request
// with "pong-" + its body, through send (by default the Go client's
// SendSync of the reply CreateReplyMessage built).
type rmqReplier struct {
	errs atomic.Int32
	last atomic.Value
}

func (r *rmqReplier) fail(err error) {
	r.errs.Add(1)
	r.last.Store(err.Error())
}

func (r *rmqReplier) String() string {
	return fmt.Sprintf("replier errors %d, last %v", r.errs.Load(), r.last.Load())
}

func (r *rmqReplier) start(t *testing.T, ns string, send func(ctx context.Context, reply *primitive.Message) error) {
	t.Helper()
	cons, err := consumer.NewPushConsumer(consumer.WithNameServer([]string{ns}), consumer.WithGroupName("rmq-rpc-cg"),
		consumer.WithInstance("replier-consumer"), consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = cons.Subscribe("rmq-rpc", consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			reply, err := consumer.CreateReplyMessage(m, nil)
			if err != nil {
				r.fail(err)
				continue
			}
			reply.Body = []byte("pong-" + string(m.Body))
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := send(sctx, reply); err != nil {
				r.fail(err)
			}
			cancel()
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Shutdown() })
}

// rmqRequester starts a requester (a producer) and waits until a first
// request is answered: the replier starts at the last offset and owns the
// queues only after its first rebalance, and the first request creates
// the reply topic. The replier's errors are reset then.
func rmqRequester(t *testing.T, ns string, r *rmqReplier) rocketmq.Producer {
	t.Helper()
	requester, err := rocketmq.NewProducer(producer.WithNameServer([]string{ns}), producer.WithGroupName("rmq-rpc-requester"),
		producer.WithInstanceName("requester"), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := requester.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { requester.Shutdown() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, err := requester.Request(ctx, 5*time.Second, primitive.NewMessage("rmq-rpc", []byte("warm-up")))
		if err == nil && string(m.Body) == "pong-warm-up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply to a first request within 60 s: %v (%v)", err, r)
		}
	}
	r.errs.Store(0)
	return requester
}

// rmqRequests sends n requests one at a time and checks each reply; it
// returns the round trips, sorted.
func rmqRequests(t *testing.T, requester rocketmq.Producer, n int, r *rmqReplier) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var took []time.Duration
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("ping-%d", i)
		start := time.Now()
		m, err := requester.Request(ctx, 10*time.Second, primitive.NewMessage("rmq-rpc", []byte(body)))
		if err != nil {
			t.Fatalf("request %s: %v (%v)", body, err, r)
		}
		took = append(took, time.Since(start))
		if string(m.Body) != "pong-"+body || m.GetProperty(primitive.PropertyCorrelationID) == "" || m.Topic != "DefaultCluster_REPLY_TOPIC" {
			t.Fatalf("reply to %s: %q topic %s props %v", body, m.Body, m.Topic, m.GetProperties())
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("request-reply round trip over %d requests: median %v, max %v", len(took), took[len(took)/2].Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond))
	return took
}

// rmqRepliesPushed is how many SEND_REPLY_MESSAGE node nd answered
// SUCCESS.
func rmqRepliesPushed(t *testing.T, nd *procNode) float64 {
	return rmqMetric(t, nd.HTTP, "raftmq_remoting_requests_total", `request="324"`, `response="0"`)
}

// A requester's Request and RequestAsync get the replies a replying
// consumer sends with CreateReplyMessage and the Go client's SendSync: the
// replier's sends go round-robin to the leader and the followers' write
// paths, and each is pushed to the requester's connection.
func TestRocketMQRequestReply(t *testing.T) {
	c, ns := rmqStartGroup(t)
	c.waitLeader("")
	rmqCreateRouted(t, c, ns, "rmq-rpc", 4)
	replier, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("rmq-rpc-replier"),
		producer.WithInstanceName("replier"), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := replier.Start(); err != nil {
		t.Fatal(err)
	}
	defer replier.Shutdown()
	var r rmqReplier
	r.start(t, ns.Addr(), func(ctx context.Context, reply *primitive.Message) error {
		_, err := replier.SendSync(ctx, reply)
		return err
	})
	requester := rmqRequester(t, ns.Addr(), &r)
	rmqRequests(t, requester, 24, &r)

	done := make(chan string, 1)
	err = requester.RequestAsync(context.Background(), 10*time.Second, func(ctx context.Context, m *primitive.Message, err error) {
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		done <- string(m.Body)
	}, primitive.NewMessage("rmq-rpc", []byte("async")))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got != "pong-async" {
			t.Fatalf("async reply %q", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no async reply within 15 s")
	}
	// The replier's sends went to more than one node (round-robin over the
	// leader and the write paths).
	nodes := 0
	for _, nd := range c.all() {
		n := rmqRepliesPushed(t, nd)
		t.Logf("node %s: %v replies pushed", nd.ID, n)
		if n > 0 {
			nodes++
		}
	}
	if nodes < 2 {
		t.Fatalf("replies reached %d node(s), want the leader and the write paths", nodes)
	}
	if n := r.errs.Load(); n != 0 {
		t.Fatalf("%d replies failed after the first request: %v", n, &r)
	}
}

// The requester and the replier on different nodes: without write paths a
// producer-only client (the requester) heartbeats only the leader (the Go
// client skips brokerIds other than 0 when it has no consumer), so only
// the leader holds its connection; the replies are sent to a follower
// (SEND_REPLY_MESSAGE built as the Go client builds it), which has the
// leader push them.
func TestRocketMQRequestReplyAcrossNodes(t *testing.T) {
	c, ns := rmqStartGroup(t, "--remoting-write-via-followers=false")
	leader := c.waitLeader("")
	rmqCreateRouted(t, c, ns, "rmq-rpc", 4)
	var follower *procNode
	for _, nd := range c.all() {
		if nd.ID != leader.ID {
			follower = nd
			break
		}
	}
	cl := rmq.NewClient()
	defer cl.Close()
	var r rmqReplier
	r.start(t, ns.Addr(), func(ctx context.Context, reply *primitive.Message) error {
		ext := map[string]string{"producerGroup": "rmq-rpc-replier", "topic": reply.Topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "0", "sysFlag": "0", "bornTimestamp": fmt.Sprint(time.Now().UnixMilli()), "flag": "0",
			"properties": reply.MarshallProperties(), "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
		resp, err := cl.Invoke(ctx, follower.Remoting, rmq.NewRequest(rmq.SendReplyMessage, ext, reply.Body))
		if err != nil {
			return err
		}
		if resp.Code != rmq.Success {
			return fmt.Errorf("reply answered %d %q", resp.Code, resp.Remark)
		}
		return nil
	})
	requester := rmqRequester(t, ns.Addr(), &r)
	rmqRequests(t, requester, 12, &r)
	if n := r.errs.Load(); n != 0 {
		t.Fatalf("%d replies failed after the first request: %v", n, &r)
	}
	if got := rmqRepliesPushed(t, follower); got < 12 {
		t.Fatalf("the follower answered %v replies SUCCESS, want the 12 requests' at least", got)
	}
	if got := rmqRepliesPushed(t, leader); got != 0 {
		t.Fatalf("the leader received %v replies itself; want them all through the follower", got)
	}
	if got := rmqMetric(t, follower.HTTP, "raftmq_remoting_replies_total", `result="via_peer"`); got < 12 {
		t.Fatalf("the follower had %v replies pushed by another node, want the 12 requests' at least", got)
	}
}

// rbDeliveries records each delivery: consumer, queue, time.
type rbDeliveries struct {
	mu  sync.Mutex
	log []rbDelivery
}

type rbDelivery struct {
	who   string
	queue int
	body  string
	at    time.Time
}

func (d *rbDeliveries) consumer(t *testing.T, ns, group, instance, topic string) rocketmqStopper {
	t.Helper()
	c, err := consumer.NewPushConsumer(consumer.WithNameServer([]string{ns}), consumer.WithGroupName(group), consumer.WithInstance(instance),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromLastOffset), consumer.WithConsumerModel(consumer.Clustering))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, m := range msgs {
			d.log = append(d.log, rbDelivery{who: instance, queue: m.Queue.QueueId, body: string(m.Body), at: time.Now()})
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// A second push consumer joining a group: it receives messages at once,
// and the first consumer stops taking the queues the second took within
// moments (the broker's NOTIFY_CONSUMER_IDS_CHANGED makes it rebalance),
// not at its 20 s rebalance timer. RAFTMQ_RMQ_RB_WATCH sets how long the
// queues are watched after the second consumer starts (default 10 s).
func TestRocketMQSecondConsumerRebalance(t *testing.T) {
	watch := 10 * time.Second
	if v := os.Getenv("RAFTMQ_RMQ_RB_WATCH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		watch = d
	}
	c, ns := rmqStartGroup(t)
	c.waitLeader("")
	rmqCreateRouted(t, c, ns, "rmq-rb", 4)
	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("rmq-rb-pg"),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // about 50 a second, round-robin over the 4 queues
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			p.SendSync(ctx, primitive.NewMessage("rmq-rb", []byte(fmt.Sprintf("m-%d", i))))
			cancel()
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	var d rbDeliveries
	c1 := d.consumer(t, ns.Addr(), "rmq-rb-cg", "first", "rmq-rb")
	defer c1.Shutdown()
	// The first consumer keeps up with every queue.
	procWaitFor(t, 90*time.Second, "the first consumer receives every queue", func() (bool, string) {
		d.mu.Lock()
		defer d.mu.Unlock()
		qs := map[int]bool{}
		for _, x := range d.log {
			if time.Since(x.at) < 2*time.Second {
				qs[x.queue] = true
			}
		}
		return len(qs) == 4, fmt.Sprintf("queues in the last 2 s: %v", qs)
	})
	start := time.Now()
	c2 := d.consumer(t, ns.Addr(), "rmq-rb-cg", "second", "rmq-rb")
	started := time.Since(start)
	time.Sleep(watch)

	d.mu.Lock()
	var first2 time.Time
	second := map[int]bool{} // queues the second consumer has in the last 3 s of the watch
	for _, x := range d.log {
		if x.who == "second" {
			if first2.IsZero() {
				first2 = x.at
			}
			if x.at.After(start.Add(watch - 3*time.Second)) {
				second[x.queue] = true
			}
		}
	}
	var handover time.Time // the first consumer's last delivery from a queue the second took
	dups := 0
	seen := map[string]int{}
	for _, x := range d.log {
		if x.at.After(start) {
			if seen[x.body]++; seen[x.body] == 2 {
				dups++
			}
			if x.who == "first" && second[x.queue] && x.at.After(handover) {
				handover = x.at
			}
		}
	}
	d.mu.Unlock()
	if first2.IsZero() {
		t.Fatalf("the second consumer received nothing in %v", watch)
	}
	if len(second) == 0 || len(second) == 4 {
		t.Fatalf("the second consumer holds queues %v at the end of the watch; want some, not all", second)
	}
	firstMsg := first2.Sub(start)
	moved := time.Duration(0)
	if !handover.IsZero() {
		moved = handover.Sub(start)
	}
	t.Logf("second consumer: Start returned after %v, first message %v after Start was called; it holds queues %v; the first consumer's last message from them %v after that (0: none after); %d messages delivered twice after it",
		started.Round(time.Millisecond), firstMsg.Round(time.Millisecond), keysOf(second), moved.Round(time.Millisecond), dups)
	if firstMsg > 5*time.Second {
		t.Errorf("the second consumer's first message came %v after its start, want < 5 s", firstMsg)
	}
	if moved > 5*time.Second {
		t.Errorf("the first consumer still took the second's queues %v after its start, want < 5 s (the broker's notification)", moved)
	}

	// The second leaves (Shutdown closes its connections): the first takes
	// its queues back.
	left := time.Now()
	c2.Shutdown()
	back := map[int]time.Duration{}
	for time.Since(left) < watch+5*time.Second && len(back) < len(second) {
		time.Sleep(50 * time.Millisecond)
		d.mu.Lock()
		for _, x := range d.log {
			if x.who == "first" && second[x.queue] && x.at.After(left) {
				if _, ok := back[x.queue]; !ok {
					back[x.queue] = x.at.Sub(left)
				}
			}
		}
		d.mu.Unlock()
	}
	var slowest time.Duration
	for _, q := range back {
		slowest = max(slowest, q)
	}
	t.Logf("second consumer left: the first consumer took back %d of its %d queues, the last %v after Shutdown was called", len(back), len(second), slowest.Round(time.Millisecond))
	if len(back) < len(second) || slowest > 5*time.Second {
		t.Errorf("the first consumer took back %d of the %d queues of the consumer that left, the last after %v; want all within 5 s", len(back), len(second), slowest)
	}
}

func keysOf(m map[int]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, fmt.Sprint(k))
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}
