package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// TestComposeRocketMQ: the compose group's name server hands the host's
// RocketMQ clients routes they can use (its published external listener
// names the nodes' published remoting addresses), and an unmodified
// producer and push consumer work through them.
func TestComposeRocketMQ(t *testing.T) {
	c := composeUp(t)
	c.waitHealthy()
	rlog.SetLogLevel("error")
	ns := "127.0.0.1:" + strconv.Itoa(c.namesrvPort)
	c.createTopic("it-rmq", 4)
	cl := remoting.NewClient()
	defer cl.Close()
	deadline := time.Now().Add(composeWaitTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rd, err := namesrv.FetchRoute(ctx, cl, ns, "it-rmq")
		cancel()
		// The group's own brokerData (beside its followers' write-only
		// paths, "raftmq~n2", ...) lists all three nodes, the leader as 0.
		if err == nil && slices.ContainsFunc(rd.BrokerDatas, func(bd namesrv.BrokerData) bool {
			return bd.BrokerName == "raftmq" && len(bd.BrokerAddrs) == 3 && bd.BrokerAddrs[0] != ""
		}) {
			t.Logf("route: %+v", rd.BrokerDatas)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no route with 3 nodes from the compose name server %s: %+v %v", ns, rd, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns}), producer.WithGroupName("it-rmq-pg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := map[string]bool{}
	for i := 0; i < 20; i++ {
		b := fmt.Sprintf("compose-rmq-%d", i)
		if _, err := p.SendSync(ctx, primitive.NewMessage("it-rmq", []byte(b))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		want[b] = true
	}
	var mu sync.Mutex
	got := map[string]bool{}
	pc, err := consumer.NewPushConsumer(consumer.WithNameServer([]string{ns}), consumer.WithGroupName("it-rmq-cg"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	pc.Subscribe("it-rmq", consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			got[string(m.Body)] = true
		}
		return consumer.ConsumeSuccess, nil
	})
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	for {
		mu.Lock()
		n := 0
		for b := range want {
			if got[b] {
				n++
			}
		}
		mu.Unlock()
		if n == len(want) {
			return
		}
		if time.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("consumed %d of %d messages through the compose name server", n, len(want))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
