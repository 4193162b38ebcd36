package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
)

// A group whose nodes acknowledge appends before their fsync produces and
// serves as one that fsyncs them, and a node killed and restarted holds
// what it had acknowledged (a killed process keeps the page cache).
func TestQuorumMemoryGroupProducesAndPulls(t *testing.T) {
	c := newCluster(t, 3, func(_ int, cfg *server.Config) {
		cfg.Durability = raftlog.DurabilityConfig{Mode: raftlog.QuorumMemory, SyncInterval: 20 * time.Millisecond, SyncBytes: 64 << 10}
	})
	ctx := ctxT(t, 60*time.Second)
	b := c.Node(c.Leader()).Broker()
	if _, err := b.CreateTopic(ctx, "orders", 1, false); err != nil {
		t.Fatal(err)
	}
	const n = 200
	body := strings.Repeat("x", 1000)
	for i := range n {
		res, err := c.produce(ctx, broker.ProduceRequest{Topic: "orders", ProducerID: "p1", Seq: uint64(i),
			Messages: []broker.ProduceMessage{{Body: []byte(fmt.Sprintf("m%d %s", i, body))}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Acks[0].Offset != uint64(i) {
			t.Fatalf("ack %d at offset %d", i, res.Acks[0].Offset)
		}
	}
	follower := (c.Leader() + 1) % 3
	c.Kill(follower)
	c.Restart(follower)
	for i, s := range c.Nodes() {
		waitFor(t, 20*time.Second, fmt.Sprintf("node %d holds every message", i), func() bool {
			r, err := s.Broker().Pull(ctx, broker.PullRequest{Topic: "orders", Offset: 0, MaxMessages: n})
			return err == nil && len(r.Messages) == n
		})
		r, _ := s.Broker().Pull(ctx, broker.PullRequest{Topic: "orders", Offset: 0, MaxMessages: n})
		for j, m := range r.Messages {
			if !strings.HasPrefix(string(m.Body), fmt.Sprintf("m%d ", j)) || m.Offset != uint64(j) {
				t.Fatalf("node %d message %d: %.10q at offset %d", i, j, m.Body, m.Offset)
			}
		}
	}
}

// Start refuses a durability it cannot use, naming the field and value,
// before it opens anything.
func TestDurabilityConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		mod  func(c *server.Config)
		want string
	}{
		{func(c *server.Config) { c.Durability.Mode = "async" }, `config Durability: durability mode "async"`},
		{func(c *server.Config) { c.Durability.SyncInterval = 0 }, "durability sync interval 0s"},
		{func(c *server.Config) { c.Durability.SyncBytes = -1 }, "durability sync bytes -1"},
		{func(c *server.Config) { c.Durability.Mode, c.LogStore = raftlog.QuorumMemory, raftlog.KindBolt }, `needs LogStore "wal"`},
	} {
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Listen = freeAddr(t)
		cfg.Raft.ID = "n1"
		cfg.Raft.BindAddr = freeAddr(t)
		cfg.Raft.Peers = []election.Peer{{ID: "n1", Addr: cfg.Raft.BindAddr}}
		tc.mod(&cfg)
		s, err := server.Start(cfg)
		if err == nil {
			s.Close()
			t.Fatalf("started with %+v", cfg.Durability)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want an error naming %q", err, tc.want)
		}
	}
}
