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
// heartbeats (raft's commit-timeout appends).
type countingTransport struct {
	*raft.InmemTransport
	empty atomic.Int64
}

func (c *countingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if len(args.Entries) == 0 && args.PrevLogEntry > 0 {
		c.empty.Add(1)
	}
	return c.InmemTransport.AppendEntries(id, target, args, resp)
}

// TestIdleLeaderHoldsRepeatAppends: an idle leader stops sending its
// followers appends that repeat what they have, yet a command applied
// after the quiet period reaches every follower's state machine at once:
// with holds lengthened to a minute, a hold that missed the new entry or
// its commit would keep a follower from applying it for that minute.
func TestIdleLeaderHoldsRepeatAppends(t *testing.T) {
	defer func(h time.Duration) { quietHold = h }(quietHold)
	quietHold = time.Minute
	const n = 3
	var peers []Peer
	trans := make([]*countingTransport, n)
	for i := range trans {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("inmem-q%d", i+1)))
		trans[i] = &countingTransport{InmemTransport: tr}
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: string(addr)})
	}
	for i := range trans {
		for j := range trans {
			if i != j {
				trans[i].Connect(trans[j].LocalAddr(), trans[j].InmemTransport)
			}
		}
	}
	nodes := make([]*Node, n)
	fsms := make([]*testFSM, n)
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.Kill()
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
	leader := -1
	waitUntil(t, 20*time.Second, "a ready leader", func() bool {
		for i, nd := range nodes {
			if nd.Ready() {
				leader = i
				return true
			}
		}
		return false
	})

	for round := 0; round < 3; round++ {
		cmd := fmt.Sprint("c", round)
		if err := nodes[leader].Apply([]byte(cmd), 10*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		for i, f := range fsms {
			waitUntil(t, 10*time.Second, fmt.Sprintf("%s to apply %s", peers[i].ID, cmd), func() bool { return f.Has(cmd) })
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
