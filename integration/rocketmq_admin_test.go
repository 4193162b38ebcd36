package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestRocketMQAdminAPI: the unmodified Go client's admin API against a
// real group: it creates topics (through a follower and the leader),
// lists them (the name server's topic list), lists the subscription
// groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) with a live push consumer's
// group in them, and deletes a topic (DELETE_TOPIC_IN_BROKER, then
// DELETE_TOPIC_IN_NAMESRV on the name server), after which the topic list
// and the routes leave it out. Auth is not enforced: the admin API sends
// these requests unsigned.
func TestRocketMQAdminAPI(t *testing.T) {
	c, ns := rmqStartGroup(t)
	leader := c.waitLeader("")
	var addrs map[int64]string
	procWaitFor(t, 30*time.Second, "the route to name the group", func() (bool, string) {
		g := ns.Groups()["raftmq"]
		if g == nil || g.Addrs[0] != leader.Remoting || len(g.Addrs) != 3 {
			return false, fmt.Sprintf("%+v", g)
		}
		addrs = g.Addrs
		return true, ""
	})
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct{ topic, addr string }{{"adm-a", addrs[1]}, {"adm-b", addrs[0]}} {
		if err := adm.CreateTopic(ctx, admin.WithTopicCreate(tc.topic), admin.WithBrokerAddrCreate(tc.addr), admin.WithWriteQueueNums(4), admin.WithReadQueueNums(4)); err != nil {
			t.Fatalf("create topic %s: %v", tc.topic, err)
		}
	}
	topics := func() []string {
		l, err := adm.FetchAllTopicList(ctx)
		if err != nil {
			t.Fatalf("topic list: %v", err)
		}
		return l.TopicList
	}
	if l := topics(); !slices.Contains(l, "adm-a") || !slices.Contains(l, "adm-b") {
		t.Fatalf("topic list after the creates: %v", l)
	}

	// A live push consumer's group is listed, with RocketMQ's defaults.
	r := newRMQReceived()
	pc := rmqPushConsumer(t, ns.Addr(), "adm-cg", "i1", consumer.MessageSelector{}, "adm-b", r)
	defer pc.Shutdown()
	procWaitFor(t, 30*time.Second, "the consumer's group to be listed", func() (bool, string) {
		w, err := adm.GetAllSubscriptionGroup(ctx, addrs[2], 5*time.Second)
		if err != nil {
			return false, err.Error()
		}
		g, ok := w.SubscriptionGroupTable["adm-cg"]
		return ok && g.GroupName == "adm-cg" && g.RetryMaxTimes == 16 && g.ConsumeEnable, fmt.Sprintf("%+v", w.SubscriptionGroupTable)
	})

	// Delete through the admin API (it finds the broker from the route).
	// The Go admin API reports only transport errors: the result is read
	// from the topic list and the routes.
	if err := adm.DeleteTopic(ctx, admin.WithTopicDelete("adm-a")); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	procWaitFor(t, 15*time.Second, "the deleted topic to leave the topic list and the routes", func() (bool, string) {
		l := topics()
		_, routed := ns.Groups()["raftmq"].Topics["adm-a"]
		return !slices.Contains(l, "adm-a") && !routed && slices.Contains(l, "adm-b"), fmt.Sprintf("topics %v, routed %v", l, routed)
	})
	ts, err := c.client().ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range ts {
		if ti.Name == "adm-a" {
			t.Fatal("the group still holds the deleted topic")
		}
	}
}
