package election

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Close shuts raft down, then closes the state machine. A leader first
// hands leadership to the most caught-up follower so clients see a pause of
// milliseconds, not an election. Close is idempotent.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	if n.raft.State() == raft.Leader {
		start := time.Now()
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer before shutdown failed", "error", err)
		} else {
			n.log.Info("handed over leadership before shutdown", "took", time.Since(start), "leader", n.LeaderID())
		}
	}
	return n.shutdown()
}

// Kill shuts raft down without handing over leadership (tests only: it
// simulates a crash as closely as a process can).
func (n *Node) Kill() error {
	if n.closed.Swap(true) {
		return nil
	}
	return n.shutdown()
}

func (n *Node) shutdown() error {
	n.trans.patience.stopWaiting() // raft waits for its replication goroutines
	err := n.raft.Shutdown().Error()
	n.raft.DeregisterObserver(n.obs)
	close(n.stop)
	n.wg.Wait()
	n.trans.Close()
	if cerr := n.fsm.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close state machine: %w", cerr)
	}
	return err
}
