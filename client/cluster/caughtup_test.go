package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// A consumer over two groups is not caught up before it has read both
// groups' messages, even when one group's poller joins its consumer group
// later than the other's: `consume --namesrv` stops at CaughtUp.
func TestCaughtUpWaitsForEveryGroup(t *testing.T) {
	c, _, ctx := twoGroupCluster(t)
	createTopic(ctx, t, c, "t", 2)
	p := c.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	for _, g := range []string{"ga", "gb"} {
		for i := 0; i < 5; i++ {
			if _, err := p.Send(ctx, "t", cluster.Message{Group: g, Message: client.Message{Body: []byte(fmt.Sprint(g, i))}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	end, err := c.EndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 5; round++ {
		cfg := client.DefaultConsumerConfig("t", fmt.Sprint("cg", round))
		cfg.Wait = 100 * time.Millisecond
		cn, err := c.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: cfg})
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for !cn.CaughtUp(end) {
			recs, err := cn.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			seen += len(recs)
		}
		if seen != 10 {
			t.Fatalf("round %d: caught up after %d of 10 messages", round, seen)
		}
		cn.Close(ctx)
	}
	// Reading only one group, that group is enough.
	cfg := client.DefaultConsumerConfig("t", "only-gb")
	cfg.Wait = 100 * time.Millisecond
	cn, err := c.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: cfg, Groups: []string{"gb"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	seen := 0
	waitFor(t, "gb read", func() bool {
		recs, err := cn.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(recs)
		return cn.CaughtUp(end)
	})
	if seen != 5 {
		t.Fatalf("reading gb only: caught up after %d of 5", seen)
	}
}
