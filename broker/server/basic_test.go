package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
)

func TestProducePullEveryNode(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	b := c.Node(l).Broker()
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.CreateTopic(ctx, "orders", 2, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		res, err := c.produce(ctx, broker.ProduceRequest{Topic: "orders", ProducerID: "p1", Seq: uint64(i),
			Messages: []broker.ProduceMessage{{Key: "k", Body: []byte(fmt.Sprintf("m%d", i))}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Acks[0].Offset != uint64(i) {
			t.Fatalf("ack %d offset %d", i, res.Acks[0].Offset)
		}
	}
	// retry of seq 3 is a duplicate with the same ack
	res, err := c.produce(ctx, broker.ProduceRequest{Topic: "orders", ProducerID: "p1", Seq: 3,
		Messages: []broker.ProduceMessage{{Key: "k", Body: []byte("m3")}}})
	if err != nil || !res.Duplicate || res.Acks[0].Offset != 3 {
		t.Fatalf("retry: %+v %v", res, err)
	}
	q := int32(res.Acks[0].Queue)
	for i, s := range c.Nodes() {
		waitFor(t, 10*time.Second, "replication", func() bool {
			r, err := s.Broker().Pull(ctx, broker.PullRequest{Topic: "orders", Queue: q, Offset: 0, MaxMessages: 100})
			return err == nil && len(r.Messages) == 10
		})
		r, _ := s.Broker().Pull(ctx, broker.PullRequest{Topic: "orders", Queue: q, Offset: 0, MaxMessages: 100})
		for j, m := range r.Messages {
			if string(m.Body) != fmt.Sprintf("m%d", j) || m.Offset != uint64(j) {
				t.Fatalf("node %d msg %d: %q at %d", i, j, m.Body, m.Offset)
			}
		}
	}
}
