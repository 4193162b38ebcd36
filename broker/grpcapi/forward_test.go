package grpcapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// TestForward: the adapter forwards a call exactly when the broker names
// another node as leader at a known address and the call was not
// forwarded already; otherwise the broker's error leaves as a status.
func TestForward(t *testing.T) {
	leader := &countingBroker{}
	srv := grpc.NewServer()
	api.RegisterBrokerServer(srv, leader)
	addr := serve(t, srv)
	p := NewPeers(nil, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	forwardedCtx := metadata.NewIncomingContext(ctx, metadata.Pairs(forwardedKey, "n3"))

	produce := func(ctx context.Context, err error) (*api.ProduceResponse, error) {
		return forward(ctx, "n1", p, func() (*api.ProduceResponse, error) {
			if err != nil {
				return nil, err
			}
			return &api.ProduceResponse{NodeId: "n1"}, nil
		}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.ProduceResponse, error) {
			if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get(forwardedKey)) != 1 || md.Get(forwardedKey)[0] != "n1" {
				t.Errorf("forwarded without %s naming this node: %v", forwardedKey, md)
			}
			return api.NewBrokerClient(cc).Produce(ctx, &api.ProduceRequest{Topic: "t"})
		})
	}
	cases := []struct {
		name      string
		ctx       context.Context
		err       error
		code      codes.Code
		forwarded bool
	}{
		{"served here", ctx, nil, codes.OK, false},
		{"another node leads: forwarded", ctx, &broker.NotLeaderError{LeaderID: "n2", PeerAddr: addr}, codes.OK, true},
		{"wrapped, still forwarded", ctx, errors.Join(errors.New("x"), &broker.NotLeaderError{LeaderID: "n2", PeerAddr: addr}), codes.OK, true},
		{"a forwarded call is never forwarded again", forwardedCtx, &broker.NotLeaderError{LeaderID: "n2", PeerAddr: addr}, codes.Unavailable, false},
		{"no leader known", ctx, &broker.NotLeaderError{}, codes.Unavailable, false},
		{"the leader's address is not known", ctx, &broker.NotLeaderError{LeaderID: "n2"}, codes.Unavailable, false},
		{"named as leader itself", ctx, &broker.NotLeaderError{LeaderID: "n1", PeerAddr: addr}, codes.Unavailable, false},
		{"another error", ctx, broker.ErrInvalidArgument, codes.InvalidArgument, false},
	}
	for _, c := range cases {
		before := leader.produces.Load()
		_, err := produce(c.ctx, c.err)
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
		if got := leader.produces.Load() > before; got != c.forwarded {
			t.Errorf("%s: forwarded %v, want %v", c.name, got, c.forwarded)
		}
	}
}
