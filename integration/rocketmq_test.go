package integration

// An unmodified RocketMQ Go client (apache/rocketmq-client-go/v2) against
// a real 3-process group and a name server: every send mode, push
// consumers in a group of two, tag filtering, an ordered producer, reads
// served by followers after the protocol's suggestWhichBrokerId, and a
// SIGKILL of the leader mid-stream with the windows until writes and
// consumption resume.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"google.golang.org/grpc"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// rmqReceived records what the push consumers were handed.
type rmqReceived struct {
	mu     sync.Mutex
	bodies map[string]int       // body -> deliveries
	by     map[string]string    // body -> consumer instance of the first delivery
	tags   map[string]string    // body -> tag
	queue  map[string]int       // body -> queue id
	at     map[string]time.Time // body -> first delivery
	// order: sharding key -> queue offset -> the message's sequence
	// number. The push consumers consume concurrently (messages of one
	// pull may reach the callback in any order), so the order a key's
	// messages were stored in is checked, which is the order pulls serve.
	order map[string]map[int64]int
}

func newRMQReceived() *rmqReceived {
	return &rmqReceived{bodies: map[string]int{}, by: map[string]string{}, tags: map[string]string{}, queue: map[string]int{}, at: map[string]time.Time{}, order: map[string]map[int64]int{}}
}

func (r *rmqReceived) add(instance string, m *primitive.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := string(m.Body)
	r.bodies[b]++
	if r.bodies[b] == 1 {
		r.by[b], r.tags[b], r.queue[b], r.at[b] = instance, m.GetTags(), m.Queue.QueueId, time.Now()
		if k := m.GetShardingKey(); k != "" {
			if i := strings.LastIndexByte(b, '-'); i > 0 {
				n, _ := strconv.Atoi(b[i+1:])
				if r.order[k] == nil {
					r.order[k] = map[int64]int{}
				}
				r.order[k][m.QueueOffset] = n
			}
		}
	}
}

func (r *rmqReceived) missing(want []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, b := range want {
		if r.bodies[b] == 0 {
			out = append(out, b)
		}
	}
	return out
}

func rmqWaitAll(t *testing.T, r *rmqReceived, want []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		miss := r.missing(want)
		if len(miss) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged messages never delivered, e.g. %v", len(miss), len(want), miss[:min(5, len(miss))])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func rmqPushConsumer(t *testing.T, ns, group, instance string, sel consumer.MessageSelector, topic string, r *rmqReceived, opts ...consumer.Option) rocketmqStopper {
	t.Helper()
	c, err := consumer.NewPushConsumer(append([]consumer.Option{consumer.WithNameServer([]string{ns}), consumer.WithGroupName(group), consumer.WithInstance(instance),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithConsumerModel(consumer.Clustering)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, sel, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			r.add(instance, m)
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

type rocketmqStopper interface{ Shutdown() error }

// rmqMetric sums a counter over the lines of a node's /metrics that
// contain every part.
func rmqMetric(t *testing.T, addr, name string, parts ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name) {
			continue
		}
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue lines
			}
		}
		f := strings.Fields(l)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		sum += v
	}
	return sum
}

// rmqStartGroup starts a name server and a 3-node group with remoting that
// registers with it every 2 s. Its leader counts as loaded from the first
// request, so it sends readers to followers whenever they have the data:
// follower reads are then visible through the protocol's own
// suggestWhichBrokerId (and the client sends send-backs to the follower
// that served the message, which forwards them). serverArgs are added to
// every node's flags.
func rmqStartGroup(t *testing.T, serverArgs ...string) (*procCluster, *namesrv.Server) {
	t.Helper()
	procRequire(t)
	rlog.SetLogLevel("error")
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	c := procStartGroup(t, localgroup.Config{Nodes: 3, Remoting: true, ServerArgs: append([]string{"--namesrv", ns.Addr(), "--register-period", "2s", "--load-threshold", "0.000001"}, serverArgs...)})
	return c, ns
}

// rmqStored reads topic's 4 queues from nd's log with raftmq's API and
// counts each body found.
func rmqStored(t *testing.T, nd *procNode, topic string, opts ...grpc.DialOption) map[string]int {
	t.Helper()
	cc, err := api.Dial(nd.Client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stored := map[string]int{}
	for q := int32(0); q < 4; q++ {
		for off := uint64(0); ; {
			r, err := api.NewBrokerClient(cc).Pull(ctx, &api.PullRequest{Topic: topic, Queue: q, Offset: off, MaxMessages: 1000})
			if err != nil {
				t.Fatalf("read back queue %d at %d: %v", q, off, err)
			}
			for _, m := range r.Messages {
				stored[string(m.Body)]++
			}
			if len(r.Messages) == 0 || r.NextOffset <= off {
				break
			}
			off = r.NextOffset
		}
	}
	return stored
}

func TestRocketMQClient(t *testing.T) {
	c, ns := rmqStartGroup(t)
	leader := c.waitLeader("")

	// The route: the leader as brokerId 0 and at least minAddrs nodes
	// (followers register once they know the leader).
	waitRoute := func(leaderAddr string, minAddrs int) *namesrv.GroupRoute {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if g := ns.Groups()["raftmq"]; g != nil && g.Addrs[0] == leaderAddr && len(g.Addrs) >= minAddrs {
				return g
			}
			if time.Now().After(deadline) {
				t.Fatalf("route never named %s as brokerId 0: %+v", leaderAddr, ns.Groups()["raftmq"])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	g := waitRoute(leader.Remoting, 3)
	if len(g.Addrs) != 3 || g.Addrs[1] == "" || g.Addrs[2] == "" {
		t.Fatalf("route %+v: want brokerIds 0, 1, 2", g.Addrs)
	}

	// Topics through the protocol, as RocketMQ's admin tools create them.
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, topic := range []string{"rmq-orders", "rmq-ordered"} {
		// To a follower on purpose: it is forwarded to the leader.
		if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(g.Addrs[1]), admin.WithWriteQueueNums(4), admin.WithReadQueueNums(4)); err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
	adm.Close()
	deadline := time.Now().Add(30 * time.Second)
	for g := ns.Groups()["raftmq"]; g == nil || g.Topics["rmq-ordered"] != 4; g = ns.Groups()["raftmq"] {
		if time.Now().After(deadline) {
			t.Fatalf("topics never registered: %+v", g)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The routes command shows them.
	out := c.mustCLI("", "namesrv", "routes", "--namesrv", ns.Addr(), "--topic", "rmq-orders")
	if !strings.Contains(out, "leader    0: "+leader.Remoting) || !strings.Contains(out, "rmq-orders(4)") {
		t.Fatalf("namesrv routes:\n%s", out)
	}

	all := newRMQReceived()
	c1 := rmqPushConsumer(t, ns.Addr(), "rmq-cg", "c1", consumer.MessageSelector{}, "rmq-orders", all)
	defer c1.Shutdown()
	c2 := rmqPushConsumer(t, ns.Addr(), "rmq-cg", "c2", consumer.MessageSelector{}, "rmq-orders", all)
	defer c2.Shutdown()
	tagged := newRMQReceived()
	c3 := rmqPushConsumer(t, ns.Addr(), "rmq-cg-tags", "c3", consumer.MessageSelector{Type: consumer.TAG, Expression: "tagA"}, "rmq-orders", tagged)
	defer c3.Shutdown()

	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("rmq-pg"), producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	var acked []string
	var ackMu sync.Mutex
	ack := func(b string) { ackMu.Lock(); acked = append(acked, b); ackMu.Unlock() }
	msg := func(body, tag string) *primitive.Message {
		m := primitive.NewMessage("rmq-orders", []byte(body))
		m.WithTag(tag)
		m.WithKeys([]string{"k-" + body})
		m.WithProperty("origin", "rocketmq-client-go")
		return m
	}
	tagOf := func(i int) string { return []string{"tagA", "tagB"}[i%2] }

	// Sync.
	for i := 0; i < 60; i++ {
		b := fmt.Sprintf("sync-%d", i)
		r, err := p.SendSync(ctx, msg(b, tagOf(i)))
		if err != nil {
			t.Fatalf("sync send %d: %v", i, err)
		}
		if r.Status != primitive.SendOK || r.MsgID == "" || r.OffsetMsgID == "" {
			t.Fatalf("sync send %d: %+v", i, r)
		}
		ack(b)
	}
	// A body over the client's compression threshold (4 KiB): zlib on the wire.
	big := "big-" + strings.Repeat("x", 8<<10)
	if _, err := p.SendSync(ctx, msg(big, "tagB")); err != nil {
		t.Fatalf("compressed send: %v", err)
	}
	ack(big)
	// Async.
	var wg sync.WaitGroup
	var asyncErr atomic.Value
	for i := 0; i < 40; i++ {
		b := fmt.Sprintf("async-%d", i)
		wg.Add(1)
		err := p.SendAsync(ctx, func(ctx context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			if err != nil {
				asyncErr.Store(err)
				return
			}
			ack(b)
		}, msg(b, tagOf(i)))
		if err != nil {
			t.Fatalf("async send %d: %v", i, err)
		}
	}
	wg.Wait()
	if e := asyncErr.Load(); e != nil {
		t.Fatalf("async send: %v", e)
	}
	// Oneway: no answer; they must arrive all the same.
	var oneway []string
	for i := 0; i < 20; i++ {
		b := fmt.Sprintf("oneway-%d", i)
		if err := p.SendOneWay(ctx, msg(b, tagOf(i))); err != nil {
			t.Fatalf("oneway send %d: %v", i, err)
		}
		oneway = append(oneway, b)
	}
	// Batch.
	for j := 0; j < 3; j++ {
		var ms []*primitive.Message
		var bs []string
		for i := 0; i < 10; i++ {
			b := fmt.Sprintf("batch-%d-%d", j, i)
			ms = append(ms, msg(b, tagOf(i)))
			bs = append(bs, b)
		}
		if _, err := p.SendSync(ctx, ms...); err != nil {
			t.Fatalf("batch send %d: %v", j, err)
		}
		for _, b := range bs {
			ack(b)
		}
	}

	// Ordered: a hash selector over the sharding key puts a key on one
	// queue, and one queue is delivered in order.
	op, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("rmq-pg-ordered"),
		producer.WithQueueSelector(producer.NewHashQueueSelector()))
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}
	defer op.Shutdown()
	ordered := newRMQReceived()
	c4 := rmqPushConsumer(t, ns.Addr(), "rmq-cg-ordered", "c4", consumer.MessageSelector{}, "rmq-ordered", ordered)
	defer c4.Shutdown()
	var orderedBodies []string
	for i := 0; i < 30; i++ {
		key := fmt.Sprintf("key%d", i%3)
		m := primitive.NewMessage("rmq-ordered", []byte(fmt.Sprintf("%s-%d", key, i)))
		m.WithShardingKey(key)
		if _, err := op.SendSync(ctx, m); err != nil {
			t.Fatalf("ordered send %d: %v", i, err)
		}
		orderedBodies = append(orderedBodies, string(m.Body))
	}

	ackMu.Lock()
	want := append(append([]string{}, acked...), oneway...)
	ackMu.Unlock()
	rmqWaitAll(t, all, want, 90*time.Second)
	rmqWaitAll(t, ordered, orderedBodies, 60*time.Second)
	all.mu.Lock()
	perInstance := map[string]int{}
	for _, in := range all.by {
		perInstance[in]++
	}
	if perInstance["c1"] == 0 || perInstance["c2"] == 0 {
		t.Errorf("one push consumer of the group got nothing: %v", perInstance)
	}
	if all.tags["sync-0"] != "tagA" || all.tags["sync-1"] != "tagB" {
		t.Errorf("tags: %q %q", all.tags["sync-0"], all.tags["sync-1"])
	}
	all.mu.Unlock()
	ordered.mu.Lock()
	queueOf := map[string]int{}
	for b, q := range ordered.queue {
		key := b[:strings.IndexByte(b, '-')]
		if prev, ok := queueOf[key]; ok && prev != q {
			t.Errorf("key %s on queues %d and %d", key, prev, q)
		}
		queueOf[key] = q
	}
	for k, byOffset := range ordered.order {
		var seq []int
		for _, off := range slices.Sorted(maps.Keys(byOffset)) {
			seq = append(seq, byOffset[off])
		}
		if !slices.IsSorted(seq) {
			t.Errorf("key %s stored out of send order: sequence numbers by queue offset %v", k, seq)
		}
	}
	ordered.mu.Unlock()
	// Tag filtering: only tagA reached the tag consumer, and all of them.
	var wantA []string
	for _, b := range want {
		if strings.HasPrefix(b, "big-") {
			continue
		}
		i, _ := strconv.Atoi(b[strings.LastIndexByte(b, '-')+1:])
		if tagOf(i) == "tagA" {
			wantA = append(wantA, b)
		}
	}
	rmqWaitAll(t, tagged, wantA, 60*time.Second)
	tagged.mu.Lock()
	for b, tag := range tagged.tags {
		if tag != "tagA" {
			t.Errorf("tag consumer got %s with tag %q", b, tag)
		}
	}
	tagged.mu.Unlock()

	// Consume later: every first delivery fails; the client sends it back
	// (code 36) and it comes back with ReconsumeTimes 1 and its own topic
	// (rocketmq_semantics_test.go checks the delays and dead letters).
	c.mustCLI("", "topic", "create", "rmq-retry", "--queues", "1", "-s", c.addrs())
	// The retry topic is created by the leader on the group's first
	// heartbeat; this one comes before the consumer starts, so that its
	// first route query finds the topic (otherwise its next one, within
	// 30 s, would).
	rcl := remoting.NewClient()
	hb, _ := json.Marshal(map[string]any{"clientID": "warmup@1", "consumerDataSet": []any{map[string]any{"groupName": "rmq-cg-retry", "messageModel": "CLUSTERING"}}})
	if r, err := rcl.Invoke(ctx, leader.Remoting, remoting.NewRequest(remoting.HeartBeat, nil, hb)); err != nil || r.Code != remoting.Success {
		t.Fatalf("heartbeat: %v %+v", err, r)
	}
	rcl.Close()
	deadline = time.Now().Add(30 * time.Second)
	for g := ns.Groups()["raftmq"]; g == nil || g.Topics["%RETRY%rmq-cg-retry"] != 1 || g.Topics["rmq-retry"] != 1; g = ns.Groups()["raftmq"] {
		if time.Now().After(deadline) {
			t.Fatalf("retry topics never registered: %+v", g)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var retryMu sync.Mutex
	retryFirst, retryAgain := map[string]int{}, map[string]string{}
	rc, err := consumer.NewPushConsumer(consumer.WithNameServer([]string{ns.Addr()}), consumer.WithGroupName("rmq-cg-retry"), consumer.WithInstance("c6"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = rc.Subscribe("rmq-retry", consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		retryMu.Lock()
		defer retryMu.Unlock()
		for _, m := range msgs {
			if m.ReconsumeTimes == 0 {
				retryFirst[string(m.Body)]++
				return consumer.ConsumeRetryLater, nil
			}
			retryAgain[string(m.Body)] = fmt.Sprintf("%s/%d", m.Topic, m.ReconsumeTimes)
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(); err != nil {
		t.Fatal(err)
	}
	defer rc.Shutdown()
	for i := 0; i < 3; i++ {
		if _, err := p.SendSync(ctx, primitive.NewMessage("rmq-retry", []byte(fmt.Sprintf("retry-%d", i)))); err != nil {
			t.Fatalf("send to rmq-retry: %v", err)
		}
	}
	deadline = time.Now().Add(90 * time.Second)
	for {
		retryMu.Lock()
		n := len(retryAgain)
		got := fmt.Sprint(retryAgain)
		retryMu.Unlock()
		if n == 3 {
			if strings.Count(got, "rmq-retry/1") != 3 {
				t.Errorf("redelivered retries: %s, want each on rmq-retry with ReconsumeTimes 1", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consume-later messages never came back: %s (first deliveries %v)", got, retryFirst)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Follower reads: a group that starts late reads the backlog; the
	// leader (loaded, by the threshold above) sends it to the followers
	// that hold it, and they serve it.
	late := newRMQReceived()
	c5 := rmqPushConsumer(t, ns.Addr(), "rmq-cg-late", "c5", consumer.MessageSelector{}, "rmq-orders", late)
	rmqWaitAll(t, late, want, 90*time.Second)
	c5.Shutdown()
	var followerServed float64
	for _, n := range c.all() {
		if n.ID != leader.ID {
			followerServed += rmqMetric(t, n.HTTP, "raftmq_pull_messages_total", `role="follower"`)
		}
	}
	t.Logf("messages served by followers: %.0f", followerServed)
	if followerServed == 0 {
		for _, n := range c.all() {
			resp, err := http.Get("http://" + n.HTTP + "/metrics")
			if err == nil {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					if l := sc.Text(); strings.HasPrefix(l, "raftmq_pull_") {
						t.Logf("%s: %s", n.ID, l)
					}
				}
				resp.Body.Close()
			}
		}
		cl := c.client()
		if st, err := cl.Status(ctx); err == nil {
			for _, n := range st.Nodes {
				t.Logf("status %s: role %s applied %d first %d load %.2f healthy %v", n.Id, n.Role, n.AppliedIndex, n.FirstIndex, n.Load, n.Healthy)
			}
		}
		if cc, err := api.Dial(leader.Client); err == nil {
			r, err := api.NewBrokerClient(cc).Pull(ctx, &api.PullRequest{Topic: "rmq-orders", Queue: 0, Offset: 0, MaxMessages: 1})
			t.Logf("sdk pull at 0: %v %v", r, err)
			cc.Close()
		}
		t.Errorf("no pull was served by a follower after the suggestion")
	}
	all.mu.Lock()
	dupsBefore := 0
	for _, n := range all.bodies {
		dupsBefore += n - 1
	}
	all.mu.Unlock()

	// Leader kill mid-stream: a producer sends continuously; the window is
	// from SIGKILL to the first acknowledged send, and to the first
	// delivery, after it.
	var stream []string
	var streamErrs atomic.Int64
	var firstAckAfter atomic.Int64 // of a send started after the kill
	var killedAt atomic.Int64
	postKill := map[string]time.Time{} // body -> ack, for sends started after the kill
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			b := fmt.Sprintf("stream-%d", i)
			started := time.Now().UnixNano()
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := p.SendSync(sctx, msg(b, "tagB"))
			scancel()
			if err != nil {
				streamErrs.Add(1)
				time.Sleep(20 * time.Millisecond)
				i-- // the same body again: a retry of an unknown outcome
				continue
			}
			ackMu.Lock()
			stream = append(stream, b)
			if k := killedAt.Load(); k != 0 && started > k {
				postKill[b] = time.Now()
				if firstAckAfter.Load() == 0 {
					firstAckAfter.Store(time.Now().UnixNano())
				}
			}
			ackMu.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(2 * time.Second)
	kill := time.Now()
	killedAt.Store(kill.UnixNano())
	c.kill(leader.ID)
	newLeader := c.waitLeader(leader.ID)
	elected := time.Since(kill)
	waitRoute(newLeader.Remoting, 2)
	routed := time.Since(kill)
	deadline = time.Now().Add(60 * time.Second)
	for firstAckAfter.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("writes never resumed after the leader kill (%d errors)", streamErrs.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	writeWindow := time.Duration(firstAckAfter.Load() - kill.UnixNano())
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	ackMu.Lock()
	streamed := append([]string{}, stream...)
	ackMu.Unlock()
	rmqWaitAll(t, all, streamed, 90*time.Second)
	all.mu.Lock()
	// Consumption resumed when the first message sent after the kill was
	// delivered; its lag is the time from its acknowledgement.
	var consumed time.Time
	var consumedLag time.Duration
	ackMu.Lock()
	for b, acked := range postKill {
		if at, ok := all.at[b]; ok && (consumed.IsZero() || at.Before(consumed)) {
			consumed, consumedLag = at, at.Sub(acked)
		}
	}
	ackMu.Unlock()
	consumeWindow := consumed.Sub(kill)
	dups := 0
	for _, n := range all.bodies {
		dups += n - 1
	}
	total := len(all.bodies)
	all.mu.Unlock()
	t.Logf("leader %s killed: new leader %s elected after %v, in the name server's route after %v; writes through the RocketMQ client resumed after %v (%d failed sends meanwhile); the first message sent after the kill was consumed %v after the kill (%v after its acknowledgement)",
		leader.ID, newLeader.ID, elected.Round(time.Millisecond), routed.Round(time.Millisecond), writeWindow.Round(time.Millisecond), streamErrs.Load(),
		consumeWindow.Round(time.Millisecond), consumedLag.Round(time.Millisecond))
	// What the log holds: every stream message stored once. The client's
	// own retries reuse the message's UNIQ_KEY and are deduplicated; a
	// send this test repeats after an error is a new message to the
	// client (a new UNIQ_KEY) and may be stored twice if the first attempt
	// had reached the log.
	stored := rmqStored(t, newLeader, "rmq-orders")
	storedTwice := 0
	for _, b := range streamed {
		if stored[b] == 0 {
			t.Errorf("acknowledged %s is not in the log", b)
		}
		if stored[b] > 1 {
			storedTwice++
		}
	}
	t.Logf("log: %d stream messages stored twice (a repeated send after an error), the rest once", storedTwice)
	t.Logf("delivered %d distinct messages to group rmq-cg; redeliveries (at-least-once): %d before the kill (rebalance of the second consumer), %d after it; %d stream messages acknowledged, none lost",
		total, dupsBefore, dups-dupsBefore, len(streamed))
}
