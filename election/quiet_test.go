package election

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// countingTransport counts the appends that carry no entries and are not
// heartbeats (raft's commit-timeout appends), and the heartbeats.
type countingTransport struct {
	*raft.InmemTransport
	empty, beats atomic.Int64
}

func (c *countingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	switch {
	case len(args.Entries) > 0:
	case args.PrevLogEntry > 0:
		c.empty.Add(1)
	default:
		c.beats.Add(1)
	}
	return c.InmemTransport.AppendEntries(id, target, args, resp)
}

// startQuietGroup starts three nodes over counting in-memory transports
// and returns them with the index of their first ready leader.
func startQuietGroup(t *testing.T) ([]*Node, []*testFSM, []*countingTransport, int) {
	t.Helper()
	const n = 3
	mesh, peers := inmemMesh(n, "inmem-q")
	trans := make([]*countingTransport, n)
	for i, tr := range mesh {
		trans[i] = &countingTransport{InmemTransport: tr}
	}
	nodes := make([]*Node, n)
	fsms := make([]*testFSM, n)
	t.Cleanup(func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Kill()
			}
		}
	})
	for i := range nodes {
		cfg := DefaultConfig()
		cfg.ID, cfg.Peers, cfg.Transport = peers[i].ID, peers, trans[i]
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: peers[i].ID, Level: hclog.Warn, Output: testLog{t}})
		fsms[i] = newTestFSM()
		nd, err := Start(cfg, fsms[i], RaftStores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore()})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = nd
	}
	leader := readyLeader(t, nodes, -1)
	return nodes, fsms, trans, leader
}

// TestIdleLeaderHoldsRepeatAppends: an idle leader stops sending its
// followers appends that repeat what they have, yet a command applied
// after the quiet period reaches every follower's state machine at once:
// with holds lengthened to a minute, a hold that missed the new entry or
// its commit would keep a follower from applying it for that minute.
func TestIdleLeaderHoldsRepeatAppends(t *testing.T) {
	defer func(h time.Duration) { quietHold = h }(quietHold)
	quietHold = time.Minute
	nodes, fsms, trans, leader := startQuietGroup(t)
	peers := []string{"n1", "n2", "n3"}

	for round := 0; round < 3; round++ {
		cmd := fmt.Sprint("c", round)
		if err := nodes[leader].Apply([]byte(cmd), 10*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		for i, f := range fsms {
			waitUntil(t, 10*time.Second, fmt.Sprintf("%s to apply %s", peers[i], cmd), func() bool { return f.Has(cmd) })
		}
		time.Sleep(2 * quietAfter) // quiet from here on
		before := trans[leader].empty.Load()
		time.Sleep(time.Second)
		// Without holding, raft sends each follower one every 5-10 ms:
		// 200-400 in this second.
		if sent := trans[leader].empty.Load() - before; sent > 20 {
			t.Fatalf("round %d: an idle leader sent its followers %d appends without entries in a second; want them held", round, sent)
		}
	}
}

// TestRestingLeaderPacesHeartbeats: at rest a leader sends each follower a
// heartbeat every restBeatGap rather than every tenth of the heartbeat
// timeout, yet often enough that no follower stands for election, and an
// Apply is replicated at once.
func TestRestingLeaderPacesHeartbeats(t *testing.T) {
	nodes, fsms, trans, leader := startQuietGroup(t)
	if err := nodes[leader].Apply([]byte("c0"), 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	term := nodes[leader].Stats().Term
	time.Sleep(quietIdleAfter + 200*time.Millisecond) // at rest from here on
	const watch = 2 * time.Second
	before := trans[leader].beats.Load()
	time.Sleep(watch)
	sent := trans[leader].beats.Load() - before
	hb := DefaultConfig().HeartbeatTimeout
	// Unpaced, raft sends each of the two followers one every 25-50 ms:
	// about 100 in two seconds. Paced: one per restBeatGap (100 ms), 40.
	// Fewer than one per heartbeat timeout would let followers elect.
	if most, least := int64(2*watch/restBeatGap(hb))+10, int64(2*watch/hb); sent > most || sent < least {
		t.Fatalf("a resting leader sent %d heartbeats in %s to two followers; want %d to %d", sent, watch, least, most)
	}
	if got := nodes[leader].Stats().Term; got != term || !nodes[leader].Ready() {
		t.Fatalf("the group changed leader at rest: term %d -> %d", term, got)
	}
	start := time.Now()
	if err := nodes[leader].Apply([]byte("c1"), 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	for i, f := range fsms {
		waitUntil(t, 10*time.Second, fmt.Sprintf("node %d to apply c1", i), func() bool { return f.Has("c1") })
	}
	t.Logf("heartbeats at rest: %d in %s; an Apply after rest reached every follower in %s", sent, watch, time.Since(start))
}
