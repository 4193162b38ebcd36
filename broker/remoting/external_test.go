package remoting_test

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/namesrv"
	rmq "github.com/raftmq/raftmq/remoting"
)

// A node with external addresses registers both kinds, and a name server
// with an external listener hands each kind out on its own listener: the
// SDK through either reaches the group at the addresses of that kind.
func TestNodesRegisterInternalAndExternalAddresses(t *testing.T) {
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", ListenExternal: "127.0.0.1:0", Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	const published = "127.0.0.1:19911" // the remoting port as a host would publish it
	c := servertest.New(t, 1, servertest.InMemory(), servertest.Configure(func(i int, cfg *server.Config) {
		cfg.ListenExternal = "127.0.0.1:0"
		cfg.Remoting = "127.0.0.1:0"
		cfg.RemotingConfig.ExternalAddr = published
		cfg.RemotingConfig.NameServers = []string{ns.Addr()}
		cfg.RemotingConfig.RegisterPeriod = time.Second
	}))
	c.Leader()
	bc := c.Node(0).Broker().Config()
	if bc.ExternalAddr == "" || bc.ExternalAddr == bc.ClientAddr {
		t.Fatalf("client addresses: internal %q external %q", bc.ClientAddr, bc.ExternalAddr)
	}
	cl := rmq.NewClient()
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitUntil(t, "the node's registration", func() bool {
		ci, err := namesrv.FetchClusterInfo(ctx, cl, ns.Addr(), nil)
		return err == nil && len(ci.RaftmqGroups["raftmq"].ClientAddrs) == 1
	})
	for _, tc := range []struct{ name, ns, remoting, client string }{
		{"internal", ns.Addr(), c.Node(0).RemotingAddr(), bc.ClientAddr},
		{"external", ns.ExternalAddr(), published, bc.ExternalAddr},
	} {
		ci, err := namesrv.FetchClusterInfo(ctx, cl, tc.ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := ci.BrokerAddrTable["raftmq"].BrokerAddrs[0]; got != tc.remoting {
			t.Errorf("%s listener: remoting address %s, want %s", tc.name, got, tc.remoting)
		}
		if got := ci.RaftmqGroups["raftmq"].ClientAddrs[0]; got != tc.client {
			t.Errorf("%s listener: client address %s, want %s", tc.name, got, tc.client)
		}
		// The SDK through this listener: the group's client is told the
		// addresses of the same kind.
		cfg := cluster.DefaultConfig()
		cfg.NameServers = []string{tc.ns}
		cc, err := cluster.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		gcl, err := cc.Client(ctx, "raftmq")
		if err != nil {
			t.Fatal(err)
		}
		// The leader's addresses are known once its registration is
		// applied, which may come after the name server has its entry.
		var st *api.StatusResponse
		waitUntil(t, tc.name+" status naming the leader's address", func() bool {
			st, err = gcl.Status(ctx)
			return err == nil && st.LeaderAddress != ""
		})
		if st.LeaderAddress != tc.client {
			t.Errorf("%s: status names the leader at %s, want %s", tc.name, st.LeaderAddress, tc.client)
		}
		cc.Close()
	}
}
