package server_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
)

// TestListenersTellTheirOwnAddresses: every node has an internal and an
// external client listener. A client of the external listener is told the
// external addresses (status: the leader and every node; a pull's
// suggestion), one of the internal listener the internal ones. The
// internal addresses the nodes advertise to clients are unreachable (a
// closed port; the nodes reach each other through --peer-advertise), as
// the compose network is from the host: an SDK client given only one
// follower's external address still produces and consumes, which it could
// not if it were sent to an internal address.
func TestListenersTellTheirOwnAddresses(t *testing.T) {
	dead := make([]string, 3)
	for i := range dead {
		dead[i] = freeAddr(t) // nothing listens there
	}
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.ListenExternal = freeAddr(t)
		cfg.Broker.ClientAddr = dead[i]
		cfg.Broker.PeerAddr = cfg.Listen
	})
	l := c.Leader()
	f := (l + 1) % 3
	internal := map[string]string{}
	external := map[string]string{}
	for i, s := range c.Nodes() {
		id := c.Config(i).Raft.ID
		internal[id], external[id] = dead[i], s.ExternalAddr()
		if external[id] != c.Config(i).ListenExternal {
			t.Fatalf("node %s: external address %q, want its --listen-external %s", id, external[id], c.Config(i).ListenExternal)
		}
	}
	leaderID := c.Config(l).Raft.ID
	ctx := ctxT(t, 60*time.Second)

	dial := func(addr string) api.BrokerClient {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return api.NewBrokerClient(conn)
	}
	listeners := []struct {
		name  string
		addr  string
		addrs map[string]string
	}{
		{"external", c.Node(f).ExternalAddr(), external},
		{"internal", c.Config(f).Listen, internal},
	}
	for _, ls := range listeners {
		bc := dial(ls.addr)
		// The registry fills as the nodes register with the leader.
		var last *api.StatusResponse
		waitFor(t, 20*time.Second, ls.name+" addresses in the status of follower "+c.Config(f).Raft.ID, func() bool {
			st, err := bc.Status(ctx, &api.StatusRequest{})
			if err != nil {
				t.Logf("status through the %s listener: %v", ls.name, err)
				return false
			}
			last = st
			if st.LeaderId != leaderID || st.LeaderAddress != ls.addrs[leaderID] || len(st.Nodes) != 3 {
				return false
			}
			for _, n := range st.Nodes {
				if n.ClientAddress != ls.addrs[n.Id] {
					return false
				}
			}
			return true
		})
		t.Logf("%s listener: leader %s at %s, nodes %v", ls.name, last.LeaderId, last.LeaderAddress, last.Nodes)
	}

	// The SDK through one follower's external listener: the leader and
	// the suggestions it is told must be external addresses.
	cl, err := client.New(client.Config{Servers: []string{c.Node(f).ExternalAddr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "ext", 2, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	const n = 20
	for i := 0; i < n; i++ {
		if _, err := p.Send(ctx, "ext", client.Message{Body: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatalf("send %d through the external listener: %v", i, err)
		}
	}

	// A pull's suggestion names a node by the listener's address.
	for _, ls := range listeners {
		r, err := dial(ls.addr).Pull(ctx, &api.PullRequest{Topic: "ext", Queue: 0, Offset: 0, MaxMessages: 100})
		if err != nil {
			t.Fatalf("pull through the %s listener: %v", ls.name, err)
		}
		sg := r.GetSuggestion()
		if sg.GetNodeId() == "" || sg.GetAddress() != ls.addrs[sg.GetNodeId()] {
			t.Fatalf("pull through the %s listener: suggestion %v, want node %s's %s address %s", ls.name, sg, sg.GetNodeId(), ls.name, ls.addrs[sg.GetNodeId()])
		}
	}

	cn, err := cl.NewConsumer(client.ConsumerConfig{Group: "g", Topic: "ext", FollowerReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	got := map[string]bool{}
	for len(got) < n && ctx.Err() == nil {
		recs, err := cn.Poll(ctx)
		if err != nil {
			t.Fatalf("poll through the external listener: %v", err)
		}
		for _, r := range recs {
			got[string(r.Body)] = true
		}
	}
	if len(got) != n {
		t.Fatalf("consumed %d distinct messages through the external listener, want %d", len(got), n)
	}
}
