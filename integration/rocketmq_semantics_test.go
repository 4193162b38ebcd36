package integration

// What a RocketMQ push consumer needs beyond pull and offsets, through the
// unmodified Go client against a real 3-process group and a name server:
// consume-later with send-back (CONSUMER_SEND_MSG_BACK) and its delay
// levels, the dead-letter step after the max reconsume times, delayed
// sends, and an orderly push consumer (LOCK_BATCH_MQ).

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/remoting"
)

// rmqDelivery is one handing of a message to a consumer.
type rmqDelivery struct {
	at        time.Time
	topic     string
	reconsume int32
	queue     int
}

type rmqDeliveries struct {
	mu sync.Mutex
	by map[string][]rmqDelivery // body -> deliveries in order
}

func (d *rmqDeliveries) add(m *primitive.MessageExt) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.by == nil {
		d.by = map[string][]rmqDelivery{}
	}
	b := string(m.Body)
	d.by[b] = append(d.by[b], rmqDelivery{at: time.Now(), topic: m.Topic, reconsume: m.ReconsumeTimes, queue: m.Queue.QueueId})
}

func (d *rmqDeliveries) of(body string) []rmqDelivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]rmqDelivery(nil), d.by[body]...)
}

func rmqStartPush(t *testing.T, ns, group string, opts []consumer.Option, topic string, handler func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)) rocketmqStopper {
	t.Helper()
	opts = append([]consumer.Option{consumer.WithNameServer([]string{ns}), consumer.WithGroupName(group), consumer.WithInstance(group),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithConsumerModel(consumer.Clustering)}, opts...)
	c, err := consumer.NewPushConsumer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{}, handler); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return c
}

func TestRocketMQSemantics(t *testing.T) {
	c, ns := rmqStartGroup(t)
	leader := c.waitLeader("")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	c.mustCLI("", "topic", "create", "rmq-sem-retry", "--queues", "1", "-s", c.addrs())
	c.mustCLI("", "topic", "create", "rmq-sem-delay", "--queues", "1", "-s", c.addrs())
	c.mustCLI("", "topic", "create", "rmq-sem-ordered", "--queues", "2", "-s", c.addrs())
	// The groups' retry topics are created on their first heartbeat; this
	// one comes before the consumers start, so that their first route
	// query finds them (otherwise their next one, within 30 s, would).
	var sets []any
	for _, g := range []string{"sem-retry", "sem-delay", "sem-ordered"} {
		sets = append(sets, map[string]any{"groupName": g, "messageModel": "CLUSTERING"})
	}
	hb, _ := json.Marshal(map[string]any{"clientID": "warmup@1", "consumerDataSet": sets})
	rcl := remoting.NewClient()
	defer rcl.Close()
	if r, err := rcl.Invoke(ctx, leader.Remoting, remoting.NewRequest(remoting.HeartBeat, nil, hb)); err != nil || r.Code != remoting.Success {
		t.Fatalf("heartbeat: %v %+v", err, r)
	}
	// The warm-up client leaves at once: a member of its groups would be
	// given half of their queues by the consumers' rebalance.
	if r, err := rcl.Invoke(ctx, leader.Remoting, remoting.NewRequest(remoting.UnregisterClient, map[string]string{"clientID": "warmup@1"}, nil)); err != nil || r.Code != remoting.Success {
		t.Fatalf("unregister: %v %+v", err, r)
	}
	procWaitFor(t, 60*time.Second, "topics registered with the name server", func() (bool, string) {
		g := ns.Groups()["raftmq"]
		if g == nil {
			return false, "no route"
		}
		for _, tp := range []string{"rmq-sem-retry", "rmq-sem-delay", "rmq-sem-ordered", "%RETRY%sem-retry", "%RETRY%sem-delay", "%RETRY%sem-ordered"} {
			if g.Topics[tp] == 0 {
				return false, fmt.Sprintf("%s missing from %v", tp, g.Topics)
			}
		}
		return true, ""
	})

	// Consume later, always: with a limit of 2 the message is handed three
	// times (reconsume 0, 1, 2: levels 3 and 4, 10 s and 30 s later), then
	// dead-lettered.
	var retried rmqDeliveries
	rmqStartPush(t, ns.Addr(), "sem-retry", []consumer.Option{consumer.WithMaxReconsumeTimes(2)}, "rmq-sem-retry",
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				retried.add(m)
			}
			return consumer.ConsumeRetryLater, nil
		})
	// Delayed sends.
	var delayed rmqDeliveries
	rmqStartPush(t, ns.Addr(), "sem-delay", nil, "rmq-sem-delay", func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			delayed.add(m)
		}
		return consumer.ConsumeSuccess, nil
	})
	// Orderly: needs the queue locks.
	var ordered rmqDeliveries
	var orderMu sync.Mutex
	orderSeen := map[int][]int{} // queue -> sequence numbers in delivery order
	rmqStartPush(t, ns.Addr(), "sem-ordered", []consumer.Option{consumer.WithConsumerOrder(true)}, "rmq-sem-ordered",
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			orderMu.Lock()
			defer orderMu.Unlock()
			for _, m := range msgs {
				ordered.add(m)
				var q, n int
				fmt.Sscanf(string(m.Body), "q%d-%d", &q, &n)
				orderSeen[m.Queue.QueueId] = append(orderSeen[m.Queue.QueueId], n)
			}
			return consumer.ConsumeSuccess, nil
		})

	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("sem-pg"), producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second), producer.WithQueueSelector(producer.NewManualQueueSelector()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	// Each message to the queue it names (the manual selector).
	onQueue := func(m *primitive.Message, q int) *primitive.Message {
		m.Queue = &primitive.MessageQueue{Topic: m.Topic, BrokerName: "raftmq", QueueId: q}
		return m
	}
	var lastSend *primitive.SendResult
	send := func(m *primitive.Message) time.Time {
		t.Helper()
		at := time.Now()
		r, err := p.SendSync(ctx, m)
		if err != nil || r.Status != primitive.SendOK {
			t.Fatalf("send %s: %+v %v", m.Body, r, err)
		}
		lastSend = r
		return at
	}
	retrySent := send(onQueue(primitive.NewMessage("rmq-sem-retry", []byte("retry-0")), 0))
	retryMsgID := lastSend.OffsetMsgID
	delaySent := send(onQueue(primitive.NewMessage("rmq-sem-delay", []byte("level-2")).WithDelayTimeLevel(2), 0))
	timedAt := time.Now().Add(3 * time.Second)
	send(onQueue(primitive.NewMessage("rmq-sem-delay", []byte("timed")).WithDelayTimestamp(timedAt), 0))
	const perQueue = 20
	for i := 0; i < perQueue; i++ {
		for q := 0; q < 2; q++ {
			send(onQueue(primitive.NewMessage("rmq-sem-ordered", []byte(fmt.Sprintf("q%d-%d", q, i))), q))
		}
	}

	// View by id (VIEW_MESSAGE_BY_ID, as Java's viewMessage sends it): the
	// send's offsetMsgId names a node and the physical offset; the node
	// answers the message in the pull layout.
	mid, err := primitive.UnmarshalMsgID([]byte(retryMsgID))
	if err != nil {
		t.Fatalf("offsetMsgId %s: %v", retryMsgID, err)
	}
	vr, err := rcl.Invoke(ctx, fmt.Sprintf("%s:%d", mid.Addr, mid.Port), remoting.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(mid.Offset, 10)}, nil))
	if err != nil || vr.Code != remoting.Success {
		t.Fatalf("view %s: %v %+v", retryMsgID, err, vr)
	}
	if ms, err := remoting.DecodeMessageExts(vr.Body); err != nil || len(ms) != 1 || string(ms[0].Body) != "retry-0" || ms[0].Topic != "rmq-sem-retry" || ms[0].PhysicalOffset != mid.Offset {
		t.Fatalf("view %s answered %+v (%v)", retryMsgID, ms, err)
	}

	// Delay level 2 (5 s): not handed over before, handed over after.
	procWaitFor(t, 60*time.Second, "the level-2 message consumed", func() (bool, string) { return len(delayed.of("level-2")) > 0, "" })
	if d := delayed.of("level-2")[0].at.Sub(delaySent); d < 4900*time.Millisecond {
		t.Errorf("the level-2 (5 s) message was consumed %v after its send", d)
	} else {
		t.Logf("level-2 message consumed %v after its send", d.Round(time.Millisecond))
	}
	procWaitFor(t, 60*time.Second, "the timed message consumed", func() (bool, string) { return len(delayed.of("timed")) > 0, "" })
	if at := delayed.of("timed")[0].at; at.Before(timedAt) {
		t.Errorf("the timed message was consumed %v before its delivery time", timedAt.Sub(at))
	}

	// Orderly: every message of each queue, in the order sent, once.
	procWaitFor(t, 90*time.Second, "the orderly consumer consumed both queues", func() (bool, string) {
		orderMu.Lock()
		defer orderMu.Unlock()
		return len(orderSeen[0]) >= perQueue && len(orderSeen[1]) >= perQueue, fmt.Sprintf("queue 0: %d, queue 1: %d", len(orderSeen[0]), len(orderSeen[1]))
	})
	orderMu.Lock()
	for q := 0; q < 2; q++ {
		got := orderSeen[q]
		inOrder := len(got) == perQueue
		for i := 0; inOrder && i < len(got); i++ {
			inOrder = got[i] == i
		}
		if !inOrder {
			t.Errorf("queue %d consumed in the order %v, want 0..%d once each", q, got, perQueue-1)
		}
	}
	orderMu.Unlock()
	// The locks are the broker's: another member cannot take them.
	lk, err := c.client().LockQueues(ctx, "sem-ordered", "intruder", []*api.QueueRef{{Topic: "rmq-sem-ordered", Queue: 0}, {Topic: "rmq-sem-ordered", Queue: 1}})
	if err != nil || len(lk.Locked) != 0 {
		t.Errorf("another member locked %v (%v) while the orderly consumer holds both queues", lk.GetLocked(), err)
	}

	// Consume later: back after ~10 s (level 3) with reconsume 1, after
	// ~30 s more (level 4) with reconsume 2, then a dead letter.
	cl := c.client()
	var dead []*api.Message
	procWaitFor(t, 150*time.Second, "the consume-later message in %DLQ%sem-retry", func() (bool, string) {
		dead, err = cl.ListDeadLetters(ctx, "sem-retry", 0)
		return err == nil && len(dead) > 0, fmt.Sprintf("%v; deliveries %+v", err, retried.of("retry-0"))
	})
	time.Sleep(3 * time.Second) // a fourth handing would come about now
	got := retried.of("retry-0")
	for i, d := range got {
		t.Logf("delivery %d: %s after the send, reconsume %d", i, d.at.Sub(retrySent).Round(time.Millisecond), d.reconsume)
	}
	if len(got) != 3 {
		t.Fatalf("handed over %d times, want 3 (max reconsume 2): %+v", len(got), got)
	}
	for i, d := range got {
		if d.reconsume != int32(i) || d.topic != "rmq-sem-retry" {
			t.Errorf("delivery %d: topic %s reconsume %d, want rmq-sem-retry and %d", i, d.topic, d.reconsume, i)
		}
	}
	if gap := got[1].at.Sub(got[0].at); gap < 9500*time.Millisecond || gap > 40*time.Second {
		t.Errorf("first redelivery %v after the first delivery, want about 10 s (level 3)", gap)
	}
	if gap := got[2].at.Sub(got[1].at); gap < 29500*time.Millisecond || gap > 70*time.Second {
		t.Errorf("second redelivery %v after the first, want about 30 s (level 4)", gap)
	}
	if len(dead) != 1 || string(dead[0].Body) != "retry-0" || dead[0].Properties[mq.PropRetryTopic] != "rmq-sem-retry" ||
		dead[0].Properties[mq.PropReconsumeTime] != "3" || dead[0].Properties[mq.PropDeadLetterReason] == "" {
		t.Errorf("dead letters %+v, want retry-0 once with RETRY_TOPIC rmq-sem-retry, RECONSUME_TIME 3 and a reason", dead)
	}
	// Through CONSUMER_SEND_MSG_BACK, not the client's SEND fallback.
	var sentBack, locked float64
	for _, n := range c.all() {
		sentBack += rmqMetric(t, n.HTTP, "raftmq_remoting_requests_total", `request="36"`, `response="0"`)
		locked += rmqMetric(t, n.HTTP, "raftmq_remoting_requests_total", `request="41"`, `response="0"`)
	}
	t.Logf("send-backs answered 0: %.0f; locks answered 0: %.0f", sentBack, locked)
	if sentBack < 3 {
		t.Errorf("%.0f send-backs answered SUCCESS, want 3 (two retries and the dead letter)", sentBack)
	}
	if locked < 1 {
		t.Errorf("no LOCK_BATCH_MQ answered SUCCESS")
	}
}
