package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestRocketMQCreateThenSend: a topic created with RocketMQ's admin API
// (UPDATE_AND_CREATE_TOPIC, to a follower and to the leader) is routed by
// the name server when the create returns, so a producer that looks the
// route up right after sends to it (before, the lookup could precede the
// registration: "dial tcp: missing address").
func TestRocketMQCreateThenSend(t *testing.T) {
	c, ns := rmqStartGroup(t)
	leader := c.waitLeader("")
	var g0 map[int64]string
	procWaitFor(t, 30*time.Second, "the route to name the group", func() (bool, string) {
		g := ns.Groups()["raftmq"]
		if g == nil || g.Addrs[0] != leader.Remoting || len(g.Addrs) != 3 {
			return false, fmt.Sprintf("%+v", g)
		}
		g0 = g.Addrs
		return true, ""
	})
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, addr := range []string{g0[1], g0[0]} {
		topic := fmt.Sprintf("rmq-made-%d", i)
		if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(addr), admin.WithWriteQueueNums(4), admin.WithReadQueueNums(4)); err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
		p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName(fmt.Sprintf("made-%d", i)), producer.WithRetry(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		_, err = p.SendSync(ctx, primitive.NewMessage(topic, []byte("first")))
		p.Shutdown()
		if err != nil {
			t.Fatalf("send to %s right after its creation (through %s): %v", topic, addr, err)
		}
	}
}
