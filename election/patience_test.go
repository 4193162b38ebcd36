package election

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestRestartedFollowerCatchesUpQuickly: a follower down for 10 s while the
// leader keeps writing is sent the entries it missed within a moment of its
// restart. Without the wait in patience.go raft has counted about ten failed
// appends to it by then and waits seconds (10 ms × 2^(n-2)) before the next.
func TestRestartedFollowerCatchesUpQuickly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a 3-node raft group for about fifteen seconds")
	}
	config := groupConfigs(t, 3, time.Minute)
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
	start := func(i int) {
		t.Helper()
		s := stores[i]
		fsms[i] = newTestFSM()
		n, err := Start(config(i), fsms[i], RaftStores{Log: s.log, Stable: s.stable, Snapshots: s.snaps})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	for i := range nodes {
		start(i)
	}
	leader := readyLeader(t, nodes, -1)
	// A leader with one follower down steps down when the other is
	// unheard for a lease (a loaded machine): the write goes on with the
	// next leader, as a client's would.
	write := func(k int) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); ; {
			err := nodes[leader].Apply([]byte(fmt.Sprintf("write %d", k)), 10*time.Second).Error()
			if err == nil {
				return
			}
			if !errors.Is(err, ErrUnknownOutcome) && !errors.Is(err, ErrNotLeader) || time.Now().After(end) {
				t.Errorf("write %d: %v", k, err)
				return
			}
			t.Logf("write %d: %v; again on the next leader", k, err)
			time.Sleep(50 * time.Millisecond)
			for i, n := range nodes {
				if n != nil && n.Ready() {
					leader = i
				}
			}
		}
	}
	follower := (leader + 1) % 3
	nodes[follower].Kill()
	nodes[follower] = nil
	k := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); k++ {
		write(k)
		time.Sleep(20 * time.Millisecond)
	}
	target := fsms[leader].Applied()
	restarted := time.Now()
	start(follower)
	done := make(chan struct{})
	go func() { // the load goes on while the follower catches up
		defer close(done)
		for j := k; time.Since(restarted) < 3*time.Second; j++ {
			write(j)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	waitUntil(t, 30*time.Second, fmt.Sprintf("the restarted follower to apply index %d", target), func() bool {
		return fsms[follower].Applied() >= target
	})
	took := time.Since(restarted)
	<-done
	t.Logf("restarted follower applied the leader's index at its restart after %s", took)
	if took > 1500*time.Millisecond {
		t.Errorf("the restarted follower needed %s to apply what the leader had at its restart, want under 1.5 s (raft's append backoff)", took)
	}
}

// refusingTransport fails every append as a refused dial to addr.
type refusingTransport struct {
	raft.Transport
	addr  *net.TCPAddr
	calls int
}

func (r *refusingTransport) AppendEntries(raft.ServerID, raft.ServerAddress, *raft.AppendEntriesRequest, *raft.AppendEntriesResponse) error {
	r.calls++
	return &net.OpError{Op: "dial", Net: "tcp", Addr: r.addr, Err: errors.New("connect: connection refused")}
}

// TestAppendToDownNodeWaitsUntilReachable: an append that could not connect
// fails only once the node accepts connections again (and at once after
// shutdown), so raft counts one failure for the whole downtime.
func TestAppendToDownNodeWaitsUntilReachable(t *testing.T) {
	addr := testPorts(t, 1)[0]
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	inner := &refusingTransport{addr: tcp}
	var no atomic.Bool
	gt := newGatedTransport(inner, &no, &no, time.Second)
	gt.patience.wait = 10 * time.Second
	listening := make(chan net.Listener, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
		}
		listening <- l
	}()
	start := time.Now()
	err = gt.AppendEntries("n2", raft.ServerAddress(addr), &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
	took := time.Since(start)
	if l := <-listening; l != nil {
		defer l.Close()
	}
	if err == nil || inner.calls != 1 {
		t.Fatalf("append: err %v after %d calls, want the dial error of the one call", err, inner.calls)
	}
	if took < 450*time.Millisecond || took > 5*time.Second {
		t.Errorf("the append failed after %s; want it to wait until the node listens (after 500 ms)", took)
	}

	gt.patience.stopWaiting()
	inner.addr, _ = net.ResolveTCPAddr("tcp", testPorts(t, 1)[0])
	start = time.Now()
	gt.AppendEntries("n2", raft.ServerAddress(addr), &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
	if took := time.Since(start); took > time.Second {
		t.Errorf("waited %s after stopWaiting, want no wait", took)
	}
}
