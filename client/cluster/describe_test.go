package cluster_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// DescribeConsumerGroup answers for every group that knows the consumer
// group: its committed offsets and lag there, so the lag of a consumer
// group over a topic spread on groups adds up across them.
func TestDescribeConsumerGroupOnEveryGroup(t *testing.T) {
	c, _, ctx := twoGroupCluster(t)
	createTopic(ctx, t, c, "t", 4)
	p := c.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	send := func(m cluster.Message, n int) {
		t.Helper()
		for i := range n {
			m.Body = fmt.Appendf(nil, "m%d", i)
			if _, err := p.Send(ctx, "t", m); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(cluster.Message{}, 8)
	cons, err := c.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: client.DefaultConsumerConfig("t", "readers")})
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 8; {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got += len(recs)
	}
	if err := cons.Close(ctx); err != nil { // commits what was read
		t.Fatal(err)
	}
	zero := int32(0)
	send(cluster.Message{Group: "gb", Message: client.Message{Queue: &zero}}, 3)

	byGroup, err := c.DescribeConsumerGroup(ctx, "readers")
	if err != nil || len(byGroup) != 2 {
		t.Fatalf("describe readers: %v groups, error %v; want both groups", len(byGroup), err)
	}
	for g, want := range map[string]uint64{"ga": 0, "gb": 3} {
		var lag uint64
		for _, q := range byGroup[g].Queues {
			lag += q.Lag
		}
		if lag != want {
			t.Errorf("group %s: lag %d, want %d (%v)", g, lag, want, byGroup[g].Queues)
		}
	}
	if _, err := c.DescribeConsumerGroup(ctx, "nobody"); !errors.Is(err, cluster.ErrConsumerGroupNotFound) {
		t.Fatalf("describe a consumer group no group knows: %v, want ErrConsumerGroupNotFound", err)
	}
}
