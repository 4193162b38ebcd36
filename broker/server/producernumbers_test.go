package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/raftlog"
)

// TestProducersNumberedByTheGroup: SDK producers of a group that writes
// batch version 3 send as "#<n>", each with a number of its own, and a
// follower's log holds their requests under those ids.
func TestProducersNumberedByTheGroup(t *testing.T) {
	c := newCluster(t, 3, nil)
	waitFor(t, 20*time.Second, "the leader to write batch version 3", func() bool {
		l := c.Leader()
		return l >= 0 && c.Node(l).Store().BatchVersion() == raftlog.BatchV3
	})
	cl, err := client.New(client.Config{Servers: c.Addrs(), RetryTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 60*time.Second)
	ids := map[string]bool{}
	for i := range 3 {
		p := cl.NewProducer()
		if _, err := p.Send(ctx, "t", client.Message{Body: []byte(fmt.Sprint("m", i))}); err != nil {
			t.Fatal(err)
		}
		id := p.ID()
		if !strings.HasPrefix(id, "#") || ids[id] {
			t.Fatalf("producer %d has id %q (ids so far %v): want a number of its own", i, id, ids)
		}
		ids[id] = true
	}
	l := c.Leader()
	to := c.Node(l).Store().Applied()
	f := (l + 1) % 3
	waitFor(t, 10*time.Second, "the follower to apply", func() bool { return c.Node(f).Store().Applied() >= to })
	seen := map[string]bool{}
	for i := c.Node(f).RaftLog().FirstIndex(); i <= to; i++ {
		e, err := c.Node(f).RaftLog().Read(i)
		if err != nil {
			t.Fatalf("follower's entry %d: %v", i, err)
		}
		if len(e.Data) == 0 || raftlog.CommandType(e.Data[0]) != raftlog.CmdBatch {
			continue
		}
		reqs, err := raftlog.DecodeBatch(e.Data, e.At)
		if err != nil {
			t.Fatalf("follower's entry %d: %v", i, err)
		}
		for _, r := range reqs {
			seen[r.ProducerID] = true
		}
	}
	for id := range ids {
		if !seen[id] {
			t.Errorf("the follower's log holds no request of producer %s (it holds %v)", id, seen)
		}
	}
}
