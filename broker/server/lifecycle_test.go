package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/mq"
)

func wantCode(t *testing.T, what string, err error, code codes.Code, text string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(err.Error(), text) {
		t.Errorf("%s: %v, want %s containing %q", what, err, code, text)
	}
}

// pullOnce pulls queue 0 of topic from offset 0 on the leader, directly.
func pullOnce(ctx context.Context, c *servertest.Cluster, topic string) (*api.PullResponse, error) {
	conn, err := grpc.NewClient(c.Config(c.Leader()).Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return api.NewBrokerClient(conn).Pull(ctx, &api.PullRequest{Topic: topic, Queue: 0, Offset: 0})
}

// TestTopicPermissions: a topic without write permission refuses producers,
// one without read permission refuses pulls, every answer carries the
// permission, and system topics are the broker's alone.
func TestTopicPermissions(t *testing.T) {
	c := servertest.New(t, 3)
	c.Leader()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*servertest.WaitTimeout)
	defer cancel()
	ti, err := cl.CreateTopic(ctx, "p", 1, false)
	if err != nil || ti.Perm != 6 {
		t.Fatalf("create: %v %v, want perm 6", ti, err)
	}
	p := cl.NewProducer()
	one := client.Message{Body: []byte("x")}
	if _, err := p.Send(ctx, "p", one); err != nil {
		t.Fatal(err)
	}

	if ti, err = cl.UpdateTopic(ctx, "p", client.PermRead); err != nil || ti.Perm != 4 {
		t.Fatalf("update to 4: %v %v", ti, err)
	}
	_, err = p.Send(ctx, "p", one)
	wantCode(t, "produce to a read-only topic", err, codes.FailedPrecondition, `topic "p" is not writable (perm 4)`)
	if r, err := pullOnce(ctx, c, "p"); err != nil || len(r.Messages) != 1 {
		t.Errorf("pull of a read-only topic: %v %v, want its message", r, err)
	}

	if _, err = cl.UpdateTopic(ctx, "p", client.PermWrite); err != nil {
		t.Fatal(err)
	}
	_, err = pullOnce(ctx, c, "p")
	wantCode(t, "pull of a write-only topic", err, codes.FailedPrecondition, `topic "p" is not readable (perm 2)`)
	if _, err := p.Send(ctx, "p", one); err != nil {
		t.Errorf("produce to a write-only topic: %v", err)
	}
	_, err = cl.UpdateTopic(ctx, "p", 5)
	wantCode(t, "perm 5", err, codes.InvalidArgument, "want 2 (write only), 4 (read only) or 6")
	if ts, err := cl.ListTopics(ctx); err != nil || len(ts) != 1 || ts[0].Perm != 2 {
		t.Errorf("list: %v %v, want p with perm 2", ts, err)
	}
	// Every node holds the permission (it is replicated).
	for i := 0; i < c.Size(); i++ {
		deadline := time.Now().Add(servertest.WaitTimeout)
		for {
			ti, err := c.Node(i).Store().Topic("p")
			if err == nil && ti.Perm == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: topic %+v %v, want perm 2", i, ti, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	_, err = cl.CreateTopic(ctx, mq.RetryTopic("g"), 1, false)
	wantCode(t, "create a retry topic", err, codes.InvalidArgument, "system topic")
	_, err = p.Send(ctx, mq.DeadLetterTopic("g"), one)
	wantCode(t, "produce to a dead-letter topic", err, codes.FailedPrecondition, "only the broker writes to it")
	err = cl.DeleteTopic(ctx, mq.ScheduleTopic, true)
	wantCode(t, "delete the schedule topic", err, codes.FailedPrecondition, "system topic")
}

// TestDeleteTopic: refused while a consumer of the topic is connected,
// naming its group; afterwards nothing of it is served on any node, the
// groups' offsets of it are gone, and a topic created again under the name
// starts empty.
func TestDeleteTopic(t *testing.T) {
	c := servertest.New(t, 3, servertest.Configure(func(_ int, cfg *server.Config) { cfg.Broker.AutoCreateTopics = false }))
	c.Leader()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*servertest.WaitTimeout)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, "d", 1, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	sendN(t, ctx, p, "d", 0, 10)
	cons, err := cl.NewConsumer(client.DefaultConsumerConfig("d", "readers"))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 10; {
		recs, err := cons.Poll(ctx)
		if err != nil && !client.Retryable(err) {
			t.Fatal(err)
		}
		n += len(recs)
	}
	if err := cons.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = cl.DeleteTopic(ctx, "d", false)
	wantCode(t, "delete with a connected consumer", err, codes.FailedPrecondition, "group readers (1 member(s)); stop them first, or delete anyway with --force")
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteTopic(ctx, "d", false); err != nil {
		t.Fatalf("delete after the consumer left: %v", err)
	}
	err = cl.DeleteTopic(ctx, "d", false)
	wantCode(t, "delete again", err, codes.NotFound, `"d"`)
	_, err = pullOnce(ctx, c, "d")
	wantCode(t, "pull of a deleted topic", err, codes.NotFound, `"d"`)
	_, err = p.Send(ctx, "d", client.Message{Body: []byte("late")})
	wantCode(t, "produce to a deleted topic", err, codes.NotFound, `topic "d" does not exist`)
	for i := 0; i < c.Size(); i++ {
		deadline := time.Now().Add(servertest.WaitTimeout)
		for c.Node(i).Store().QueueCount("d") != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("node %d still holds topic d", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if _, err := cl.CreateTopic(ctx, "d", 1, false); err != nil {
		t.Fatal(err)
	}
	ti, err := cl.DescribeTopic(ctx, "d")
	if err != nil || ti.QueueInfo[0].MaxOffset != 0 {
		t.Fatalf("re-created topic: %v %v, want empty", ti, err)
	}
	if offs, err := cl.FetchOffsets(ctx, "readers", "d"); err != nil || len(offs) != 0 {
		t.Errorf("offsets of the re-created topic: %v %v, want none", offs, err)
	}
	acks, err := p.Send(ctx, "d", client.Message{Body: []byte("new")})
	if err != nil || acks[0].Offset != 0 {
		t.Errorf("first message of the re-created topic: %v %v, want offset 0", acks, err)
	}
	// The old messages stay unreachable: a consumer reads only the new one.
	got, _ := consumeFiltered(t, cl, client.DefaultConsumerConfig("d", "fresh"), map[int32]uint64{0: 1})
	if strings.Join(got, ",") != "new" {
		t.Errorf("re-created topic served %v, want only [new]", got)
	}
}

// TestDeleteGroup: refused while the group has a connected member unless
// forced; its offsets, its broadcasting members' offsets and its retry
// topic are gone afterwards.
func TestDeleteGroup(t *testing.T) {
	c := servertest.New(t, 3)
	l := c.Leader()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*servertest.WaitTimeout)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}
	// The broker's own path creates the group's retry topic.
	if _, err := c.Node(l).Broker().CreateTopic(ctx, mq.RetryTopic("gg"), 1, true); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	sendN(t, ctx, p, "t", 0, 4)
	if err := cl.CommitMemberOffsets(ctx, "gg", "b1", []*api.QueueOffset{{Topic: "t", Queue: 0, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	cons, err := cl.NewConsumer(client.DefaultConsumerConfig("t", "gg"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Poll(ctx); err != nil && !client.Retryable(err) {
		t.Fatal(err)
	}
	if err := cons.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	err = cl.DeleteGroup(ctx, "gg", false)
	wantCode(t, "delete a group with a connected member", err, codes.FailedPrecondition, `consumer group "gg" has 1 connected member(s)`)
	if err := cl.DeleteGroup(ctx, "gg", true); err != nil {
		t.Fatalf("forced delete: %v", err)
	}
	if offs, err := cl.FetchOffsets(ctx, "gg", "t"); err != nil || len(offs) != 0 {
		t.Errorf("group offsets after delete: %v %v", offs, err)
	}
	if offs, err := cl.FetchMemberOffsets(ctx, "gg", "b1", "t"); err != nil || len(offs) != 0 {
		t.Errorf("member offsets after delete: %v %v", offs, err)
	}
	if _, err := cl.DescribeTopic(ctx, mq.RetryTopic("gg")); status.Code(err) != codes.NotFound {
		t.Errorf("retry topic after delete: %v, want NotFound", err)
	}
	err = cl.DeleteGroup(ctx, "never", false)
	wantCode(t, "delete an unknown group", err, codes.NotFound, `consumer group "never" has no committed offsets`)
	err = cl.DeleteGroup(ctx, "bad name", false)
	wantCode(t, "delete a bad name", err, codes.InvalidArgument, "group name")
	cons.Close(ctx)
}
