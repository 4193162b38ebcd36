package cluster_test

import (
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// One Send of several unpinned messages spreads them over every queue of
// every group, one queue after the other, as one group's producer spreads
// them over its queues; the acks keep the messages' order.
func TestOneSendSpreadsOverEveryGroup(t *testing.T) {
	c, _, ctx := twoGroupCluster(t)
	createTopic(ctx, t, c, "spread", 4)
	p := c.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	msgs := make([]cluster.Message, 8)
	for i := range msgs {
		msgs[i] = cluster.Message{Message: client.Message{Body: []byte(fmt.Sprintf("m%d", i))}}
	}
	acks, err := p.Send(ctx, "spread", msgs...)
	if err != nil {
		t.Fatal(err)
	}
	perQueue := map[cluster.Queue]int{}
	for i, a := range acks {
		if a.Ack == nil {
			t.Fatalf("message %d has no ack: %+v", i, acks)
		}
		perQueue[cluster.Queue{Group: a.Group, Queue: a.Queue}]++
	}
	for _, q := range []cluster.Queue{{Group: "ga", Queue: 0}, {Group: "ga", Queue: 1}, {Group: "gb", Queue: 0}, {Group: "gb", Queue: 1}} {
		if perQueue[q] != 2 {
			t.Errorf("queue %v got %d of 8 messages, want 2 (every queue of both groups in turn): %v", q, perQueue[q], perQueue)
		}
	}
	// The groups hold what the acks say: two messages on each queue.
	for _, g := range []string{"ga", "gb"} {
		gc, err := c.Client(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		ti, err := gc.DescribeTopic(ctx, "spread")
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range ti.QueueInfo {
			if q.MaxOffset != 2 {
				t.Errorf("group %s queue %d ends at offset %d, want 2", g, q.Queue, q.MaxOffset)
			}
		}
	}
}
