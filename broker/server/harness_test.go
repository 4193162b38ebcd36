package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/internal/servertest"
)

// cluster is an in-process group of real nodes: real raft over loopback TCP,
// real raft-wal with fsync, in temp dirs. Tests that only find the leader,
// kill, restart or partition nodes use servertest instead; this one stays
// for the tests that reach into each node's config and server directly.
type cluster struct {
	t     *testing.T
	cfgs  []server.Config
	nodes []*server.Server
}

// freeAddr is a 127.0.0.1 address free a moment ago, on a port below the
// kernel's ephemeral range and never handed out twice in this process: with
// a port from ":0", an outgoing connection of another test could take it
// before the node binds it ("address already in use").
func freeAddr(t testing.TB) string {
	t.Helper()
	p, err := localgroup.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p[0])
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newCluster(t *testing.T, n int, mod func(i int, c *server.Config)) *cluster {
	t.Helper()
	c := &cluster{t: t}
	var peers []election.Peer
	raftAddrs := make([]string, n)
	for i := 0; i < n; i++ {
		raftAddrs[i] = freeAddr(t)
		peers = append(peers, election.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: raftAddrs[i]})
	}
	for i := 0; i < n; i++ {
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Listen = freeAddr(t)
		cfg.Raft.ID = peers[i].ID
		cfg.Raft.BindAddr = raftAddrs[i]
		cfg.Raft.Peers = peers
		cfg.Broker.StatePeriod = 50 * time.Millisecond
		cfg.Broker.ClientAddr = cfg.Listen
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: peers[i].ID, Level: hclog.Info, Output: testWriter{t}})
		if mod != nil {
			mod(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	c.nodes = make([]*server.Server, n)
	t.Cleanup(func() { // first, so a node that fails to start does not leave the others running
		for _, s := range c.nodes {
			if s != nil {
				s.Kill()
			}
		}
	})
	for i := range c.cfgs {
		c.start(i)
	}
	return c
}

func (c *cluster) start(i int) {
	c.t.Helper()
	s, err := server.Start(c.cfgs[i])
	if err != nil {
		c.t.Fatalf("start node %d: %v", i, err)
	}
	c.nodes[i] = s
}

func (c *cluster) stop(i int, graceful bool) {
	c.t.Helper()
	var err error
	if graceful {
		err = c.nodes[i].Close()
	} else {
		err = c.nodes[i].Kill()
	}
	if err != nil {
		c.t.Logf("stop node %d: %v", i, err)
	}
	c.nodes[i] = nil
}

// leaderExcept waits for a ready leader other than node skip.
func (c *cluster) leaderExcept(skip int) int {
	c.t.Helper()
	var idx int
	waitFor(c.t, 20*time.Second, "a ready leader", func() bool {
		for i, s := range c.nodes {
			if i != skip && s != nil && s.Node().Ready() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// leader waits for a ready leader and returns its index.
func (c *cluster) leader() int {
	c.t.Helper()
	var idx int
	waitFor(c.t, 20*time.Second, "a ready leader", func() bool {
		for i, s := range c.nodes {
			if s != nil && s.Node().Ready() {
				idx = i
				return true
			}
		}
		return false
	})
	return idx
}

// client returns an SDK client of the cluster, closed when the test ends.
func (c *cluster) client(t *testing.T) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Servers: c.addrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func (c *cluster) addrs() []string {
	var out []string
	for i, s := range c.nodes {
		if s != nil {
			out = append(out, c.cfgs[i].Listen)
		}
	}
	return out
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// produce sends one request to whichever node leads, retrying (with the
// same producer id and sequence) across leader changes, as the client does.
func (c *cluster) produce(ctx context.Context, req broker.ProduceRequest) (broker.ProduceResult, error) {
	return produceRetrying(ctx, c.t, func() *broker.Broker { return c.nodes[c.leader()].Broker() }, req)
}

// produceTo is (*cluster).produce on a servertest cluster.
func produceTo(ctx context.Context, t testing.TB, c *servertest.Cluster, req broker.ProduceRequest) (broker.ProduceResult, error) {
	return produceRetrying(ctx, t, func() *broker.Broker { return c.Node(c.Leader()).Broker() }, req)
}

func produceRetrying(ctx context.Context, t testing.TB, leader func() *broker.Broker, req broker.ProduceRequest) (broker.ProduceResult, error) {
	for {
		res, err := leader().Produce(ctx, req)
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		if !errors.Is(err, broker.ErrNotLeader) && !errors.Is(err, broker.ErrUnavailable) && !errors.Is(err, broker.ErrUnknownOutcome) {
			return res, err
		}
		t.Logf("retrying produce after: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
