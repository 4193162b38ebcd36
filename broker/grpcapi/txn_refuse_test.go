package grpcapi

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/mq"
)

// A half message sent through the gRPC API is refused before anything is
// stored: no decision can reach it there. A send a RocketMQ write path
// forwards is not refused here (it reaches the broker, which needs one).
func TestProduceRefusesHalfMessages(t *testing.T) {
	s := &Server{}
	req := &api.ProduceRequest{Topic: "t", Messages: []*api.ProduceMessage{
		{Body: []byte("a")},
		{Body: []byte("b"), Properties: map[string]string{mq.PropTransactionPrepared: "true"}},
	}}
	_, err := s.Produce(context.Background(), req)
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition {
		t.Fatalf("half message through gRPC: %v, want FailedPrecondition", err)
	}
	fwd := metadata.NewIncomingContext(context.Background(), metadata.Pairs(forwardedKey, "n2"))
	if !forwarded(fwd) {
		t.Fatal("a forwarded call is not recognised as forwarded")
	}
}
