package election

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Replication to a node that is down, and why appends to it wait.
//
// raft v1.7.2 counts every failed append to a follower and waits
// 10 ms × 2^(failures-2), up to 10.24 s, before each next append to it; the
// count is reset only by a successful append. Appends to a stopped node fail
// at once (connection refused), so after ten seconds down the count is about
// eleven and the leader's next append to the restarted node comes up to five
// seconds after it started, sometimes more (measured: one restart in four in
// sync within 1.2 s, the others after about 12 s).
//
// So an append whose connection cannot be made (the request was never sent)
// does not fail at once: it waits until the node accepts connections again,
// probing every probeEvery, for at most downPatience, and then fails as it
// would have. raft counts one failure per downPatience of downtime instead of
// one per backoff step, and sends a fresh append within about a probe
// interval plus its shortest backoff once the node is back. Nothing stale is
// sent: the waiting request is never sent, its failure is only delayed.
//
// Only the goroutines raft runs per follower (replication and heartbeat)
// wait, so no other follower, election or client waits with them; a leader
// that steps down or a removed follower leaves the wait at most downPatience
// later, and shutdown ends it at once (stopWaiting).
const (
	downPatience = 60 * time.Second
	probeEvery   = 100 * time.Millisecond
	probeTimeout = 500 * time.Millisecond
)

// patience holds the appends waiting for a follower that is down.
type patience struct {
	once sync.Once
	stop chan struct{}
	// wait is how long an append may wait for a node (downPatience; tests shorten it).
	wait time.Duration
}

func newPatience() *patience { return &patience{stop: make(chan struct{}), wait: downPatience} }

// stopWaiting ends every wait and every later one at once (shutdown).
func (p *patience) stopWaiting() { p.once.Do(func() { close(p.stop) }) }

// dialFailed returns the address an append could not connect to, when err
// says the request was never sent because the connection failed.
func dialFailed(err error) (string, bool) {
	var op *net.OpError
	if err == nil || !errors.As(err, &op) || op.Op != "dial" || op.Addr == nil {
		return "", false
	}
	return op.Addr.String(), true
}

// awaitReachable blocks until addr accepts a TCP connection, patience.wait
// passes or stopWaiting is called.
func (p *patience) awaitReachable(addr string) {
	deadline := time.NewTimer(p.wait)
	defer deadline.Stop()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
		if c, err := net.DialTimeout("tcp", addr, probeTimeout); err == nil {
			c.Close()
			return
		}
	}
}

// AppendEntries sends an append; one that could not connect waits until
// the node is reachable again before it fails (see patience above), and
// one that repeats what the follower has waits while the leader is quiet
// (quiet.go). Its commit index never passes the node's commit bound
// (Config.CommitBound); raft's request is left as it is.
func (t *gatedTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	t.quiet.before(id, args)
	if t.commitBound != nil {
		if c := t.commitBound(); args.LeaderCommitIndex > c {
			a := *args
			a.LeaderCommitIndex = c
			args = &a
		}
	}
	err := t.Transport.AppendEntries(id, target, args, resp)
	t.quiet.after(id, args, resp, err)
	if addr, ok := dialFailed(err); ok && t.patience != nil {
		t.patience.awaitReachable(addr)
	}
	return err
}
