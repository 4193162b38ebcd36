package chaos

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/store"
)

// flakyLog fails StoreLogs while failing is set, like a log store on a full
// or failing disk.
type flakyLog struct {
	raft.LogStore
	failing atomic.Bool
}

var errFlaky = errors.New("injected log store failure")

func (f *flakyLog) StoreLogs(logs []*raft.Log) error {
	if f.failing.Load() {
		return errFlaky
	}
	return f.LogStore.StoreLogs(logs)
}

func (f *flakyLog) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

// TestRegressionPipelineStallsAfterFailedAppend: when a follower fails to
// store entries (full disk, I/O error, raft-wal's "segment is sealed"), it
// answers an AppendEntries with Success=false. hashicorp/raft v1.7.2's
// pipelined replication then stops its decoder, but the send loop may send
// once more first; with the transport's default MaxRPCsInFlight (2) both
// pipeline channels are unbuffered, so that send blocks forever on
// inprogressCh while decodeResponses blocks on doneCh. Replication to that
// follower stops for good: heartbeats go on, so there is no election, and
// restarting the follower does not help; only a new leader does
// (hashicorp/raft#612; docs/RELIABILITY.md row 4). Goroutine stacks of the leader:
// netPipeline.AppendEntries at net_transport.go:885 and
// netPipeline.decodeResponses at :852, for minutes. The fix, in replica:
// NetworkTransportConfig.MaxRPCsInFlight = 1 (no pipelining).
//
// The test fails a follower's appends for a moment under load, ten times,
// and after each requires the follower to catch up again. Each failure has
// about an even chance to wedge the buggy pipeline.
func TestRegressionPipelineStallsAfterFailedAppend(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a 3-node raft group for up to a minute")
	}
	const n = 3
	addrs := make([]string, n)
	var peers []election.Peer
	ports, err := localgroup.FreePorts(n) // below the ephemeral range: see localgroup.FreePorts
	if err != nil {
		t.Fatal(err)
	}
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", ports[i])
		peers = append(peers, election.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: addrs[i]})
	}
	nodes := make([]*election.Node, n)
	logs := make([]*flakyLog, n)
	for i := range nodes {
		cfg := election.DefaultConfig()
		cfg.ID, cfg.BindAddr, cfg.Peers = peers[i].ID, addrs[i], peers
		logs[i] = &flakyLog{LogStore: raft.NewInmemStore()}
		snaps := raft.NewInmemSnapshotStore()
		fsm, err := store.OpenFSM(nil, "", snaps, nil)
		if err != nil {
			t.Fatal(err)
		}
		node, err := election.Start(cfg, fsm, election.RaftStores{Log: logs[i], Stable: raft.NewInmemStore(), Snapshots: snaps})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = node
	}
	defer func() {
		for _, node := range nodes {
			node.Kill()
		}
	}()
	leader := -1
	for deadline := time.Now().Add(20 * time.Second); leader < 0; {
		for i, node := range nodes {
			if node.Role() == election.Leader {
				leader = i
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	follower := (leader + 1) % n

	// Steady load: one command every millisecond.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			nodes[leader].Apply(store.EncodeRetain(0), time.Second) // a valid command that changes nothing
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	for round := 1; round <= 10; round++ {
		if nodes[leader].Role() != election.Leader {
			t.Skipf("leadership moved in round %d; the test needs a stable leader", round)
		}
		logs[follower].failing.Store(true)
		time.Sleep(300 * time.Millisecond)
		logs[follower].failing.Store(false)
		// The follower must catch up with the leader's log again.
		deadline := time.Now().Add(15 * time.Second)
		for {
			target := nodes[leader].Stats().LastIndex
			got := nodes[follower].Stats().LastIndex
			if got+50 >= target {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: replication to %s stopped after it failed to store entries: its last index %d, the leader's %d, 15s later (hashicorp/raft pipeline stall)",
					round, peers[follower].ID, got, target)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
