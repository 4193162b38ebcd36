package election

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// inmemMesh returns n of raft's in-memory transports, each connected to
// the others, at addresses prefix1..prefixN, and the peers n1..nN on them.
func inmemMesh(n int, prefix string) ([]*raft.InmemTransport, []Peer) {
	var peers []Peer
	trans := make([]*raft.InmemTransport, n)
	for i := range trans {
		var addr raft.ServerAddress
		addr, trans[i] = raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("%s%d", prefix, i+1)))
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: string(addr)})
	}
	for i := range trans {
		for j := range trans {
			if i != j {
				trans[i].Connect(trans[j].LocalAddr(), trans[j])
			}
		}
	}
	return trans, peers
}

// TestStartOnGivenTransport runs a 3-node group over raft's in-memory
// transport: it elects a leader, replicates, elects another when the leader
// is killed, and each node closes its transport when it stops.
func TestStartOnGivenTransport(t *testing.T) {
	const n = 3
	trans, peers := inmemMesh(n, "inmem-n")
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
	first := readyLeader(t, nodes, -1)
	if err := nodes[first].Apply([]byte("t"), 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	for i, f := range fsms {
		waitUntil(t, 10*time.Second, peers[i].ID+" to apply the command", func() bool { return f.Has("t") })
	}

	if err := nodes[first].Kill(); err != nil {
		t.Fatal(err)
	}
	nodes[first] = nil
	// A closed InmemTransport has forgotten its peers.
	other := (first + 1) % n
	var resp raft.AppendEntriesResponse
	if err := trans[first].AppendEntries(raft.ServerID(peers[other].ID), trans[other].LocalAddr(), &raft.AppendEntriesRequest{}, &resp); err == nil {
		t.Fatal("the killed node's transport still reaches its peers: Kill did not close it")
	}
	if !fsms[first].closed {
		t.Error("Kill did not close the killed node's state machine")
	}
	second := readyLeader(t, nodes, first)
	if err := nodes[second].Apply([]byte("u"), 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
}

// noPreVote is a transport without raft.WithPreVote.
type noPreVote struct{ raft.Transport }

// TestGatedTransportPassesOptionalInterfaces: raft pre-votes when the
// transport has RequestPreVote, so the wrapper has it exactly when the
// wrapped transport does; it always refuses pipelines and passes Close on.
func TestGatedTransportPassesOptionalInterfaces(t *testing.T) {
	var no, rec atomic.Bool
	_, inmem := raft.NewInmemTransport("")
	if _, ok := newGatedTransport(inmem, &no, &rec, time.Second).raftTransport().(raft.WithPreVote); !ok {
		t.Error("over an InmemTransport: no RequestPreVote; raft would not pre-vote")
	}
	plain := newGatedTransport(noPreVote{inmem}, &no, &rec, time.Second).raftTransport()
	if _, ok := plain.(raft.WithPreVote); ok {
		t.Error("over a transport without RequestPreVote: the wrapper claims it")
	}
	if _, ok := plain.(raft.WithClose); !ok {
		t.Error("no Close: raft would not close the transport on shutdown")
	}
	if _, err := plain.AppendEntriesPipeline("x", "x"); err != raft.ErrPipelineReplicationNotSupported {
		t.Errorf("AppendEntriesPipeline: %v, want ErrPipelineReplicationNotSupported", err)
	}
	no.Store(true)
	var resp raft.RequestVoteResponse
	if err := plain.RequestVote("x", "x", &raft.RequestVoteRequest{}, &resp); err != errNoCampaign {
		t.Errorf("RequestVote after NeverCampaign: %v, want errNoCampaign", err)
	}
}

// TestJoiningNodeSaysHowToGoOn: a node started with Join and without data
// waits to be added, and says so with the two ways on.
func TestJoiningNodeSaysHowToGoOn(t *testing.T) {
	addr, tr := raft.NewInmemTransport("inmem-alone")
	var out lockedWriter
	cfg := DefaultConfig()
	cfg.ID, cfg.Transport, cfg.AdvertiseAddr, cfg.Join = "n4", tr, string(addr), true
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: &out})
	nd, err := Start(cfg, newTestFSM(), RaftStores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore()})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Kill()
	waitUntil(t, 10*time.Second, "the waiting node's advice", func() bool {
		s := out.String()
		return strings.Contains(s, "waiting to be added") && strings.Contains(s, "raftmq member add n4@inmem-alone") && strings.Contains(s, "without --join")
	})
	if nd.LeaderID() != "" || nd.Stats().LastIndex != 0 {
		t.Errorf("the joining node began a group: leader %q, last index %d", nd.LeaderID(), nd.Stats().LastIndex)
	}
}

// TestNodeWithoutPeersLeadsAGroupOfOne: a node started with neither peers
// nor Join on empty stores bootstraps a group of itself, leads it, and says
// once how to grow it.
func TestNodeWithoutPeersLeadsAGroupOfOne(t *testing.T) {
	addr, tr := raft.NewInmemTransport("inmem-alone")
	var out lockedWriter
	cfg := DefaultConfig()
	cfg.ID, cfg.Transport, cfg.AdvertiseAddr = "n1", tr, string(addr)
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &out})
	nd, err := Start(cfg, newTestFSM(), RaftStores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore()})
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Kill()
	waitUntil(t, 10*time.Second, "the node to lead", func() bool { return nd.Role() == Leader })
	servers, err := nd.Servers()
	if err != nil || len(servers) != 1 || servers[0] != (Server{ID: "n1", Addr: "inmem-alone", Voter: true}) {
		t.Fatalf("configuration %+v (%v), want n1 alone", servers, err)
	}
	const hint = "start each new node with --join and run `raftmq member add ID@RAFTADDR`"
	if got := strings.Count(out.String(), hint); got != 1 {
		t.Errorf("the growth hint was logged %d times, want once:\n%s", got, out.String())
	}
}

type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// captureAppends records the commit index of every append it is given.
type captureAppends struct {
	raft.Transport
	commits []uint64
}

func (c *captureAppends) AppendEntries(_ raft.ServerID, _ raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	c.commits = append(c.commits, args.LeaderCommitIndex)
	resp.Success = true
	return nil
}

// TestCommitBoundLimitsAppends: the commit index an append carries never
// passes the node's commit bound (what a leader's log has fsynced), and
// raft's own request is left as it was.
func TestCommitBoundLimitsAppends(t *testing.T) {
	var no, rec atomic.Bool
	_, inmem := raft.NewInmemTransport("")
	c := &captureAppends{Transport: inmem}
	gt := newGatedTransport(c, &no, &rec, time.Second)
	var bound atomic.Uint64
	gt.commitBound = bound.Load
	bound.Store(5)
	var resp raft.AppendEntriesResponse
	req := &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 9, PrevLogTerm: 2, LeaderCommitIndex: 9,
		Entries: []*raft.Log{{Index: 10, Term: 2}}}
	if err := gt.AppendEntries("f", "f", req, &resp); err != nil {
		t.Fatal(err)
	}
	bound.Store(20)
	if err := gt.AppendEntries("f", "f", req, &resp); err != nil {
		t.Fatal(err)
	}
	if len(c.commits) != 2 || c.commits[0] != 5 || c.commits[1] != 9 {
		t.Fatalf("commit indexes sent %v, want [5 9]", c.commits)
	}
	if req.LeaderCommitIndex != 9 {
		t.Fatalf("raft's request changed to commit %d", req.LeaderCommitIndex)
	}
}
