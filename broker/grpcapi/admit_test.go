package grpcapi

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// countingBroker answers every call and counts the produce calls that
// reached it.
type countingBroker struct {
	api.UnimplementedBrokerServer
	produces atomic.Int32
}

func (c *countingBroker) Produce(context.Context, *api.ProduceRequest) (*api.ProduceResponse, error) {
	c.produces.Add(1)
	return &api.ProduceResponse{}, nil
}

func (c *countingBroker) Status(context.Context, *api.StatusRequest) (*api.StatusResponse, error) {
	return &api.StatusResponse{}, nil
}

// TestAdmitProduceRefusesBeforeTheHandler runs a real gRPC server with the
// admission tap: while admission fails, produce calls end ResourceExhausted
// (which the SDK retries) without reaching the handler, and other calls
// still go through.
func TestAdmitProduceRefusesBeforeTheHandler(t *testing.T) {
	var full atomic.Bool
	admit := func() error {
		if full.Load() {
			return fmt.Errorf("%w: test budget used up", broker.ErrBusy)
		}
		return nil
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.InTapHandle(admitProduce(admit)))
	impl := &countingBroker{}
	api.RegisterBrokerServer(srv, impl)
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := api.NewBrokerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &api.ProduceRequest{Topic: "t", Messages: []*api.ProduceMessage{{Body: make([]byte, 1<<20)}}}

	if _, err := cl.Produce(ctx, req); err != nil {
		t.Fatalf("produce with room: %v", err)
	}
	full.Store(true)
	for i := 0; i < 3; i++ {
		_, err := cl.Produce(ctx, req)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("produce while full: got %v, want ResourceExhausted", err)
		}
	}
	if _, err := cl.Status(ctx, &api.StatusRequest{}); err != nil {
		t.Fatalf("status while full: %v", err)
	}
	if n := impl.produces.Load(); n != 1 {
		t.Fatalf("handler saw %d produce calls, want 1 (refused calls must not reach it)", n)
	}
	full.Store(false)
	if _, err := cl.Produce(ctx, req); err != nil {
		t.Fatalf("produce after room came back: %v", err)
	}
}
