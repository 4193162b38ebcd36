package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/remoting"
)

// TestRocketMQResetOffsetWhileConsuming: INVOKE_BROKER_TO_RESET_OFFSET as
// mqadmin resetOffsetByTime sends it, while the group's unmodified Go push
// consumer runs: the node commits the offsets and sends
// RESET_CONSUMER_CLIENT_OFFSET to the consumer, which then reads again
// from the reset point (the messages stored after the reset time arrive a
// second time, the ones before do not) instead of committing its old
// offsets over the reset. GET_CONSUMER_RUNNING_INFO is answered by the
// consumer itself through the node.
func TestRocketMQResetOffsetWhileConsuming(t *testing.T) {
	c, ns := rmqStartGroup(t)
	leader := c.waitLeader("")
	procWaitFor(t, 30*time.Second, "the route to name the leader", func() (bool, string) {
		g := ns.Groups()["raftmq"]
		return g != nil && g.Addrs[0] == leader.Remoting, fmt.Sprintf("%+v", g)
	})
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := adm.CreateTopic(ctx, admin.WithTopicCreate("rst"), admin.WithBrokerAddrCreate(leader.Remoting), admin.WithWriteQueueNums(4), admin.WithReadQueueNums(4)); err != nil {
		t.Fatal(err)
	}
	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("rst-pg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	send := func(prefix string) []string {
		var bodies []string
		for i := 0; i < 12; i++ {
			b := fmt.Sprintf("%s-%d", prefix, i)
			if _, err := p.SendSync(ctx, primitive.NewMessage("rst", []byte(b))); err != nil {
				t.Fatalf("send %s: %v", b, err)
			}
			bodies = append(bodies, b)
		}
		return bodies
	}
	before := send("before")
	time.Sleep(200 * time.Millisecond)
	resetAt := time.Now().UnixMilli()
	time.Sleep(200 * time.Millisecond)
	after := send("after")

	r := newRMQReceived()
	pc := rmqPushConsumer(t, ns.Addr(), "rst-cg", "i1", consumer.MessageSelector{}, "rst", r)
	defer pc.Shutdown()
	rmqWaitAll(t, r, append(append([]string{}, before...), after...), time.Minute)
	// Let the consumer commit what it consumed (every 5 s).
	time.Sleep(6 * time.Second)

	cl := remoting.NewClient()
	defer cl.Close()
	var ids struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}
	resp, err := cl.Invoke(ctx, leader.Remoting, remoting.NewRequest(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": "rst-cg"}, nil))
	if err != nil || json.Unmarshal(resp.Body, &ids) != nil || len(ids.ConsumerIDList) != 1 {
		t.Fatalf("consumer list: %v %+v", err, resp)
	}
	resp, err = cl.Invoke(ctx, leader.Remoting, remoting.NewRequest(remoting.GetConsumerRunningInfo,
		map[string]string{"consumerGroup": "rst-cg", "clientId": ids.ConsumerIDList[0], "jstackEnable": "false"}, nil))
	if err != nil || resp.Code != remoting.Success || !strings.Contains(string(resp.Body), "rst") {
		t.Fatalf("consumer running info: %v %+v", err, resp)
	}

	start := time.Now()
	resp, err = cl.Invoke(ctx, leader.Remoting, remoting.NewRequest(remoting.InvokeBrokerToResetOffset,
		map[string]string{"topic": "rst", "group": "rst-cg", "timestamp": strconv.FormatInt(resetAt, 10), "isForce": "true"}, nil))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("reset: %v %+v", err, resp)
	}
	t.Logf("reset answered: %s", resp.Body)
	procWaitFor(t, 90*time.Second, "the messages after the reset point to arrive again", func() (bool, string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		var short []string
		for _, b := range after {
			if r.bodies[b] < 2 {
				short = append(short, b)
			}
		}
		return len(short) == 0, fmt.Sprintf("not redelivered: %v", short)
	})
	t.Logf("read again from the reset point %s after the reset", time.Since(start).Round(100*time.Millisecond))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range before {
		if r.bodies[b] != 1 {
			t.Errorf("%s, stored before the reset point, delivered %d times", b, r.bodies[b])
		}
	}
}
