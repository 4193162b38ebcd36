package grpcapi

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/store"
)

// fakePeer answers the Peer methods.
type fakePeer struct {
	api.UnimplementedPeerServer
	registered chan *api.RegisterRequest
}

func (f *fakePeer) NodeState(context.Context, *api.NodeStateRequest) (*api.NodeStateResponse, error) {
	return &api.NodeStateResponse{Id: "n3", Role: "Follower", AppliedIndex: 42}, nil
}

func (f *fakePeer) Register(_ context.Context, r *api.RegisterRequest) (*api.RegisterResponse, error) {
	f.registered <- r
	return &api.RegisterResponse{}, nil
}

func serve(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// TestPeerCallsReachANodeOfTheLegacyRelease: a node of the release before
// the Peer service serves NodeState and Register only on the Broker
// service. The server here is one: it knows no Peer service, only the
// legacy names (which is also how a new node answers an old one). Peers
// asks the Peer service first, then falls back.
func TestPeerCallsReachANodeOfTheLegacyRelease(t *testing.T) {
	fake := &fakePeer{registered: make(chan *api.RegisterRequest, 1)}
	addr := serve(t, grpc.NewServer(grpc.UnknownServiceHandler(legacyHandler(fake))))
	p := NewPeers("n0", nil, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	cc, err := p.Conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewPeerClient(cc).NodeState(ctx, &api.NodeStateRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("the legacy server answered the Peer service: %v", err)
	}
	st, err := p.NodeState(ctx, addr)
	if err != nil || st.ID != "n3" || st.Applied != 42 {
		t.Fatalf("NodeState through the legacy name: %+v, %v", st, err)
	}
	if err := p.Register(ctx, addr, store.NodeInfo{ID: "n2", ClientAddr: "c2", PeerAddr: "p2"}); err != nil {
		t.Fatalf("Register through the legacy name: %v", err)
	}
	if r := <-fake.registered; r.Id != "n2" || r.ClientAddress != "c2" || r.PeerAddress != "p2" {
		t.Fatalf("registered %+v", r)
	}
	if err := cc.Invoke(ctx, "/raftmq.v1.Broker/Produce", &api.ProduceRequest{}, &api.ProduceResponse{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("the legacy handler answered another method: %v", err)
	}
}

// TestPeerCallsUseThePeerService: against a node of this release the Peer
// service answers at once.
func TestPeerCallsUseThePeerService(t *testing.T) {
	fake := &fakePeer{registered: make(chan *api.RegisterRequest, 1)}
	srv := grpc.NewServer()
	api.RegisterPeerServer(srv, fake)
	addr := serve(t, srv)
	p := NewPeers("n0", nil, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := p.NodeState(ctx, addr); err != nil || st.ID != "n3" {
		t.Fatalf("NodeState: %+v, %v", st, err)
	}
}
