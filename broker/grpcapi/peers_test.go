package grpcapi

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/raftmq/raftmq/api"
)

// A dial override sends the node-to-node calls for a peer's address to
// another address (the fault suite's proxy): the peer's own address is
// never dialed.
func TestPeersDialOverride(t *testing.T) {
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		c, err := proxy.Accept()
		if err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	p := NewPeers("n0", map[string]string{"127.0.0.1:1": proxy.Addr().String()}, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p.NodeState(ctx, "127.0.0.1:1") // fails: the "proxy" speaks no gRPC
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the override address was not dialed")
	}
}

// streamLeader serves ProduceStream and records what marks each stream.
type streamLeader struct {
	api.UnimplementedBrokerServer
	mu        sync.Mutex
	forwarded []string // forwardedKey of each stream opened
	unary     atomic.Int64
}

func (l *streamLeader) ProduceStream(st api.Broker_ProduceStreamServer) error {
	md, _ := metadata.FromIncomingContext(st.Context())
	l.mu.Lock()
	l.forwarded = append(l.forwarded, strings.Join(md.Get(forwardedKey), ","))
	l.mu.Unlock()
	for {
		c, err := st.Recv()
		if err != nil {
			return nil
		}
		st.Send(&api.ProduceReply{Id: c.Id, Response: &api.ProduceResponse{NodeId: c.Request.Topic}})
	}
}

func (l *streamLeader) Produce(context.Context, *api.ProduceRequest) (*api.ProduceResponse, error) {
	l.unary.Add(1)
	return &api.ProduceResponse{NodeId: "unary"}, nil
}

// TestPeersForwardProduceOnAStream: the produce calls a node forwards share
// one stream to the leader, which carries the mark of a forwarded call
// naming the node, so that the leader never forwards them again.
func TestPeersForwardProduceOnAStream(t *testing.T) {
	leader := &streamLeader{}
	srv := grpc.NewServer()
	api.RegisterBrokerServer(srv, leader)
	addr := serve(t, srv)
	p := NewPeers("n2", nil, nil)
	defer p.Close()
	cc, err := p.Conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, topic := range []string{"a", "b", "c"} {
		r, err := p.Produce(ctx, cc, &api.ProduceRequest{Topic: topic})
		if err != nil || r.NodeId != topic {
			t.Fatalf("call %s: %v, %v", topic, r, err)
		}
	}
	leader.mu.Lock()
	defer leader.mu.Unlock()
	if len(leader.forwarded) != 1 || leader.forwarded[0] != "n2" || leader.unary.Load() != 0 {
		t.Fatalf("streams marked %q and %d unary calls; want one stream marked n2 and none", leader.forwarded, leader.unary.Load())
	}
}
