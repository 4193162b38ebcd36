package server_test

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/api"
)

// TestNodeServesThePeerServiceAndTheLegacyNames: a node serves NodeState and
// Register on the Peer service and, for nodes of the release before it,
// under their old names on the Broker service.
func TestNodeServesThePeerServiceAndTheLegacyNames(t *testing.T) {
	c := newCluster(t, 1, nil)
	l := c.Leader()
	ctx := ctxT(t, 10*time.Second)
	conn, err := grpc.NewClient(c.Config(l).Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := c.Config(l).Raft.ID

	st, err := api.NewPeerClient(conn).NodeState(ctx, &api.NodeStateRequest{})
	if err != nil || st.Id != id || st.Role != "leader" {
		t.Fatalf("Peer/NodeState: %+v, %v", st, err)
	}
	old := new(api.NodeStateResponse)
	if err := conn.Invoke(ctx, "/raftmq.v1.Broker/NodeState", &api.NodeStateRequest{}, old); err != nil || old.Id != id {
		t.Fatalf("Broker/NodeState (legacy name): %+v, %v", old, err)
	}
	reg := &api.RegisterRequest{Id: "n9", ClientAddress: "127.0.0.1:1", PeerAddress: "127.0.0.1:1"}
	if _, err := api.NewPeerClient(conn).Register(ctx, reg); err != nil {
		t.Fatalf("Peer/Register: %v", err)
	}
	if err := conn.Invoke(ctx, "/raftmq.v1.Broker/Register", reg, new(api.RegisterResponse)); err != nil {
		t.Fatalf("Broker/Register (legacy name): %v", err)
	}
	if n, ok := c.Node(l).Store().Node("n9"); !ok || n.ClientAddr != "127.0.0.1:1" {
		t.Fatalf("registry after Register: %+v %v", n, ok)
	}
}
