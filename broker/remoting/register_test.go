package remoting_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/namesrv"
	rmq "github.com/raftmq/raftmq/remoting"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A group whose brokerName another live group holds is refused by the
// name server and says so in its log; once the name is free it registers,
// with every node's client API address and the group's members.
func TestRegistrationRefusedWhileAnotherGroupHoldsTheName(t *testing.T) {
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	cl := rmq.NewClient()
	t.Cleanup(func() { cl.Close() })
	invoke := func(req *rmq.Command) *rmq.Command {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.Invoke(ctx, ns.Addr(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// Another group registered "raftmq" first.
	other := namesrv.Registration{Cluster: "DefaultCluster", Group: "raftmq", Addr: "127.0.0.1:1", NodeID: "x1", Term: 1,
		ClientAddr: "127.0.0.1:2", Members: []string{"x1@127.0.0.1:3"}}
	req, err := namesrv.RegisterRequest(other)
	if err != nil {
		t.Fatal(err)
	}
	if resp := invoke(req); resp.Code != rmq.Success {
		t.Fatalf("register the other group: %d %s", resp.Code, resp.Remark)
	}

	var logs lockedBuffer
	c := servertest.New(t, 3, servertest.InMemory(), servertest.Configure(func(i int, cfg *server.Config) {
		cfg.Remoting = "127.0.0.1:0"
		cfg.RemotingConfig.NameServers = []string{ns.Addr()}
		cfg.RemotingConfig.RegisterPeriod = time.Second
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: cfg.Raft.ID, Level: hclog.Info, Output: io.MultiWriter(&logs, testLog{t})})
	}))
	c.Leader()
	waitUntil(t, "a refusal in the log", func() bool { return strings.Contains(logs.String(), "name server refused this node's registration") })
	if !strings.Contains(logs.String(), "brokerName taken") {
		t.Fatalf("the refusal does not say why:\n%s", logs.String())
	}
	if g := ns.Groups()["raftmq"]; g == nil || len(g.Addrs) != 1 || g.Addrs[0] != other.Addr {
		t.Fatalf("route mixes the groups: %+v", g)
	}

	// The other group goes away: this one registers, client addresses and all.
	if resp := invoke(rmq.NewRequest(rmq.UnregisterBroker, map[string]string{"brokerAddr": other.Addr}, nil)); resp.Code != rmq.Success {
		t.Fatalf("unregister: %d", resp.Code)
	}
	waitUntil(t, "the group's route", func() bool {
		g := ns.Groups()["raftmq"]
		return g != nil && len(g.Addrs) == 3 && len(g.ClientAddrs) == 3
	})
	g := ns.Groups()["raftmq"]
	want := map[string]bool{}
	for i := 0; i < c.Size(); i++ {
		want[c.Config(i).Broker.ClientAddr] = true
	}
	for id, a := range g.ClientAddrs {
		if !want[a] {
			t.Fatalf("brokerId %d client address %s is no node's (%v)", id, a, want)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
