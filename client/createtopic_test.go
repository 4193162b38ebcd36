package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// lostCreateBroker creates the topic on the first CreateTopic and loses the
// answer (UNAVAILABLE, as a leader change does); later ones find it.
type lostCreateBroker struct {
	api.UnimplementedBrokerServer
	queues  int32
	creates atomic.Int32
}

func (b *lostCreateBroker) CreateTopic(_ context.Context, req *api.CreateTopicRequest) (*api.CreateTopicResponse, error) {
	if b.creates.Add(1) == 1 {
		b.queues = req.Queues
		return nil, status.Error(codes.Unavailable, "leadership lost")
	}
	return nil, status.Errorf(codes.AlreadyExists, "topic exists: %q has %d queues", req.Name, b.queues)
}

func (b *lostCreateBroker) DescribeTopic(_ context.Context, req *api.DescribeTopicRequest) (*api.DescribeTopicResponse, error) {
	return &api.DescribeTopicResponse{Topic: &api.TopicInfo{Name: req.Name, Queues: b.queues}}, nil
}

func (b *lostCreateBroker) Status(context.Context, *api.StatusRequest) (*api.StatusResponse, error) {
	return &api.StatusResponse{}, nil
}

// A CreateTopic whose first attempt created the topic but lost the answer
// returns the topic when its retry finds it with the queues asked; a topic
// that exists with other queues is still refused.
func TestCreateTopicRetryFindsItsOwnTopic(t *testing.T) {
	b := &lostCreateBroker{}
	c, err := New(Config{Servers: []string{serveBroker(t, b)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ti, err := c.CreateTopic(ctx, "r", 2, false)
	if err != nil || ti.GetQueues() != 2 || b.creates.Load() < 2 {
		t.Fatalf("create after a lost answer: %v, %v (%d attempts)", ti, err, b.creates.Load())
	}
	// Another caller's topic of another shape: not ours.
	if _, err := c.CreateTopic(ctx, "r", 4, false); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("create of an existing topic with other queues: %v, want AlreadyExists", err)
	}
}
