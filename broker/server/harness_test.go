package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
)

// cluster is an in-process group of real nodes: real raft over loopback TCP,
// real raft-wal with fsync, in temp dirs.
type cluster struct {
	t     *testing.T
	cfgs  []server.Config
	nodes []*server.Server
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
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
		cfg.Raft.HeartbeatTimeout = 100 * time.Millisecond
		cfg.Raft.ElectionTimeout = 100 * time.Millisecond
		cfg.Raft.LeaderLeaseTimeout = 50 * time.Millisecond
		cfg.Broker.StatePeriod = 50 * time.Millisecond
		cfg.Broker.ClientAddr = cfg.Listen
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: peers[i].ID, Level: hclog.Info, Output: testWriter{t}})
		if mod != nil {
			mod(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	c.nodes = make([]*server.Server, n)
	for i := range c.cfgs {
		c.start(i)
	}
	t.Cleanup(func() {
		for _, s := range c.nodes {
			if s != nil {
				s.Kill()
			}
		}
	})
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

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
