package election

import (
	"errors"
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

// lastVoteTermKey is the stable store key under which raft records the term
// of its last vote (raft's keyLastVoteTerm).
const lastVoteTermKey = "LastVoteTerm"

// errRecoveringVote is what raft logs ("failed to persist vote") when it
// would have granted a vote while this node recovers from an unclean start.
var errRecoveringVote = errors.New("vote refused: this node started uncleanly and votes again once it has caught up with a leader, or after its recovery timeout")

// recoveringStable is the stable store raft is given. While recovering is
// set it fails raft's write of a vote (the term of the vote, written
// first), so no vote is granted: raft records a vote before it answers the
// request, and answers a failed write as a refusal. Every other write, the
// current term's included, goes through, so raft follows the group's terms
// as usual. Pre-votes are still granted by raft's rules: they elect nobody,
// and a candidate they let start an election gets no vote from this node.
// Refusing votes here rather than between the transport and raft adds no
// goroutine hop to the calls a node serves after an unclean start.
type recoveringStable struct {
	raft.StableStore
	recovering *atomic.Bool
}

func (s recoveringStable) SetUint64(key []byte, val uint64) error {
	if string(key) == lastVoteTermKey && s.recovering.Load() {
		return errRecoveringVote
	}
	return s.StableStore.SetUint64(key, val)
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
