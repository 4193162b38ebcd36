package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/raftmq/raftmq/api"
)

// groupNode is a one-node group with id group that records the group id
// each call names.
type groupNode struct {
	api.UnimplementedBrokerServer
	group string
	addr  string
	mu    sync.Mutex
	named []string
}

func (g *groupNode) note(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	g.mu.Lock()
	g.named = append(g.named, md.Get(api.GroupIDKey)...)
	g.mu.Unlock()
}

func (g *groupNode) Status(ctx context.Context, _ *api.StatusRequest) (*api.StatusResponse, error) {
	g.note(ctx)
	return &api.StatusResponse{Term: 1, LeaderId: "n1", LeaderAddress: g.addr, AnsweredBy: "n1", GroupId: g.group}, nil
}

func (g *groupNode) Produce(ctx context.Context, r *api.ProduceRequest) (*api.ProduceResponse, error) {
	g.note(ctx)
	return &api.ProduceResponse{Acks: make([]*api.Ack, len(r.Messages))}, nil
}

// TestClientPinsItsGroup: a client pins the id of the first group that
// answers and names it in its calls after that; a client given a group id
// names that one from its first call and does not take another group's
// node for its leader.
func TestClientPinsItsGroup(t *testing.T) {
	n := &groupNode{group: "g1"}
	n.addr = serveBroker(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cl, err := New(Config{Servers: []string{n.addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.NewProducer().Send(ctx, "t", Message{Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if got := cl.GroupID(); got != "g1" {
		t.Fatalf("pinned group %q, want g1", got)
	}
	n.mu.Lock()
	named := append([]string(nil), n.named...)
	n.mu.Unlock()
	if len(named) == 0 || named[len(named)-1] != "g1" {
		t.Fatalf("calls named groups %v, want the produce to name g1", named)
	}

	set, err := New(Config{Servers: []string{n.addr}, GroupID: "g2"})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	set.refreshLeader(ctx)
	if got := set.leaderAddr(); got != "" {
		t.Fatalf("a client of group g2 took a node of g1 (%s) for its leader", got)
	}
	if got := set.GroupID(); got != "g2" {
		t.Fatalf("a client given group g2 reports %q", got)
	}
	n.mu.Lock()
	last := n.named[len(n.named)-1]
	n.mu.Unlock()
	if last != "g2" {
		t.Fatalf("the status call of a client given g2 named %q", last)
	}
}
