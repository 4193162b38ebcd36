package broker

import (
	"fmt"
	"sync"
	"time"

	"github.com/raftmq/raftmq/election"
)

// stall tracks how long a raft index has stayed below the index it should
// reach (commit below last, applied below commit) without moving.
type stall struct {
	at    uint64
	since time.Time // zero: not behind
}

func (s *stall) observe(low, high uint64, now time.Time) {
	if low >= high {
		s.since = time.Time{}
		return
	}
	if s.since.IsZero() || low != s.at {
		s.at, s.since = low, now
	}
}

func (s *stall) stuckFor(now time.Time) time.Duration {
	if s.since.IsZero() {
		return 0
	}
	return now.Sub(s.since)
}

// progress is what readiness knows about this node's raft indexes, sampled
// by the state loop every StatePeriod.
type progress struct {
	mu        sync.Mutex
	commit    stall // leader: commit index below the last index
	apply     stall // applied index below the commit index
	replicate stall // follower: last index below the leader's commit index
}

// sampleProgress records this node's raft indexes for Readiness.
func (b *Broker) sampleProgress() {
	st := b.node.Stats()
	now := time.Now()
	var leaderCommit uint64
	if st.Role == election.Follower && st.LeaderID != "" {
		if p, ok := b.view.Get(st.LeaderID); ok && now.Sub(p.LastOK) <= b.fresh() {
			leaderCommit = p.State.Commit
		}
	}
	b.progress.mu.Lock()
	defer b.progress.mu.Unlock()
	if st.Role == election.Leader {
		b.m.ops.applied.record(now, st.AppliedIndex)
		b.progress.commit.observe(st.CommitIndex, st.LastIndex, now)
	} else {
		b.progress.commit.observe(0, 0, now)
	}
	b.progress.apply.observe(st.AppliedIndex, st.CommitIndex, now)
	b.progress.replicate.observe(st.LastIndex, leaderCommit, now)
}

// stallLimit is how long an index may stay stuck before the node reports
// itself not ready: a produce waits as long (WriteTimeout) before it fails.
func (b *Broker) stallLimit() time.Duration { return max(b.cfg.WriteTimeout, 2*b.fresh()) }

// Readiness is nil while this node can do its part in the group, else an
// ErrUnavailable error that says why: no leader is known; this node leads
// but has not committed its first entry of the term, or has entries that
// stay uncommitted (its followers do not accept them); its applied index is
// stuck below the commit index; or, as a follower, it receives no entries
// while the leader commits. It reads figures the state loop samples, so it
// is cheap enough for a probe.
func (b *Broker) Readiness() error {
	if b.closed.Load() {
		return ErrShutdown
	}
	st := b.node.Stats()
	if st.LeaderID == "" {
		return fmt.Errorf("%w: no leader known", ErrUnavailable)
	}
	now := time.Now()
	limit := b.stallLimit()
	b.progress.mu.Lock()
	commit, commitFor := b.progress.commit.at, b.progress.commit.stuckFor(now)
	applied, applyFor := b.progress.apply.at, b.progress.apply.stuckFor(now)
	last, replicateFor := b.progress.replicate.at, b.progress.replicate.stuckFor(now)
	b.progress.mu.Unlock()
	if st.Role == election.Leader {
		if commitFor > limit {
			return fmt.Errorf("%w: this leader cannot commit: its commit index %d has not moved for %s while its log reaches %d; "+
				"its followers do not accept its entries (see this node's log for replication errors)",
				ErrUnavailable, commit, commitFor.Round(time.Second), st.LastIndex)
		}
		if !b.node.Ready() {
			return fmt.Errorf("%w: leader of term %d is still applying earlier entries", ErrUnavailable, st.Term)
		}
	}
	if applyFor > limit {
		return fmt.Errorf("%w: applying is stuck: applied index %d has not moved for %s while the commit index is %d",
			ErrUnavailable, applied, applyFor.Round(time.Second), st.CommitIndex)
	}
	if st.Role == election.Follower && replicateFor > limit {
		return fmt.Errorf("%w: this follower receives no entries: its log has stopped at %d for %s while leader %s commits further",
			ErrUnavailable, last, replicateFor.Round(time.Second), st.LeaderID)
	}
	return nil
}

// CaughtUp reports whether this node has, since it started, heard from a
// leader and applied everything committed then: its replicated tables
// (users, grants) are the group's, not those of the snapshot it restored.
// Once true it stays true.
func (b *Broker) CaughtUp() bool {
	if b.caughtUp.Load() {
		return true
	}
	st := b.node.Stats()
	if st.LeaderID != "" && st.CommitIndex > 0 && st.AppliedIndex >= st.CommitIndex {
		b.caughtUp.Store(true)
		return true
	}
	return false
}
