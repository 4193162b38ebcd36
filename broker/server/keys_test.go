package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/servertest"
)

// findOn asks node i (directly: every node answers from its own index)
// until it answers want messages or the wait ends, and returns the last
// answer.
func findOn(t *testing.T, ctx context.Context, c *servertest.Cluster, i int, topic, key string, want int) *api.FindMessagesResponse {
	t.Helper()
	conn, err := grpc.NewClient(c.Config(i).Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var r *api.FindMessagesResponse
	for deadline := time.Now().Add(servertest.WaitTimeout); ; time.Sleep(20 * time.Millisecond) {
		r, err = api.NewBrokerClient(conn).FindMessages(ctx, &api.FindMessagesRequest{Topic: topic, Key: key, MaxMessages: 100})
		if err == nil && len(r.Messages) == want || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("find %s on node %d: %v", key, i, err)
	}
	return r
}

func foundBodies(r *api.FindMessagesResponse) string {
	var out []string
	for _, m := range r.Messages {
		out = append(out, fmt.Sprintf("%d:%d=%s", m.Queue, m.Offset, m.Body))
	}
	return strings.Join(out, ",")
}

// TestFindMessagesOnEveryNode: every node of a real group answers a key
// lookup from its own index with the same messages at the offsets their
// acks named; a node whose index is deleted, and a node killed mid-way,
// build it again from their logs.
func TestFindMessagesOnEveryNode(t *testing.T) {
	c := servertest.New(t, 3)
	c.Leader()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*servertest.WaitTimeout)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, "orders", 3, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	var want []string
	for i := 0; i < 40; i++ {
		m := client.Message{Key: fmt.Sprintf("order-%d cust-%d", i, i%4), Body: []byte(fmt.Sprintf("b%d", i))}
		acks, err := p.Send(ctx, "orders", m)
		if err != nil {
			t.Fatal(err)
		}
		if i%4 == 1 {
			want = append([]string{fmt.Sprintf("%d:%d=b%d", acks[0].Queue, acks[0].Offset, i)}, want...) // newest first
		}
	}
	exp := strings.Join(want, ",")
	for i := 0; i < 3; i++ {
		r := findOn(t, ctx, c, i, "orders", "cust-1", 10)
		if got := foundBodies(r); got != exp || r.ServedBy != fmt.Sprintf("n%d", i+1) {
			t.Errorf("node %d: %s served by %s, want %s served by n%d", i, got, r.ServedBy, exp, i+1)
		}
	}

	// Node 2 loses its index (stopped, directory removed); node 3 is killed.
	c.Stop(1)
	if err := os.RemoveAll(filepath.Join(c.Config(1).DataDir, "keyindex")); err != nil {
		t.Fatal(err)
	}
	c.Kill(2)
	c.Restart(1)
	c.Restart(2)
	c.Leader()
	if _, err := p.Send(ctx, "orders", client.Message{Key: "cust-1", Body: []byte("late")}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		r := findOn(t, ctx, c, i, "orders", "cust-1", 11)
		if got := foundBodies(r); !strings.HasSuffix(got, ","+exp) || !strings.Contains(got, "=late") {
			t.Errorf("node %d after restart: %s, want the late message then %s", i, got, exp)
		}
	}
	if r := findOn(t, ctx, c, 0, "orders", "order-7", 1); foundBodies(r) == "" || !strings.HasSuffix(foundBodies(r), "=b7") {
		t.Errorf("order-7: %s", foundBodies(r))
	}
}
