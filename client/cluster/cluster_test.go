package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/namesrv"
)

// twoGroups starts a name server and two in-memory groups, ga and gb,
// registering with it. (Only the test imports server packages.)
func twoGroups(t *testing.T) (*namesrv.Server, map[string]*servertest.Cluster) {
	t.Helper()
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	groups := map[string]*servertest.Cluster{}
	for _, name := range []string{"ga", "gb"} {
		groups[name] = servertest.New(t, 3, servertest.InMemory(), servertest.Configure(func(i int, cfg *server.Config) {
			cfg.Broker.Group = name
			cfg.Remoting = "127.0.0.1:0"
			cfg.RemotingConfig.NameServers = []string{ns.Addr()}
			cfg.RemotingConfig.RegisterPeriod = time.Second
		}))
	}
	for _, g := range groups {
		g.Leader()
	}
	return ns, groups
}

func newCluster(t *testing.T, nameServers ...string) *cluster.Cluster {
	t.Helper()
	cfg := cluster.DefaultConfig()
	cfg.NameServers = nameServers
	cfg.RefreshInterval = 500 * time.Millisecond
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// twoGroupCluster is twoGroups with a cluster client that has seen both
// groups led, and a context that bounds the test.
func twoGroupCluster(t *testing.T) (*cluster.Cluster, map[string]*servertest.Cluster, context.Context) {
	t.Helper()
	ns, groups := twoGroups(t)
	c := newCluster(t, ns.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	waitFor(t, "both groups registered with a leader", func() bool {
		gs, err := c.Refresh(ctx)
		return err == nil && len(gs) == 2 && gs["ga"].Leader != "" && gs["gb"].Leader != ""
	})
	return c, groups, ctx
}

// createTopic creates topic with queues spread over the groups and waits
// until its route lists them all.
func createTopic(ctx context.Context, t *testing.T, c *cluster.Cluster, topic string, queues int) {
	t.Helper()
	if _, err := c.CreateTopic(ctx, topic, queues, nil, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the route of "+topic, func() bool {
		r, err := c.Route(ctx, topic)
		return err == nil && len(r.Queues) == queues
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTopicAcrossTwoGroups(t *testing.T) {
	c, _, ctx := twoGroupCluster(t)

	// 5 queues over 2 groups: 3 + 2.
	made, err := c.CreateTopic(ctx, "orders", 5, nil, false)
	if err != nil || made["ga"] != 3 || made["gb"] != 2 {
		t.Fatalf("create: %v %v", made, err)
	}
	if _, err := c.CreateTopic(ctx, "x", 2, []string{"nope"}, false); !errors.Is(err, cluster.ErrUnknownGroup) {
		t.Fatalf("create on a missing group: %v", err)
	}
	var r *cluster.Route
	waitFor(t, "the route of orders", func() bool {
		r, err = c.Route(ctx, "orders")
		return err == nil && len(r.Queues) == 5
	})
	if _, err := c.Route(ctx, "nope"); !errors.Is(err, cluster.ErrTopicNotFound) {
		t.Fatalf("missing topic: %v", err)
	}

	p := c.NewProducer(client.DefaultProducerConfig())
	perQueue := map[cluster.Queue]int{}
	const n = 50
	for i := 0; i < n; i++ {
		acks, err := p.Send(ctx, "orders", cluster.Message{Message: client.Message{Body: []byte(fmt.Sprintf("m%d", i))}})
		if err != nil {
			t.Fatal(err)
		}
		perQueue[cluster.Queue{Group: acks[0].Group, Queue: acks[0].Queue}]++
	}
	if len(perQueue) != 5 {
		t.Fatalf("unpinned sends reached %d queues, want all 5: %v", len(perQueue), perQueue)
	}
	// A key keeps its queue; a pin goes where it says.
	var keyQ cluster.Queue
	for i := 0; i < 5; i++ {
		acks, err := p.Send(ctx, "orders", cluster.Message{Message: client.Message{Key: "k1", Body: []byte("k")}})
		if err != nil {
			t.Fatal(err)
		}
		q := cluster.Queue{Group: acks[0].Group, Queue: acks[0].Queue}
		if i > 0 && q != keyQ {
			t.Fatalf("key moved from %v to %v", keyQ, q)
		}
		keyQ = q
	}
	one := int32(1)
	acks, err := p.Send(ctx, "orders", cluster.Message{Group: "gb", Message: client.Message{Queue: &one, Body: []byte("pinned")}})
	if err != nil || acks[0].Group != "gb" || acks[0].Queue != 1 {
		t.Fatalf("pinned: %+v %v", acks, err)
	}
	if _, err := p.Send(ctx, "orders", cluster.Message{Group: "gz", Message: client.Message{Body: []byte("x")}}); !errors.Is(err, cluster.ErrUnknownGroup) || client.Classify(err) != client.Failed {
		t.Fatalf("pinned to a missing group: %v", err)
	}
	total := n + 5 + 1

	// Two members of one consumer group share the five queues.
	cfg := client.DefaultConsumerConfig("orders", "cg")
	cfg.Wait = 200 * time.Millisecond
	seen := map[string]int{}
	var members []*cluster.Consumer
	for i := 0; i < 2; i++ {
		cfg.MemberID = fmt.Sprintf("m%d", i)
		cn, err := c.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: cfg})
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, cn)
	}
	waitFor(t, "every message consumed", func() bool {
		for _, cn := range members {
			recs, err := cn.Poll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				seen[fmt.Sprintf("%s/%d/%d", r.Group, r.Queue, r.Offset)]++
			}
		}
		return len(seen) >= total
	})
	waitFor(t, "the queues balanced over both members", func() bool {
		for _, cn := range members {
			cn.Poll(ctx)
		}
		a, b := members[0].Assigned(), members[1].Assigned()
		return len(a)+len(b) == 5 && len(a) > 0 && len(b) > 0
	})
	// At least once: a queue that moved while the other member joined may
	// be read again from its last commit, never skipped.
	a, b := map[cluster.Queue]bool{}, members[1].Assigned()
	for _, q := range members[0].Assigned() {
		a[q] = true
	}
	for _, q := range b {
		if a[q] {
			t.Fatalf("queue %v assigned to both members", q)
		}
	}
	for _, cn := range members {
		if err := cn.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNoNameServer(t *testing.T) {
	c := newCluster(t, "127.0.0.1:1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Route(ctx, "t"); !errors.Is(err, cluster.ErrNoNameServer) {
		t.Fatalf("unreachable name server: %v", err)
	}
	if _, err := cluster.New(cluster.Config{}); err == nil {
		t.Fatal("no name servers accepted")
	}
}

func TestSpread(t *testing.T) {
	got := cluster.Spread(16, []string{"b", "a", "c"})
	if got["a"] != 6 || got["b"] != 5 || got["c"] != 5 {
		t.Fatalf("16 over 3: %v", got)
	}
	if got := cluster.Spread(1, []string{"a", "b"}); len(got) != 1 || got["a"] != 1 {
		t.Fatalf("1 over 2: %v", got)
	}
}

// With one group gone, unpinned writes move to the other within the slow
// send bound; writes pinned to the dead group wait and fail with a typed
// error when their context ends.
func TestUnpinnedWritesLeaveADeadGroup(t *testing.T) {
	ns, groups := twoGroups(t)
	cfg := cluster.DefaultConfig()
	cfg.NameServers = []string{ns.Addr()}
	cfg.SlowSend = 300 * time.Millisecond
	cfg.FaultPenalty = time.Second
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(t, "both groups registered with a leader", func() bool {
		gs, err := c.Refresh(ctx)
		return err == nil && len(gs) == 2 && gs["ga"].Leader != "" && gs["gb"].Leader != ""
	})
	createTopic(ctx, t, c, "t", 4)
	p := c.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	for i := 0; i < 8; i++ {
		if _, err := p.Send(ctx, "t", cluster.Message{Message: client.Message{Body: []byte("warm")}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		groups["ga"].Kill(i)
	}
	// A request started in ga before anything noticed has an unknown
	// outcome (ga may have stored it); once ga is marked, every unpinned
	// send goes to gb, even after the penalty (the probe finds no leader).
	lost := 0
	for i := 0; i < 20; i++ {
		sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
		acks, err := p.Send(sctx, "t", cluster.Message{Message: client.Message{Body: []byte(fmt.Sprint(i))}})
		scancel()
		var se *cluster.SendError
		switch {
		case err != nil && errors.As(err, &se) && se.Group == "ga" && se.Outcome == client.Unknown && i == lost:
			lost++
		case err != nil:
			t.Fatalf("unpinned send %d with ga down: %v", i, err)
		case acks[0].Group != "gb":
			t.Fatalf("send %d acked by %s", i, acks[0].Group)
		}
	}
	if lost > 1 {
		t.Fatalf("%d sends stuck in the dead group, want at most the first", lost)
	}
	if f := p.Faulty(); len(f) != 1 || f[0] != "ga" {
		t.Fatalf("faulty groups %v, want [ga]", f)
	}
	pctx, pcancel := context.WithTimeout(ctx, time.Second)
	defer pcancel()
	_, err = p.Send(pctx, "t", cluster.Message{Group: "ga", Message: client.Message{Body: []byte("pinned")}})
	var se *cluster.SendError
	if !errors.As(err, &se) || se.Group != "ga" {
		t.Fatalf("pinned to the dead group: %v", err)
	}
}
