package server_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/mq"
)

// Tests of consume-retry, dead letters, lookup by id and the push
// consumer, on a real three-node group.

func retryCluster(t *testing.T) (*servertest.Cluster, *client.Client) {
	t.Helper()
	c := servertest.New(t, 3, servertest.InMemory(), servertest.Configure(func(_ int, cfg *server.Config) {
		cfg.Broker.SessionTimeout = 3 * time.Second
		cfg.Broker.HeartbeatInterval = 300 * time.Millisecond
		cfg.Broker.LockLease = 2 * time.Second
	}))
	c.Leader()
	return c, c.Client(t)
}

func produceBodies(ctx context.Context, t *testing.T, cl *client.Client, topic string, queue int32, bodies ...string) []*api.Ack {
	t.Helper()
	msgs := make([]client.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = client.Message{Body: []byte(b), Key: "k-" + b, Tag: "T", Properties: map[string]string{"app": b}}
		if queue >= 0 {
			q := queue
			msgs[i].Queue = &q
		}
	}
	acks, err := cl.NewProducer().Send(ctx, topic, msgs...)
	if err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
	return acks
}

// readAll pulls every message of a topic from the leader.
func readAll(ctx context.Context, t *testing.T, cl *client.Client, topic string) []*api.Message {
	t.Helper()
	ti, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil
		}
		t.Fatalf("describe %s: %v", topic, err)
	}
	var out []*api.Message
	for q, qi := range ti.QueueInfo {
		cn, err := cl.NewConsumer(client.ConsumerConfig{Topic: topic, Group: "reader-" + strconv.Itoa(int(time.Now().UnixNano())), Queues: []int32{int32(q)}, Wait: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for !cn.CaughtUp(map[int32]uint64{int32(q): qi.MaxOffset}) {
			recs, err := cn.Poll(ctx)
			if err != nil {
				t.Fatalf("read %s/%d: %v", topic, q, err)
			}
			for _, r := range recs {
				out = append(out, r.Message)
			}
			if qi.MaxOffset == 0 {
				break
			}
		}
	}
	return out
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLookupMessageByID: every acknowledged id reads back its message,
// topic, queue and offset on every node, each naming itself as the server;
// malformed and unknown ids get InvalidArgument and NotFound.
func TestLookupMessageByID(t *testing.T) {
	c, cl := retryCluster(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "look", 3, false); err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := range 20 {
		bodies = append(bodies, fmt.Sprintf("m%02d", i))
	}
	acks := produceBodies(ctx, t, cl, "look", -1, bodies...)
	acks = append(acks, produceBodies(ctx, t, cl, "look", 2, "q2-a", "q2-b")...)
	bodies = append(bodies, "q2-a", "q2-b")
	for i := range c.Size() {
		cc, err := api.Dial(c.Node(i).Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		bc := api.NewBrokerClient(cc)
		id := c.Config(i).Raft.ID
		for j, a := range acks {
			var r *api.LookupMessageResponse
			// A follower that has not applied the entry yet passes the
			// lookup to the leader; once it has, it answers itself.
			waitUntil(t, 20*time.Second, "lookup served by "+id, func() bool {
				r, err = bc.LookupMessage(ctx, &api.LookupMessageRequest{Id: a.Id})
				return err == nil && r.ServedBy == id
			})
			m := r.Message
			if m.Topic != "look" || m.Queue != a.Queue || m.Offset != a.Offset || string(m.Body) != bodies[j] || m.Id != a.Id ||
				m.Key != "k-"+bodies[j] || m.Tag != "T" || m.Properties["app"] != bodies[j] {
				t.Fatalf("node %s: lookup %s = %s/%d@%d %q, want look/%d@%d %q", id, a.Id, m.Topic, m.Queue, m.Offset, m.Body, a.Queue, a.Offset, bodies[j])
			}
			if r.ServedBy != id {
				t.Fatalf("lookup on %s served by %s", id, r.ServedBy)
			}
		}
	}
	for _, tc := range []struct {
		id   string
		code codes.Code
	}{
		{"nothex", codes.InvalidArgument},
		{"", codes.InvalidArgument},
		{"ZZZZZZZZZZZZZZZZ00000000", codes.InvalidArgument},
		{"0000000000000000" + "00000000", codes.InvalidArgument},
		{"00000000FFFFFFFF00000000", codes.NotFound},   // past the log
		{acks[0].Id[:16] + "0000FFFF", codes.NotFound}, // no such ordinal
		{"000000000000000100000000", codes.NotFound},   // the first entry: raft's configuration, no message
	} {
		_, err := cl.LookupMessage(ctx, tc.id)
		if status.Code(err) != tc.code {
			t.Errorf("lookup %q: %v, want %s", tc.id, err, tc.code)
		}
	}
}

// deliveries records what a push consumer's handler saw.
type deliveries struct {
	mu     sync.Mutex
	seen   map[string][]int32 // body -> reconsume times of each delivery
	ok     map[string]int     // body -> successful deliveries
	ids    map[string]string  // body -> origin id
	topics map[string]string  // body -> topic the handler was shown
}

func newDeliveries() *deliveries {
	return &deliveries{seen: map[string][]int32{}, ok: map[string]int{}, ids: map[string]string{}, topics: map[string]string{}}
}

// handler fails a message while fail says so.
func (d *deliveries) handler(fail func(body string, n int32) bool) client.Handler {
	return func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		d.mu.Lock()
		defer d.mu.Unlock()
		res := client.ConsumeSuccess
		for _, m := range msgs {
			b := string(m.Body)
			d.seen[b] = append(d.seen[b], m.ReconsumeTimes)
			d.ids[b] = m.OriginID
			d.topics[b] = m.Topic
			if fail(b, m.ReconsumeTimes) {
				res = client.ConsumeRetryLater
			}
		}
		if res == client.ConsumeSuccess {
			for _, m := range msgs {
				d.ok[string(m.Body)]++
			}
		}
		return res
	}
}

func (d *deliveries) counts(body string) []int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int32(nil), d.seen[body]...)
}

func (d *deliveries) succeeded(body string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ok[body]
}

func pushConfig(topic, group string, h client.Handler) client.PushConfig {
	cfg := client.DefaultPushConfig(topic, group, h)
	cfg.Wait = 200 * time.Millisecond
	cfg.CommitInterval = 200 * time.Millisecond
	cfg.RetryDelayLevel = 1 // 1 s once delays apply: the levels themselves are not what these tests check
	return cfg
}

// TestRetryThenSuccessAndDeadLetter: a message failed k times is seen k+1
// times with reconsume counts 0..k and then never again; a message that
// always fails is seen max+1 times, then sits in %DLQ%<group> once, with
// its origin and reason, and is not redelivered.
func TestRetryThenSuccessAndDeadLetter(t *testing.T) {
	_, cl := retryCluster(t)
	ctx := ctxT(t, 120*time.Second)
	const group, topic, max = "g-retry", "orders", 3
	if _, err := cl.CreateTopic(ctx, topic, 2, false); err != nil {
		t.Fatal(err)
	}
	if s, err := cl.SetMaxReconsumeTimes(ctx, group, max); err != nil || s.MaxReconsumeTimes != max {
		t.Fatalf("set max reconsume: %v %v", s, err)
	}
	acks := produceBodies(ctx, t, cl, topic, -1, "ok", "twice", "never")
	d := newDeliveries()
	pc, err := cl.NewPushConsumer(ctx, pushConfig(topic, group, d.handler(func(b string, n int32) bool {
		return b == "never" || (b == "twice" && n < 2)
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	waitUntil(t, 60*time.Second, "twice to succeed", func() bool { return d.succeeded("twice") == 1 })
	waitUntil(t, 60*time.Second, "never to be dead-lettered", func() bool {
		return len(readAll(ctx, t, cl, mq.DeadLetterTopic(group))) == 1
	})
	time.Sleep(time.Second) // anything redelivered would show now
	if got := d.counts("ok"); fmt.Sprint(got) != "[0]" {
		t.Errorf("ok delivered with counts %v, want [0]", got)
	}
	if got := d.counts("twice"); fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("twice delivered with counts %v, want [0 1 2]", got)
	}
	if got := d.counts("never"); fmt.Sprint(got) != "[0 1 2 3]" {
		t.Errorf("never delivered with counts %v, want [0 1 2 3]", got)
	}
	d.mu.Lock()
	if d.topics["twice"] != topic || d.ids["twice"] != acks[1].Id {
		t.Errorf("retried message shown as topic %q origin %q, want %q %q", d.topics["twice"], d.ids["twice"], topic, acks[1].Id)
	}
	d.mu.Unlock()
	dlq := readAll(ctx, t, cl, mq.DeadLetterTopic(group))
	m := dlq[0]
	if ti, err := cl.DescribeTopic(ctx, mq.DeadLetterTopic(group)); err != nil || ti.Perm != 4 {
		t.Errorf("dead-letter topic: %v %v, want perm 4 (read only)", ti, err)
	}
	if string(m.Body) != "never" || m.Properties[mq.PropRetryTopic] != topic || m.Properties[mq.PropOriginMessageID] != acks[2].Id ||
		m.Properties[mq.PropReconsumeTime] != strconv.Itoa(max+1) || m.Properties[mq.PropDeadLetterReason] == "" ||
		m.Properties[mq.PropOriginQueue] != strconv.Itoa(int(acks[2].Queue)) || m.Properties[mq.PropOriginOffset] != strconv.FormatUint(acks[2].Offset, 10) ||
		m.Properties["app"] != "never" || m.Key != "k-never" || m.Tag != "T" {
		t.Errorf("dead letter %q props %v key %q tag %q", m.Body, m.Properties, m.Key, m.Tag)
	}
	// The retry topic holds exactly the copies sent back: twice 2, never 3.
	retried := map[string]int{}
	for _, r := range readAll(ctx, t, cl, mq.RetryTopic(group)) {
		retried[string(r.Body)]++
	}
	if retried["twice"] != 2 || retried["never"] != 3 || retried["ok"] != 0 {
		t.Errorf("retry topic copies %v, want twice 2, never 3", retried)
	}

	// Resend the dead letter: it is back in its topic without the retry
	// properties, and the consumer (still failing it) sees it as new.
	r, err := cl.ResendDeadLetter(ctx, group, m.Id)
	if err != nil || r.Topic != topic {
		t.Fatalf("resend: %v %v", r, err)
	}
	waitUntil(t, 30*time.Second, "the resent message", func() bool { return len(d.counts("never")) > max+1 })
	if got := d.counts("never")[max+1]; got != 0 {
		t.Errorf("resent message has reconsume count %d, want 0", got)
	}
	look, err := cl.LookupMessage(ctx, r.Ack.Id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{mq.PropRetryTopic, mq.PropOriginMessageID, mq.PropOriginQueue, mq.PropOriginOffset, mq.PropReconsumeTime, mq.PropDeadLetterReason, mq.PropDelay} {
		if _, ok := look.Message.Properties[p]; ok {
			t.Errorf("resent message keeps %s: %v", p, look.Message.Properties)
		}
	}
	if look.Message.Properties["app"] != "never" || look.Message.Topic != topic {
		t.Errorf("resent message %v", look.Message)
	}
}

// TestRetryBadInput: unknown and malformed ids, out-of-range settings and
// levels, a resend of a message that is not a dead letter: each a clear
// error, nothing changed.
func TestRetryBadInput(t *testing.T) {
	_, cl := retryCluster(t)
	ctx := ctxT(t, 60*time.Second)
	acks := produceBodies(ctx, t, cl, "bad", -1, "x")
	code := func(what string, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %s", what, err, want)
		} else if status.Convert(err).Message() == "" {
			t.Errorf("%s: no message", what)
		}
	}
	_, err := cl.SendBack(ctx, "g", "00000000FFFFFFFF00000000", 0, 0)
	code("send back unknown id", err, codes.NotFound)
	_, err = cl.SendBack(ctx, "g", "bogus", 0, 0)
	code("send back malformed id", err, codes.InvalidArgument)
	_, err = cl.SendBack(ctx, "g", acks[0].Id, 19, 0)
	code("send back delay level 19", err, codes.InvalidArgument)
	_, err = cl.SendBack(ctx, "g", acks[0].Id, 0, 65)
	code("send back max 65", err, codes.InvalidArgument)
	_, err = cl.SetMaxReconsumeTimes(ctx, "g", 65)
	code("max reconsume 65", err, codes.InvalidArgument)
	_, err = cl.SetMaxReconsumeTimes(ctx, "g", -1)
	code("max reconsume -1", err, codes.InvalidArgument)
	if _, err := cl.DescribeGroup(ctx, "g"); status.Code(err) != codes.NotFound {
		t.Errorf("a refused update created group settings: %v", err)
	}
	if s, err := cl.SetMaxReconsumeTimes(ctx, "g", 5); err != nil || s.MaxReconsumeTimes != 5 {
		t.Fatalf("max reconsume 5: %v %v", s, err)
	}
	_, err = cl.SetMaxReconsumeTimes(ctx, "g", 100)
	code("max reconsume 100", err, codes.InvalidArgument)
	g, err := cl.DescribeGroup(ctx, "g")
	if err != nil || g.Settings.GetMaxReconsumeTimes() != 5 {
		t.Errorf("describe after a refused update: %v %v", g, err)
	}
	_, err = cl.ResendDeadLetter(ctx, "g", "00000000FFFFFFFF00000000")
	code("resend unknown id", err, codes.NotFound)
	_, err = cl.ResendDeadLetter(ctx, "g", acks[0].Id)
	code("resend a message that is no dead letter", err, codes.NotFound)
	if ti, err := cl.DescribeTopic(ctx, "bad"); err != nil || ti.QueueInfo[acks[0].Queue].MaxOffset != 1 {
		t.Errorf("topic changed by refused calls: %v %v", ti, err)
	}
	if _, err := cl.DescribeTopic(ctx, mq.DeadLetterTopic("g")); status.Code(err) != codes.NotFound {
		t.Errorf("refused calls created the dead-letter topic: %v", err)
	}
	// A send-back retried (same id) stores one copy.
	r1, err := cl.SendBack(ctx, "g", acks[0].Id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := cl.SendBack(ctx, "g", acks[0].Id, 0, 0)
	if err != nil || r2.Id != r1.Id || r1.ReconsumeTimes != 1 || r1.DeadLettered || r1.Topic != mq.RetryTopic("g") {
		t.Errorf("send back twice: %v then %v (%v)", r1, r2, err)
	}
}

// TestSendBackRetriedAfterLeaderChange: a SendBack repeated after the
// leader that stored the copy died (as a client retries one whose answer it
// never got) is answered with the same copy: the dedupe table is replicated.
func TestSendBackRetriedAfterLeaderChange(t *testing.T) {
	c, cl := retryCluster(t)
	ctx := ctxT(t, 60*time.Second)
	acks := produceBodies(ctx, t, cl, "sb", -1, "m")
	r1, err := cl.SendBack(ctx, "g-sb", acks[0].Id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Leader()
	c.Kill(l)
	r2, err := cl.SendBack(ctx, "g-sb", acks[0].Id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Id != r1.Id || r2.Topic != r1.Topic || r2.ReconsumeTimes != 1 {
		t.Fatalf("after the leader change: %v, first answer %v", r2, r1)
	}
	c.Restart(l)
	// The copy waits for its delay level (1 s) before it is in the topic.
	waitUntil(t, 30*time.Second, "the copy in the retry topic", func() bool {
		ti, err := cl.DescribeTopic(ctx, mq.RetryTopic("g-sb"))
		return err == nil && ti.QueueInfo[0].MaxOffset >= 1
	})
	time.Sleep(2 * time.Second) // a second copy would be delivered by now
	ti, err := cl.DescribeTopic(ctx, mq.RetryTopic("g-sb"))
	if err != nil || ti.QueueInfo[0].MaxOffset != 1 {
		t.Fatalf("retry topic after two send-backs of one message: %v %v", ti, err)
	}
}

// TestLookupThroughSDKNamesTheNodeAsked: the SDK asks its first server, so
// `raftmq message show -s FOLLOWER` is answered by that follower.
func TestLookupThroughSDKNamesTheNodeAsked(t *testing.T) {
	c, cl := retryCluster(t)
	ctx := ctxT(t, 60*time.Second)
	acks := produceBodies(ctx, t, cl, "sdk-look", -1, "m")
	f := (c.Leader() + 1) % c.Size()
	fcl, err := client.New(client.Config{Servers: []string{c.Node(f).Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer fcl.Close()
	id := c.Config(f).Raft.ID
	waitUntil(t, 20*time.Second, "the follower to serve the lookup", func() bool {
		r, err := fcl.LookupMessage(ctx, acks[0].Id)
		return err == nil && r.ServedBy == id && string(r.Message.Body) == "m"
	})
}
