package election

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// unsyncedLog is a log store whose leader appends count as stored only
// once released, as raftlog's are while their fsync runs after the append
// returned: stored is what Config.CommitBound and the state machine's wait
// see. A follower's appends are stored at once.
type unsyncedLog struct {
	*raft.InmemStore
	leads  atomic.Pointer[func() bool]
	hold   atomic.Bool // leader appends wait for release
	mu     sync.Mutex
	cond   *sync.Cond
	stored uint64
}

func newUnsyncedLog() *unsyncedLog {
	l := &unsyncedLog{InmemStore: raft.NewInmemStore()}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *unsyncedLog) StoreLogs(logs []*raft.Log) error {
	if err := l.InmemStore.StoreLogs(logs); err != nil {
		return err
	}
	if leads := l.leads.Load(); leads != nil && (*leads)() && l.hold.Load() {
		return nil
	}
	l.set(logs[len(logs)-1].Index)
	return nil
}

func (l *unsyncedLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l *unsyncedLog) set(idx uint64) {
	l.mu.Lock()
	if idx > l.stored {
		l.stored = idx
	}
	l.cond.Broadcast()
	l.mu.Unlock()
}

// release counts everything appended as stored (the fsync ended).
func (l *unsyncedLog) release() {
	l.hold.Store(false)
	last, _ := l.LastIndex()
	l.set(last)
}

func (l *unsyncedLog) Stored() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stored
}

func (l *unsyncedLog) await(idx uint64) {
	l.mu.Lock()
	for l.stored < idx {
		l.cond.Wait()
	}
	l.mu.Unlock()
}

// awaitingFSM applies an entry only once its node's log has it stored,
// as store's FSM does (AwaitStoredBy).
type awaitingFSM struct {
	*testFSM
	log *unsyncedLog
}

func (f awaitingFSM) Apply(l *raft.Log) interface{} {
	f.log.await(l.Index)
	return f.testFSM.Apply(l)
}

// TestUnstoredLeaderEntryIsNotCommitted: while the leader's own copy of an
// entry is written but not stored (its fsync runs after the append
// returned), raft counts it committed once a follower has it, yet no node
// applies it and the Apply does not complete: the leader's state machine
// waits for its log, and the commit index the followers learn stops below
// the entry. Once the leader's copy is stored, every node applies it.
func TestUnstoredLeaderEntryIsNotCommitted(t *testing.T) {
	const n = 3
	trans, peers := inmemMesh(n, "inmem-u")
	nodes := make([]*Node, n)
	fsms := make([]*testFSM, n)
	logs := make([]*unsyncedLog, n)
	for i := range nodes {
		logs[i] = newUnsyncedLog()
		fsms[i] = newTestFSM()
	}
	t.Cleanup(func() {
		for i, nd := range nodes {
			if nd != nil {
				logs[i].release() // a waiting state machine would hold up raft's shutdown
				nd.Kill()
			}
		}
	})
	for i := range nodes {
		cfg := DefaultConfig()
		cfg.ID, cfg.Peers, cfg.Transport = peers[i].ID, peers, trans[i]
		cfg.CommitBound = logs[i].Stored
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: peers[i].ID, Level: hclog.Warn, Output: testLog{t}})
		nd, err := Start(cfg, awaitingFSM{fsms[i], logs[i]}, RaftStores{Log: logs[i], Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore()})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = nd
		leads := nd.Leads
		logs[i].leads.Store(&leads)
	}
	leader := readyLeader(t, nodes, -1)
	if err := nodes[leader].Apply([]byte("before"), 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}

	logs[leader].hold.Store(true)
	f := nodes[leader].Apply([]byte("x"), 10*time.Second)
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	last, _ := logs[leader].LastIndex()
	for i := range nodes {
		if i != leader {
			waitUntil(t, 10*time.Second, peers[i].ID+" to hold the entry", func() bool { l, _ := logs[i].LastIndex(); return l >= last })
		}
	}
	waitUntil(t, 10*time.Second, "raft to count the entry committed", func() bool { return nodes[leader].raft.CommitIndex() >= last })
	time.Sleep(100 * time.Millisecond) // twenty commit timeouts: appends carrying commit indexes went out
	select {
	case err := <-done:
		t.Fatalf("Apply completed (%v) before the leader's copy was stored", err)
	default:
	}
	for i, fsm := range fsms {
		if fsm.Has("x") {
			t.Fatalf("%s applied the entry before the leader's copy was stored", peers[i].ID)
		}
	}

	logs[leader].release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, fsm := range fsms {
		waitUntil(t, 10*time.Second, peers[i].ID+" to apply the entry", func() bool { return fsm.Has("x") })
	}
}
