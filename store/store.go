package store

import (
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/store/queueindex"
)

// Store is the replicated state of one node: the typed calls that write it
// through its election node, and the readers of what this node applied.
type Store struct {
	fsm  *FSM
	node *election.Node
	log  hclog.Logger
	// batchMax is the highest batch version Produce may write
	// (SetBatchVersion); 0 until set, which writes version 1.
	batchMax atomic.Uint32
}

// New is the store over fsm, writing through node (which was started over
// fsm: election.Start).
func New(fsm *FSM, node *election.Node) *Store {
	return &Store{fsm: fsm, node: node, log: fsm.log}
}

// OpenFSM opens the state machine over the queue index in dir (in memory
// when dir is empty, for a log in memory). snaps is the snapshot store raft
// will start from: without a snapshot raft applies the log from its start
// and every topic's index is written anew, so whatever an earlier run left
// in dir is removed; with one, restoring it cuts each queue back. onFatal
// (may be nil) is told when the disk fails an index write.
func OpenFSM(logger hclog.Logger, dir string, snaps raft.SnapshotStore, onFatal func(error)) (*FSM, error) {
	idx, err := queueindex.Open(dir, queueindex.DefaultOptions())
	if err != nil {
		return nil, err
	}
	list, err := snaps.List()
	if err == nil && len(list) == 0 {
		err = idx.Prune(nil, nil)
	}
	if err != nil {
		idx.Close()
		return nil, fmt.Errorf("queue index: %w", err)
	}
	f := newFSM(logger, idx)
	f.onFatal = onFatal
	if len(list) > 0 {
		f.startSnap = list[0].Index
	}
	return f, nil
}

// Close stops the rebuilds (StartRebuilds) and closes the queue index. The
// election node calls it once raft has stopped applying.
func (f *FSM) Close() error {
	f.stopRebuilds()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.idx.Close(); err != nil {
		return fmt.Errorf("close queue index: %w", err)
	}
	return nil
}
