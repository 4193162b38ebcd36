package election

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// DefaultRecoveryTimeout bounds how long a node that started uncleanly
// waits for a leader before it votes and campaigns again (Config).
const DefaultRecoveryTimeout = 2 * time.Second

// Recovery after an unclean start.
//
// Raft's safety rests on a node never forgetting an entry it acknowledged.
// A node whose process ended without closing its log (RaftStores.Unclean) may
// have: a disk with a volatile write cache, or a torn sector, loses writes
// it had confirmed. If it acknowledged entry E on the leader's behalf and
// lost it, E may now be held by fewer nodes than a quorum; then this node's
// vote can elect a leader without E (a lagging node's log is "as up to date"
// as its own), or it can be elected itself, and E is overwritten on every
// node.
//
// So such a node neither campaigns nor grants votes until it holds an entry
// of the term of a leader it hears from. A leader elected without its vote
// holds every committed entry (its voters, a quorum without this node, meet
// every quorum that committed one elsewhere), and once this node holds an
// entry of that leader's term, Raft's log matching gives it everything the
// leader had, E included.
//
// If no leader is heard from for RecoveryTimeout (every node of the group
// restarted at once, as after a power loss; or too few of the others are up)
// it votes and campaigns again: a group that cannot elect anyone is worse,
// and after a real power loss only writes nobody was told about are torn.
// A group of one voter does not wait.

// recoveringVotes refuses vote and pre-vote requests that reach this node
// while recovering is set, and passes every other call to raft unchanged.
// It sits between the transport's consumer channel and raft's.
func recoveringVotes(in <-chan raft.RPC, out chan<- raft.RPC, recovering *atomic.Bool, stop <-chan struct{}) {
	for {
		var rpc raft.RPC
		select {
		case rpc = <-in:
		case <-stop:
			return
		}
		if recovering.Load() {
			// Term 0: a refusal that never makes the candidate step down.
			switch rpc.Command.(type) {
			case *raft.RequestVoteRequest:
				rpc.Respond(&raft.RequestVoteResponse{Granted: false}, nil)
				continue
			case *raft.RequestPreVoteRequest:
				rpc.Respond(&raft.RequestPreVoteResponse{Granted: false}, nil)
				continue
			}
		}
		select {
		case out <- rpc:
		case <-stop:
			// Answer it: a transport that does not fail calls on its own
			// when the node stops (raft.InmemTransport) would leave the
			// caller waiting out its timeout.
			rpc.Respond(nil, raft.ErrTransportShutdown)
			return
		}
	}
}

// awaitCatchUp waits until this node may vote again (see above) and clears
// n.recovering; done is called when it caught up (not on a timeout).
func (n *Node) awaitCatchUp(timeout time.Duration, done func()) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	heard := time.Now()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.cfg.ID {
			heard = time.Now()
			st := n.raft.Stats()
			if st["last_log_term"] == strconv.FormatUint(n.raft.CurrentTerm(), 10) {
				n.recovering.Store(false)
				n.log.Info("caught up with the leader after an unclean start: voting and campaigning again",
					"leader", id, "last_index", st["last_log_index"])
				if done != nil {
					done()
				}
				return
			}
			continue
		}
		if time.Since(heard) > timeout {
			n.recovering.Store(false)
			n.log.Warn("no leader heard from after an unclean start: voting and campaigning again", "waited", timeout)
			return
		}
	}
}

// Recovering reports whether this node is still waiting, after an unclean
// start, to catch up with a leader before it votes or campaigns.
func (n *Node) Recovering() bool { return n.recovering.Load() }
