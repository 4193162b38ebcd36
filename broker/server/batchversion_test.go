package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// oldPeer answers NodeState as a node of an earlier release does: with
// batch_read_version reads, or without it (0: a release before batch
// version 2).
type oldPeer struct {
	api.UnimplementedPeerServer
	asked atomic.Int32
	reads atomic.Uint32
}

func (p *oldPeer) NodeState(context.Context, *api.NodeStateRequest) (*api.NodeStateResponse, error) {
	p.asked.Add(1)
	return &api.NodeStateResponse{Id: "old", Role: "Follower", BatchReadVersion: p.reads.Load()}, nil
}

// TestBatchVersionFollowsWhatEveryMemberReads: a group of nodes that all
// read batch version 3 writes its produced entries in version 3, as a
// follower's log holds them; a member of an older release brings the
// writes back to the highest version it reads (2, or 1 when it says
// nothing of the batch version), and its removal to version 3 again. Every
// node serves the messages of all versions alike, with the broker's
// timestamps.
func TestBatchVersionFollowsWhatEveryMemberReads(t *testing.T) {
	start := time.Now().UnixMilli()
	c := newCluster(t, 3, nil)
	l := c.Leader()
	lead := c.Node(l)
	f := (l + 1) % 3
	ctx := ctxT(t, 60*time.Second)
	if _, err := lead.Broker().CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}
	var seq uint64
	// produce sends n requests of one plain message each and returns the
	// batch versions of the entries the follower's log holds from the
	// first one on.
	produce := func(n int) []byte {
		t.Helper()
		from := lead.Store().Applied() + 1
		for range n {
			seq++
			if _, err := c.produce(ctx, broker.ProduceRequest{Topic: "t", ProducerID: "p", Seq: seq,
				Messages: []broker.ProduceMessage{{Body: []byte(fmt.Sprint("m", seq))}}}); err != nil {
				t.Fatal(err)
			}
		}
		to := lead.Store().Applied()
		waitFor(t, 10*time.Second, "the follower to apply", func() bool { return c.Node(f).Store().Applied() >= to })
		var versions []byte
		for i := from; i <= to; i++ {
			e, err := c.Node(f).RaftLog().Read(i)
			data := e.Data
			if err != nil {
				t.Fatalf("follower's entry %d: %v", i, err)
			}
			if len(data) > 1 && raftlog.CommandType(data[0]) == raftlog.CmdBatch {
				versions = append(versions, data[1])
			}
		}
		if len(versions) == 0 {
			t.Fatalf("no batch among the follower's entries %d-%d", from, to)
		}
		return versions
	}
	expect := func(versions []byte, want raftlog.BatchVersion) {
		t.Helper()
		for i, v := range versions {
			if v != byte(want) {
				t.Fatalf("batch %d of %d is version %d, want %d (all: %v)", i, len(versions), v, want, versions)
			}
		}
	}
	waitVersion := func(want raftlog.BatchVersion) {
		t.Helper()
		waitFor(t, 10*time.Second, fmt.Sprintf("the leader to write version %d", want), func() bool {
			return lead.Store().BatchVersion() == want
		})
		if got := batchVersionGauge(t, lead); got != float64(want) {
			t.Fatalf("raftmq_batch_version %v, the store writes version %d", got, want)
		}
	}

	waitVersion(raftlog.BatchV3)
	expect(produce(20), raftlog.BatchV3)

	// A member of an older release: a non-voter whose raft address
	// answers nothing (it never catches up, which a non-voter may) and
	// whose peer address answers NodeState with read version 2, then
	// without one.
	peer := &oldPeer{}
	peer.reads.Store(2)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	api.RegisterPeerServer(gs, peer)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	if err := lead.Broker().Register(ctx, store.NodeInfo{ID: "old", ClientAddr: lis.Addr().String(), PeerAddr: lis.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	if err := lead.Node().AddNonvoter("old", freeAddr(t)); err != nil {
		t.Fatal(err)
	}
	waitVersion(raftlog.BatchV2)
	expect(produce(20), raftlog.BatchV2)
	// Such a group numbers no producer: the SDK's keeps its random id.
	cl, err := client.New(client.Config{Servers: c.Addrs(), RetryTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p := cl.NewProducer()
	if _, err := p.Send(ctx, "t", client.Message{Body: []byte("unnumbered")}); err != nil || strings.HasPrefix(p.ID(), "#") {
		t.Fatalf("a producer of a group writing version 2: %v, id %q; want a random id", err, p.ID())
	}
	peer.reads.Store(0)
	waitVersion(raftlog.BatchV1)
	waitFor(t, 10*time.Second, "the leader to poll the old member twice", func() bool { return peer.asked.Load() >= 2 })
	if v := lead.Store().BatchVersion(); v != raftlog.BatchV1 {
		t.Fatalf("after the old member answered: version %d", v)
	}
	expect(produce(20), raftlog.BatchV1)

	if err := lead.Node().Remove("old", false); err != nil {
		t.Fatal(err)
	}
	waitVersion(raftlog.BatchV3)
	expect(produce(20), raftlog.BatchV3)
	end := time.Now().UnixMilli()

	// Every node serves the messages of every version alike.
	for i, s := range c.Nodes() {
		waitFor(t, 10*time.Second, "every node to apply", func() bool { return s.Store().Applied() >= lead.Store().Applied() })
		bodies := map[string]bool{}
		for q := int32(0); q < 2; q++ {
			r, err := s.Broker().Pull(ctx, broker.PullRequest{Topic: "t", Queue: q, Offset: 0, MaxMessages: 100})
			if err != nil {
				t.Fatalf("node %d queue %d: %v", i, q, err)
			}
			for j, m := range r.Messages {
				if m.Offset != uint64(j) {
					t.Fatalf("node %d queue %d: message %d at offset %d", i, q, j, m.Offset)
				}
				bodies[string(m.Body)] = true
				if m.Timestamp < start || m.Timestamp > end {
					t.Fatalf("node %d queue %d: message %s stamped %d, outside the run (%d-%d)", i, q, m.Body, m.Timestamp, start, end)
				}
			}
		}
		for n := uint64(1); n <= seq; n++ {
			if !bodies[fmt.Sprint("m", n)] {
				t.Fatalf("node %d lacks message m%d (has %d of %d)", i, n, len(bodies), seq)
			}
		}
	}
}

// batchVersionGauge is the raftmq_batch_version metric of node s.
func batchVersionGauge(t *testing.T, s *server.Server) float64 {
	t.Helper()
	mfs, err := s.Broker().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "raftmq_batch_version" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no raftmq_batch_version metric")
	return 0
}
