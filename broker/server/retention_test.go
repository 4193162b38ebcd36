package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
)

// retentionCluster is a 3-node group with 1 MiB segments, the given limits
// and a retention check every 50 ms.
func retentionCluster(t *testing.T, age time.Duration, bytes int64) *cluster {
	return newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.SegmentMB = 1
		cfg.Broker.RetentionAge = age
		cfg.Broker.RetentionBytes = bytes
		cfg.Broker.RetentionCheck = 50 * time.Millisecond
	})
}

// sendQueue0 produces n messages of 4,000 bytes to queue 0 of topic, one per
// request with sequences seq0..seq0+n-1, and returns the last offset.
func sendQueue0(t *testing.T, ctx context.Context, c *cluster, topic string, seq0, n int) uint64 {
	t.Helper()
	body := []byte(strings.Repeat("r", 4000))
	var last uint64
	for i := seq0; i < seq0+n; i++ {
		res, err := c.produce(ctx, broker.ProduceRequest{Topic: topic, ProducerID: "p", Seq: uint64(i),
			Messages: []broker.ProduceMessage{{Body: body, Queue: 0, HasQueue: true}}})
		if err != nil {
			t.Fatal(err)
		}
		last = res.Acks[0].Offset
	}
	return last
}

// TestRetentionMovesQueueMinimum: with a size limit, the leader cuts whole
// segments; every node deletes its log head, a pull below a queue's new
// minimum is told where to continue, and the cut survives a restart of the
// whole group (race detector on the retention loop beside produce and pull).
func TestRetentionMovesQueueMinimum(t *testing.T) {
	c := retentionCluster(t, 0, 2<<20)
	ctx := ctxT(t, 90*time.Second)
	sendQueue0(t, ctx, c, "ret", 0, 1500) // about 6 MB through a 2 MiB limit
	waitFor(t, 30*time.Second, "every node to delete its log head", func() bool {
		for _, s := range c.Nodes() {
			if st := s.Broker().NodeState(); st.First <= 1 {
				return false
			}
		}
		return true
	})
	check := func() uint64 {
		t.Helper()
		b := c.Node(c.Leader()).Broker()
		var r broker.PullResult
		waitFor(t, 20*time.Second, "the leader to answer a pull below the minimum", func() bool {
			var err error
			r, err = b.Pull(ctx, broker.PullRequest{Topic: "ret", Queue: 0, Offset: 0, MaxMessages: 10})
			return err == nil
		})
		if r.Status != broker.PullOffsetMoved || r.NextOffset == 0 || r.NextOffset != r.MinOffset {
			t.Fatalf("pull at 0 below the retained minimum: %+v", r)
		}
		got, err := b.Pull(ctx, broker.PullRequest{Topic: "ret", Queue: 0, Offset: r.NextOffset, MaxMessages: 10})
		if err != nil || got.Status != broker.PullFound || got.Messages[0].Offset != r.NextOffset {
			t.Fatalf("pull at the minimum %d: %+v %v", r.NextOffset, got, err)
		}
		return r.MinOffset
	}
	low := check()
	for i := range c.Nodes() {
		c.stop(i, i == 0)
	}
	for i := range c.Nodes() {
		c.Restart(i)
	}
	if after := check(); after < low {
		t.Fatalf("minimum offset went back from %d to %d over a restart", low, after)
	}
}

// TestRetentionByAge: segments whose newest entry is older than the limit
// go; the tail segment and what was written since stay.
func TestRetentionByAge(t *testing.T) {
	c := retentionCluster(t, time.Second, 0)
	ctx := ctxT(t, 90*time.Second)
	old := sendQueue0(t, ctx, c, "age", 0, 800) // about 3 MB: three segments and a tail
	seq := 800
	waitFor(t, 30*time.Second, "the old segments to expire", func() bool {
		seq++
		sendQueue0(t, ctx, c, "age", seq, 1) // keeps the tail moving
		ti, err := c.Node(c.Leader()).Broker().Topic("age")
		return err == nil && ti.Queues[0].Min > 0
	})
	ti, _ := c.Node(c.Leader()).Broker().Topic("age")
	if m := ti.Queues[0].Min; m > old+1 {
		t.Fatalf("minimum %d is past the old messages (last %d): the tail segment was cut", m, old)
	}
}

// TestConsumerToldOfRetentionSkips: a consumer that falls behind a retention
// cut is told which offsets it never read, and continues after them.
func TestConsumerToldOfRetentionSkips(t *testing.T) {
	c := retentionCluster(t, 0, 2<<20)
	ctx := ctxT(t, 90*time.Second)
	sendQueue0(t, ctx, c, "skip", 0, 10)
	cl := c.Client(t)
	cfg := client.DefaultConsumerConfig("skip", "g")
	cfg.Queues = []int32{0}
	cfg.MaxMessages = 5
	type skip struct{ from, to uint64 }
	skips := make(chan skip, 10)
	cfg.OnSkipped = func(q int32, from, to uint64) { skips <- skip{from, to} }
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	recs, err := cons.Poll(ctx)
	if err != nil || len(recs) != 5 || recs[0].Offset != 0 {
		t.Fatalf("first poll: %d records, %v", len(recs), err)
	}
	sendQueue0(t, ctx, c, "skip", 10, 1500) // about 6 MB through a 2 MiB limit: offset 5 is deleted
	waitFor(t, 30*time.Second, "the cut to pass offset 5", func() bool {
		ti, err := c.Node(c.Leader()).Broker().Topic("skip")
		return err == nil && ti.Queues[0].Min > 5
	})
	var got []client.Record
	for len(got) == 0 {
		if got, err = cons.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case s := <-skips:
		if s.from != 5 || s.to != got[0].Offset {
			t.Fatalf("told of offsets %d..%d skipped, then read from %d; want 5..%d", s.from, s.to-1, got[0].Offset, got[0].Offset-1)
		}
	default:
		t.Fatalf("consumer jumped from 5 to %d without being told", got[0].Offset)
	}
}

// TestRetentionWaitsForRestartingFollower: a cut does not pass what a
// follower that stopped answering within the grace period has applied (it
// is restarting and keeps its log); once it is back and caught up, cuts go on.
func TestRetentionWaitsForRestartingFollower(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.SegmentMB = 1
		cfg.Broker.RetentionBytes = 2 << 20
		cfg.Broker.RetentionCheck = 50 * time.Millisecond
		cfg.Broker.RetentionGrace = time.Minute
	})
	ctx := ctxT(t, 120*time.Second)
	sendQueue0(t, ctx, c, "grace", 0, 10)
	l := c.Leader()
	f := (l + 1) % 3
	var had uint64 // what the leader last heard the follower had applied
	waitFor(t, 20*time.Second, "the leader to hear that the follower applied the first messages", func() bool {
		st, err := c.Node(l).Broker().Status()
		if err != nil {
			return false
		}
		for _, n := range st.Nodes {
			if n.ID == c.Config(f).Raft.ID && n.Healthy && n.Applied >= c.Node(l).Broker().NodeState().Applied {
				had = n.Applied
				return true
			}
		}
		return false
	})
	c.Kill(f)
	sendQueue0(t, ctx, c, "grace", 10, 1500) // about 6 MB through a 2 MiB limit
	floor := func() uint64 { return c.Node(c.Leader()).Broker().LogFloor() }
	time.Sleep(500 * time.Millisecond) // a few retention checks
	if got := floor(); got > had+1 {
		t.Fatalf("the cut went to %d, past what the restarting follower had applied (%d)", got, had)
	}
	c.Restart(f)
	waitFor(t, 60*time.Second, "cuts to go on once the follower is back", func() bool { return floor() > had+1 })
}
