package grpcapi

import (
	"context"
	"net"
	"testing"
	"time"
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
	p := NewPeers(map[string]string{"127.0.0.1:1": proxy.Addr().String()}, nil)
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
