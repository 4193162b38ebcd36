package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/internal/servertest"
)

func TestStartRefusesBadConfig(t *testing.T) {
	base := func() server.Config {
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Listen = freeAddr(t)
		cfg.Raft.ID = "n1"
		cfg.Raft.BindAddr = freeAddr(t)
		cfg.Raft.Peers = []election.Peer{{ID: "n1", Addr: cfg.Raft.BindAddr}}
		return cfg
	}
	cases := []struct {
		name string
		mod  func(*server.Config)
		want string
	}{
		{"peers without this node", func(c *server.Config) { c.Raft.Peers = []election.Peer{{ID: "n2", Addr: "127.0.0.1:1"}} }, "is not in it"},
		{"no data dir", func(c *server.Config) { c.DataDir = "" }, "data directory"},
		{"bad log store", func(c *server.Config) { c.LogStore = "sqlite" }, `log store "sqlite"`},
		{"election below heartbeat", func(c *server.Config) { c.Raft.ElectionTimeout = time.Millisecond * 10 }, "election-timeout"},
		{"zero queues", func(c *server.Config) { c.Broker.DefaultQueues = 0 }, "default-queues"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.mod(&cfg)
			s, err := server.Start(cfg)
			if err == nil {
				s.Kill()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
	// A data directory that belongs to another node.
	cfg := base()
	s, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Kill()
	cfg.Raft.ID = "n9"
	cfg.Raft.Peers = []election.Peer{{ID: "n9", Addr: cfg.Raft.BindAddr}}
	if _, err := server.Start(cfg); err == nil || !strings.Contains(err.Error(), `belongs to node "n1"`) {
		t.Fatalf("other node's data dir: %v", err)
	}
}

func TestBadRequestsChangeNothing(t *testing.T) {
	c := newCluster(t, 3, nil)
	b := c.Node(c.Leader()).Broker()
	ctx := ctxT(t, 30*time.Second)
	if _, err := b.CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, b.Config().MaxMessageBytes+1)
	bad := []struct {
		name string
		req  broker.ProduceRequest
		want error
	}{
		{"too large", broker.ProduceRequest{Topic: "t", Messages: []broker.ProduceMessage{{Body: big}}}, broker.ErrTooLarge},
		{"empty topic", broker.ProduceRequest{Messages: []broker.ProduceMessage{{Body: []byte("x")}}}, broker.ErrInvalidArgument},
		{"bad topic", broker.ProduceRequest{Topic: "a/b", Messages: []broker.ProduceMessage{{Body: []byte("x")}}}, broker.ErrInvalidArgument},
		{"no messages", broker.ProduceRequest{Topic: "t"}, broker.ErrInvalidArgument},
		{"queue out of range", broker.ProduceRequest{Topic: "t", Messages: []broker.ProduceMessage{{Body: []byte("x"), Queue: 7, HasQueue: true}}}, broker.ErrInvalidArgument},
	}
	for _, tc := range bad {
		if _, err := b.Produce(ctx, tc.req); !errorsIs(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := b.Pull(ctx, broker.PullRequest{Topic: "t", Queue: 0, Offset: 5}); !errorsIs(err, broker.ErrOutOfRange) {
		t.Errorf("pull past the end: %v", err)
	}
	if _, err := b.Pull(ctx, broker.PullRequest{Topic: "nope", Queue: 0}); !errorsIs(err, broker.ErrNotFound) {
		t.Errorf("pull unknown topic: %v", err)
	}
	if _, err := b.Pull(ctx, broker.PullRequest{Topic: "t", Queue: 9}); !errorsIs(err, broker.ErrInvalidArgument) {
		t.Errorf("pull bad queue: %v", err)
	}
	ti, err := b.Topic("t")
	if err != nil || ti.Queues[0].Max != 0 || ti.Queues[1].Max != 0 {
		t.Fatalf("a bad request changed the topic: %+v %v", ti, err)
	}
	// The node still works.
	if _, err := c.produce(ctx, broker.ProduceRequest{Topic: "t", Messages: []broker.ProduceMessage{{Body: []byte("ok")}}}); err != nil {
		t.Fatal(err)
	}
}

// TestPausedFollowerCatchesUp cuts a follower off (its raft traffic stops
// both ways), writes, and lets it back: it catches up with everything.
func TestPausedFollowerCatchesUp(t *testing.T) {
	c := servertest.New(t, 3, servertest.InMemory())
	l := c.Leader()
	f := (l + 1) % 3
	ctx := ctxT(t, 60*time.Second)
	if _, err := c.Node(l).Broker().CreateTopic(ctx, "t", 1, false); err != nil {
		t.Fatal(err)
	}
	c.Partition(f)
	for i := 0; i < 50; i++ {
		if _, err := produceTo(ctx, t, c, broker.ProduceRequest{Topic: "t", ProducerID: "p", Seq: uint64(i),
			Messages: []broker.ProduceMessage{{Body: []byte(fmt.Sprintf("m%d", i))}}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := c.Node(f).Broker().Pull(ctx, broker.PullRequest{Topic: "t", Queue: 0, MaxMessages: 100})
	if err == nil && len(r.Messages) == 50 {
		t.Fatal("an isolated follower received writes")
	}
	c.Heal()
	waitFor(t, 30*time.Second, "the follower to catch up", func() bool {
		r, err := c.Node(f).Broker().Pull(context.Background(), broker.PullRequest{Topic: "t", Queue: 0, MaxMessages: 100})
		return err == nil && len(r.Messages) == 50
	})
}

// TestRefusalsForLostEntriesPrintRepairSteps: a node whose log lost
// entries (its tail segment is gone, the watermark says they were stored) or
// misses a sealed segment refuses to start with the same numbered repair
// steps as a node whose log fails verification; before, it printed none.
func TestRefusalsForLostEntriesPrintRepairSteps(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		segmentMB  int
		remove     func(segs []string) []string // the segment files to delete
	}{
		{"lost entries", "lost entries", 64, func(segs []string) []string { return segs }},
		{"missing segment", "segment file is missing", 1, func(segs []string) []string { return segs[:1] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := server.DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.Listen = freeAddr(t)
			cfg.Raft.ID = "n1"
			cfg.Raft.BindAddr = freeAddr(t)
			cfg.Raft.Peers = []election.Peer{{ID: "n1", Addr: cfg.Raft.BindAddr}}
			cfg.SegmentMB = tc.segmentMB
			s, err := server.Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			first := s
			t.Cleanup(func() { first.Kill() })
			ctx := ctxT(t, 60*time.Second)
			waitFor(t, 30*time.Second, "a leader that takes writes", func() bool {
				_, err := s.Broker().CreateTopic(ctx, "t", 1, true)
				return err == nil
			})
			for i := 0; i < 6; i++ { // 3 MiB: several 1 MiB segments
				if _, err := s.Broker().Produce(ctx, broker.ProduceRequest{Topic: "t",
					Messages: []broker.ProduceMessage{{Body: make([]byte, 512<<10)}}}); err != nil {
					t.Fatal(err)
				}
			}
			wm := filepath.Join(cfg.DataDir, "LOG_WATERMARK")
			waitFor(t, 30*time.Second, "the watermark", func() bool { st, err := os.Stat(wm); return err == nil && st.Size() > 0 })
			time.Sleep(300 * time.Millisecond) // a few more watermark writes, up to the last entry
			s.Kill()
			segs, _ := filepath.Glob(filepath.Join(cfg.DataDir, "log", "*.wal"))
			sort.Strings(segs)
			if len(segs) == 0 || (tc.segmentMB == 1 && len(segs) < 2) {
				t.Fatalf("segments %v", segs)
			}
			for _, p := range tc.remove(segs) {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
			s, err = server.Start(cfg)
			if err == nil {
				s.Kill()
				t.Fatal("a node with a damaged log started")
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{tc.want, "1. keep this node stopped", "raftmq member remove n1 --force",
				"mv " + cfg.DataDir, "and --join", "5. raftmq member add n1@" + cfg.Raft.BindAddr} {
				if !strings.Contains(msg, want) {
					t.Errorf("refusal does not say %q:\n%s", want, msg)
				}
			}
		})
	}
}
