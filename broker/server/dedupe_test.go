package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/store"
)

func bodies(bs ...string) []broker.ProduceMessage {
	out := make([]broker.ProduceMessage, len(bs))
	for i, b := range bs {
		out[i] = broker.ProduceMessage{Body: []byte(b)}
	}
	return out
}

// ranges is every queue's [min, max) of a topic as node i has applied it
// (the error when it does not know the topic yet).
func (c *cluster) ranges(t *testing.T, i int, topic string) string {
	t.Helper()
	ti, err := c.Node(i).Broker().Topic(topic)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(ti.Queues)
}

// checkAcksHold pulls every acked offset from node i and checks that it holds
// the message the ack was for.
func (c *cluster) checkAcksHold(ctx context.Context, t *testing.T, i int, topic string, acks []store.Ack, want []string) {
	t.Helper()
	for j, a := range acks {
		r, err := c.Node(i).Broker().Pull(ctx, broker.PullRequest{Topic: topic, Queue: int32(a.Queue), Offset: a.Offset, MaxMessages: 1})
		if err != nil || len(r.Messages) != 1 || string(r.Messages[0].Body) != want[j] || r.Messages[0].ID != a.ID() {
			t.Fatalf("node %d: ack %+v does not hold %q: %+v %v", i, a, want[j], r.Messages, err)
		}
	}
}

// Defect: a reused producer sequence was acknowledged but never stored.
// Through real raft on three nodes: another body or more messages under a
// seen (producer id, sequence) are refused with ErrSequenceReused, nothing
// is stored, the first message stays at its offset; a true retry (re-stamped
// by the leader) is a duplicate with the first acks, also after a leadership
// transfer; over gRPC, from the leader or forwarded by a follower, the
// refusal is InvalidArgument with the SEQUENCE_REUSED reason.
func TestReusedSequenceRefusedThroughRaft(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	ctx := ctxT(t, 90*time.Second)
	if _, err := c.Node(l).Broker().CreateTopic(ctx, "dd", 4, false); err != nil {
		t.Fatal(err)
	}
	orig := broker.ProduceRequest{Topic: "dd", ProducerID: "reuser", Seq: 1, Messages: bodies("first", "second")}
	first, err := c.produce(ctx, orig)
	if err != nil {
		t.Fatal(err)
	}
	// Another producer's message right behind, where extra acks would point.
	if _, err := c.produce(ctx, broker.ProduceRequest{Topic: "dd", ProducerID: "other", Seq: 1, Messages: bodies("theirs", "theirs too")}); err != nil {
		t.Fatal(err)
	}
	before := c.ranges(t, l, "dd")

	refused := func(req broker.ProduceRequest, what string) {
		t.Helper()
		res, err := c.produce(ctx, req)
		if !errors.Is(err, broker.ErrSequenceReused) || len(res.Acks) != 0 {
			t.Fatalf("%s: %+v, %v; want ErrSequenceReused and no acks", what, res, err)
		}
		if !strings.Contains(err.Error(), `producer "reuser" sequence 1`) {
			t.Fatalf("%s: error %q does not name the producer and sequence", what, err)
		}
	}
	refused(broker.ProduceRequest{Topic: "dd", ProducerID: "reuser", Seq: 1, Messages: bodies("first", "changed")}, "other body")
	refused(broker.ProduceRequest{Topic: "dd", ProducerID: "reuser", Seq: 1, Messages: bodies("first", "second", "third")}, "more messages")
	refused(broker.ProduceRequest{Topic: "dd", ProducerID: "reuser", Seq: 1, Messages: bodies("first")}, "fewer messages")

	// Over gRPC, at the leader and forwarded by a follower.
	for _, i := range []int{l, (l + 1) % 3} {
		cc, err := api.Dial(c.Config(i).Listen)
		if err != nil {
			t.Fatal(err)
		}
		_, err = api.NewBrokerClient(cc).Produce(ctx, &api.ProduceRequest{Topic: "dd", ProducerId: "reuser", Sequence: 1,
			Messages: []*api.ProduceMessage{{Body: []byte("first")}, {Body: []byte("gRPC")}}})
		cc.Close()
		st := status.Convert(err)
		reason := ""
		for _, d := range st.Details() {
			if ei, ok := d.(*errdetails.ErrorInfo); ok {
				reason = ei.Reason
			}
		}
		if st.Code() != codes.InvalidArgument || reason != api.ReasonSequenceReused {
			t.Fatalf("gRPC via node %d (leader %d): %v, reason %q", i, l, err, reason)
		}
	}

	for i := range c.Nodes() {
		waitFor(t, 20*time.Second, "every node to apply the refusals", func() bool { return c.ranges(t, i, "dd") == before })
		c.checkAcksHold(ctx, t, i, "dd", first.Acks, []string{"first", "second"})
	}

	// The true retry, re-stamped by the leader: the first acks.
	again, err := c.produce(ctx, orig)
	if err != nil || !again.Duplicate || fmt.Sprint(again.Acks) != fmt.Sprint(first.Acks) {
		t.Fatalf("retry: %+v %v; want dup=true with %v", again, err, first.Acks)
	}

	// After a leadership transfer the new leader knows both.
	if _, _, err := c.Node(l).Broker().TransferLeader(ctx, ""); err != nil {
		t.Fatal(err)
	}
	nl := c.LeaderExcept(l)
	again, err = c.produce(ctx, orig)
	if err != nil || !again.Duplicate || fmt.Sprint(again.Acks) != fmt.Sprint(first.Acks) {
		t.Fatalf("retry on the new leader %d: %+v %v; want dup=true with %v", nl, again, err, first.Acks)
	}
	refused(broker.ProduceRequest{Topic: "dd", ProducerID: "reuser", Seq: 1, Messages: bodies("first", "changed")}, "other body on the new leader")
	if got := c.ranges(t, nl, "dd"); got != before {
		t.Fatalf("queues on the new leader %s, want %s", got, before)
	}
	c.checkAcksHold(ctx, t, nl, "dd", first.Acks, []string{"first", "second"})
}
