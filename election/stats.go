package election

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Stats are this node's raft figures.
type Stats struct {
	Role          Role
	Term          uint64
	LeaderID      string
	CommitIndex   uint64
	AppliedIndex  uint64
	LastIndex     uint64
	LastContact   time.Time
	LeaderChanges uint64
	RoleChanges   uint64
}

// Stats returns current raft figures without blocking on raft's loops.
func (n *Node) Stats() Stats {
	return Stats{
		Role:          n.Role(),
		Term:          n.raft.CurrentTerm(),
		LeaderID:      n.LeaderID(),
		CommitIndex:   n.raft.CommitIndex(),
		AppliedIndex:  n.raft.AppliedIndex(),
		LastIndex:     n.raft.LastIndex(),
		LastContact:   n.raft.LastContact(),
		LeaderChanges: n.leaderChanges.Load(),
		RoleChanges:   n.roleChanges.Load(),
	}
}

// Snapshot takes a snapshot of the FSM now (unless nothing was applied since
// the last one) and returns the last log index a snapshot covers.
func (n *Node) Snapshot() (uint64, error) {
	if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return 0, fmt.Errorf("snapshot: %w", translate(err))
	}
	return n.LastSnapshotIndex(), nil
}

// LastSnapshotIndex is the last log index the newest snapshot covers (0:
// none yet).
func (n *Node) LastSnapshotIndex() uint64 {
	i, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return i
}
