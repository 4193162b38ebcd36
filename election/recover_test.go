package election

import (
	"fmt"
	"io"
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// testPorts returns n loopback addresses free a moment ago, on ports below
// the kernel's ephemeral range (an outgoing connection cannot take them).
func testPorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		a := fmt.Sprintf("127.0.0.1:%d", 20000+rand.Intn(10000))
		l, err := net.Listen("tcp", a)
		if err != nil {
			continue
		}
		l.Close()
		out = append(out, a)
	}
	return out
}

// groupConfigs returns the config of node i of a new n-node group on
// loopback, logging warnings to the test.
func groupConfigs(t *testing.T, n int, recoveryTimeout time.Duration) func(i int) Config {
	addrs := testPorts(t, n)
	var peers []Peer
	for i, a := range addrs {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: a})
	}
	return func(i int) Config {
		cfg := DefaultConfig()
		cfg.ID, cfg.BindAddr, cfg.Peers = peers[i].ID, addrs[i], peers
		cfg.RecoveryTimeout = recoveryTimeout
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: peers[i].ID, Level: hclog.Warn, Output: testLog{t}})
		return cfg
	}
}

type memStores struct {
	log, stable *raft.InmemStore
	snaps       *raft.InmemSnapshotStore
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}

// readyLeader waits for a node of nodes, other than skip and not nil,
// that leads and is ready, and returns its index.
func readyLeader(t *testing.T, nodes []*Node, skip int) int {
	t.Helper()
	leader := -1
	waitUntil(t, 20*time.Second, "a ready leader", func() bool {
		for i, n := range nodes {
			if i != skip && n != nil && n.Ready() {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// TestUncleanStartDoesNotElectWithoutLostEntry: a leader's disk loses an
// entry that a quorum (the leader and one follower) had acknowledged, the
// leader restarts uncleanly while that follower is down, and the third node,
// which never had the entry, comes back. Two nodes are up, and either could
// win with the other's vote, overwriting the entry once the follower that
// holds it returns. The restarted node must neither campaign nor vote until
// it has caught up with a leader; the follower holding the entry then leads
// and the entry is on every node.
func TestUncleanStartDoesNotElectWithoutLostEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a 3-node raft group for about ten seconds")
	}
	config := groupConfigs(t, 3, time.Minute) // the test decides when the holder returns
	stores := make([]memStores, 3)
	for i := range stores {
		stores[i] = memStores{raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()}
	}
	nodes := make([]*Node, 3)
	fsms := make([]*testFSM, 3)
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Kill()
			}
		}
	})
	start := func(i int, unclean bool) {
		t.Helper()
		s := stores[i]
		fsms[i] = newTestFSM()
		n, err := Start(config(i), fsms[i], RaftStores{Log: s.log, Stable: s.stable, Snapshots: s.snaps, Unclean: unclean})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	stop := func(i int) {
		nodes[i].Kill()
		nodes[i] = nil
	}
	for i := range nodes {
		start(i, false)
	}
	leader := readyLeader(t, nodes, -1)
	lagging, holder := (leader+1)%3, (leader+2)%3

	stop(lagging)
	if err := nodes[leader].Apply([]byte("kept"), 10*time.Second).Error(); err != nil {
		t.Fatal(err) // committed by the leader and the holder
	}
	lost := stores[leader].log
	last, _ := lost.LastIndex()
	stop(leader)
	stop(holder)
	// The leader's disk loses the acknowledged entry.
	if err := lost.DeleteRange(last, last); err != nil {
		t.Fatal(err)
	}

	start(leader, true)
	start(lagging, false)
	// Without the recovery gate one of the two is elected within a second or two.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, i := range []int{leader, lagging} {
			if nodes[i].Role() == Leader {
				t.Fatalf("%s was elected while the only node holding the committed entry was down", config(i).ID)
			}
		}
	}
	if !nodes[leader].Recovering() {
		t.Fatal("the node that started uncleanly is not recovering")
	}

	start(holder, false)
	waitUntil(t, 20*time.Second, "the holder of the entry to lead", func() bool { return nodes[holder].Ready() })
	for i, f := range fsms {
		waitUntil(t, 20*time.Second, config(i).ID+" to apply the entry", func() bool { return f.Has("kept") })
	}
	waitUntil(t, 20*time.Second, "recovery to end", func() bool { return !nodes[leader].Recovering() })
}

// TestUncleanStartAloneVotesAfterTimeout: when every node started
// uncleanly (a power loss), none hears from a leader, and each votes again
// after RecoveryTimeout, so the group elects a leader.
func TestUncleanStartAloneVotesAfterTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a 3-node raft group")
	}
	config := groupConfigs(t, 3, 500*time.Millisecond)
	nodes := make([]*Node, 3)
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Kill()
			}
		}
	})
	recovered := make(chan string, 3)
	for i := range nodes {
		cfg := config(i)
		id := cfg.ID
		n, err := Start(cfg, newTestFSM(), RaftStores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore(),
			Unclean: true, Recovered: func() { recovered <- id }})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	readyLeader(t, nodes, -1)
	for _, n := range nodes {
		waitUntil(t, 20*time.Second, "recovery to end", func() bool { return !n.Recovering() })
	}
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRecoveringNodeRefusesVotes: a node that started uncleanly answers a
// vote request it would otherwise grant with a refusal, through raft's own
// vote handling (its write of the vote fails), and grants it once it has
// recovered.
func TestRecoveringNodeRefusesVotes(t *testing.T) {
	config := groupConfigs(t, 3, time.Hour)
	cfg := config(0)
	n, err := Start(cfg, newTestFSM(), RaftStores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore(), Unclean: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Kill() })
	if !n.Recovering() {
		t.Fatal("a node of three that started uncleanly is not recovering")
	}
	trans, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trans.Close() })
	candidate := cfg.Peers[1]
	ask := func(term uint64) bool {
		t.Helper()
		req := &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(candidate.ID), Addr: []byte(candidate.Addr)},
			Term:      term, LastLogIndex: 100, LastLogTerm: term - 1,
		}
		var resp raft.RequestVoteResponse
		if err := trans.RequestVote(raft.ServerID(cfg.ID), raft.ServerAddress(cfg.BindAddr), req, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Granted
	}
	if ask(10) {
		t.Fatal("the recovering node granted a vote")
	}
	if n.raft.CurrentTerm() != 10 {
		t.Fatalf("term %d after a refused vote request of term 10: want the group's term followed", n.raft.CurrentTerm())
	}
	n.recovering.Store(false)
	if !ask(11) {
		t.Fatal("the recovered node refused a vote it should grant")
	}
}
