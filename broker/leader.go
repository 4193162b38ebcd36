package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/raftmq/raftmq/election"
)

// leaderWait bounds how long a leader-only call waits for a leader it can
// run on or name.
const leaderWait = 3 * time.Second

// awaitLeader is the check at the top of every leader-only call: nil on a
// ready leader; at once a *NotLeaderError when another node leads, whose
// address it names (a protocol adapter forwards the call there). While no
// leader is known, the leader has not registered its address, or this node
// leads but has not applied its predecessors' entries, it checks again every
// 20 ms for at most leaderWait or until ctx ends, then returns the last error.
func (b *Broker) awaitLeader(ctx context.Context) error { return b.await(ctx, b.leaderCheck) }

// await runs check until it returns nil, an error naming a leader to forward
// to, or an error no wait resolves (see awaitLeader).
func (b *Broker) await(ctx context.Context, check func() error) error {
	var wait <-chan time.Time
	for {
		err := check()
		if err == nil || !b.leaderPending(err) {
			return err
		}
		if wait == nil {
			t := time.NewTimer(leaderWait)
			defer t.Stop()
			wait = t.C
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-wait:
			return err
		case <-ctx.Done():
			if b.ctx.Err() != nil { // Close ended the call
				return ErrShutdown
			}
			return err
		case <-b.stop:
			return ErrShutdown
		}
	}
}

// leaderPending reports whether err may resolve by itself within moments:
// no leader known, one not reachable yet, or this leader not ready.
func (b *Broker) leaderPending(err error) bool {
	var nl *NotLeaderError
	if errors.As(err, &nl) {
		return nl.LeaderID == "" || nl.LeaderID == b.cfg.NodeID || nl.PeerAddr == ""
	}
	return errors.Is(err, ErrUnavailable)
}

// isLeader is TransferLeader's check: it needs the role, not readiness.
func (b *Broker) isLeader() error {
	if b.node.Role() != election.Leader {
		return b.notLeader()
	}
	return nil
}

// leaderWatch is the leader this node knows, from its role events, and a
// channel closed and replaced whenever that changes: a call forwarded to a
// leader waits on it to learn that another node replaced that leader
// (AwaitLeaderOtherThan).
type leaderWatch struct {
	mu      sync.Mutex
	id      string
	since   time.Time // when id was set
	changed chan struct{}
}

func newLeaderWatch(id string) *leaderWatch {
	return &leaderWatch{id: id, since: time.Now(), changed: make(chan struct{})}
}

func (w *leaderWatch) set(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id != w.id {
		w.id, w.since = id, time.Now()
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// leaderless is how long this node has known no leader (0: it knows one).
func (w *leaderWatch) leaderless() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.id != "" {
		return 0
	}
	return time.Since(w.since)
}

func (w *leaderWatch) get() (string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id, w.changed
}

// AwaitLeaderOtherThan waits until this node knows a leader other than id
// (from its role events) and reports true then; false once done is closed
// or the broker closes. A protocol adapter's forward to leader id gives up
// when it reports true: a leader that is paused or cut off keeps the
// connection open and never answers, while the group has elected another.
func (b *Broker) AwaitLeaderOtherThan(id string, done <-chan struct{}) bool {
	for {
		l, changed := b.leader.get()
		if l != "" && l != id {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return false
		case <-b.stop:
			return false
		}
	}
}
