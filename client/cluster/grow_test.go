package cluster_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// A topic on ga grows onto gb without touching ga's queues: the route
// lists both groups' queues, a running producer and consumer take gb's on
// at their next refresh, and a group that holds the topic (as the name
// server lists it or as it answers itself) is refused before anything is
// created.
func TestGrowTopicOntoAnotherGroup(t *testing.T) {
	c, groups, ctx := twoGroupCluster(t)
	if _, err := c.GrowTopic(ctx, "orders", 2, []string{"gb"}); !errors.Is(err, cluster.ErrTopicNotFound) {
		t.Fatalf("grow a missing topic: %v", err)
	}
	if made, err := c.CreateTopic(ctx, "orders", 2, []string{"ga"}, false); err != nil || made["ga"] != 2 {
		t.Fatalf("create on ga: %v %v", made, err)
	}
	waitFor(t, "the route of orders on ga", func() bool {
		r, err := c.Route(ctx, "orders")
		return err == nil && len(r.Queues) == 2
	})
	p := c.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	cfg := client.DefaultConsumerConfig("orders", "cg")
	cfg.Wait = 200 * time.Millisecond
	cn, err := c.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	for i := 0; i < 4; i++ {
		if _, err := p.Send(ctx, "orders", cluster.Message{Message: client.Message{Body: []byte(fmt.Sprint("before-", i))}}); err != nil {
			t.Fatal(err)
		}
	}

	for _, bad := range []struct {
		groups []string
		queues int
		want   error
	}{
		{[]string{"ga"}, 2, cluster.ErrGroupHasTopic},
		{[]string{"gb", "ga"}, 2, cluster.ErrGroupHasTopic},
		{[]string{"gz"}, 2, cluster.ErrUnknownGroup},
	} {
		if made, err := c.GrowTopic(ctx, "orders", bad.queues, bad.groups); !errors.Is(err, bad.want) || len(made) != 0 {
			t.Fatalf("grow onto %v: %v %v, want %v and nothing made", bad.groups, made, err, bad.want)
		}
	}
	if _, err := c.GrowTopic(ctx, "orders", 0, []string{"gb"}); err == nil {
		t.Fatal("grow by 0 queues accepted")
	}
	// Nothing of the refusals reached gb.
	if ts, err := groups["gb"].Client(t).ListTopics(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("gb's topics after the refusals: %v %v", ts, err)
	}

	made, err := c.GrowTopic(ctx, "orders", 3, nil) // default: every group without it
	if err != nil || len(made) != 1 || made["gb"] != 3 {
		t.Fatalf("grow onto gb: %v %v", made, err)
	}
	if _, err := c.GrowTopic(ctx, "orders", 3, []string{"gb"}); !errors.Is(err, cluster.ErrGroupHasTopic) {
		t.Fatalf("grow onto gb twice: %v", err)
	}
	if _, err := c.GrowTopic(ctx, "orders", 3, nil); err == nil {
		t.Fatal("grow with every group holding the topic accepted")
	}
	waitFor(t, "the route over ga and gb", func() bool {
		r, err := c.Route(ctx, "orders")
		return err == nil && len(r.Queues) == 5 && r.Groups["ga"] == 2 && r.Groups["gb"] == 3
	})
	ti, err := groups["ga"].Client(t).DescribeTopic(ctx, "orders")
	if err != nil || ti.Queues != 2 {
		t.Fatalf("ga's topic after the grow: %v %v", ti, err)
	}

	desc, err := c.DescribeTopic(ctx, "orders")
	if err != nil || len(desc) != 2 || desc["ga"].Queues != 2 || desc["gb"].Queues != 3 {
		t.Fatalf("describe over both groups: %v %v", desc, err)
	}
	lists, err := c.ListTopics(ctx)
	if err != nil || len(lists) != 2 || len(lists["gb"]) != 1 || lists["gb"][0].Name != "orders" {
		t.Fatalf("list over both groups: %v %v", lists, err)
	}

	// The producer spreads over gb's queues too; the consumer reads them.
	perGroup := map[string]int{}
	for i := 0; i < 20; i++ {
		acks, err := p.Send(ctx, "orders", cluster.Message{Message: client.Message{Body: []byte(fmt.Sprint("after-", i))}})
		if err != nil {
			t.Fatal(err)
		}
		perGroup[acks[0].Group]++
	}
	if perGroup["gb"] == 0 || perGroup["ga"] == 0 {
		t.Fatalf("sends after the grow per group: %v", perGroup)
	}
	seen := map[string]bool{}
	waitFor(t, "all 24 messages consumed from both groups", func() bool {
		recs, err := cn.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			seen[fmt.Sprintf("%s/%d/%d", r.Group, r.Queue, r.Offset)] = true
		}
		return len(seen) == 24
	})

	// A group that has the topic but may not have registered it yet: the
	// group itself says so.
	if _, err := groups["gb"].Client(t).CreateTopic(ctx, "late", 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, "late", 1, []string{"ga"}, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the route of late", func() bool { _, err := c.Route(ctx, "late"); return err == nil })
	if _, err := c.GrowTopic(ctx, "late", 1, []string{"gb"}); !errors.Is(err, cluster.ErrGroupHasTopic) {
		t.Fatalf("grow onto a group holding the topic: %v", err)
	}

	// A permission through the name server: every group of the topic.
	if _, err := c.UpdateTopic(ctx, "late", client.PermRead, []string{"gz"}); !errors.Is(err, cluster.ErrTopicNotFound) {
		t.Fatalf("perm on a group without the topic: %v", err)
	}
	got, err := c.UpdateTopic(ctx, "orders", client.PermRead, nil)
	if err != nil || len(got) != 2 || got["ga"].Perm != client.PermRead || got["gb"].Perm != client.PermRead {
		t.Fatalf("perm over both groups: %v %v", got, err)
	}
}
