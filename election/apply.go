package election

import (
	"time"

	"github.com/hashicorp/raft"
)

// ApplyFuture is an entry handed to raft whose outcome is not known yet.
type ApplyFuture interface {
	// Error blocks until the entry is committed and applied on this node,
	// or failed: ErrNotLeader and ErrTimeout (nothing was appended),
	// ErrUnknownOutcome, ErrShutdown.
	Error() error
	// Index is the entry's log index, once Error returned nil.
	Index() uint64
	// Response is the state machine's answer for the entry, as the state
	// machine returned it. The node never reads it: the package that owns
	// the state machine types it.
	Response() interface{}
}

// Apply hands cmd to raft as one entry and returns at once; timeout bounds
// the wait for raft to accept it. raft keeps the order of entries, so
// futures complete in the order they were handed over.
func (n *Node) Apply(cmd []byte, timeout time.Duration) ApplyFuture {
	f := n.raft.Apply(cmd, timeout)
	n.trans.quiet.applied()
	return applyFuture{f}
}

// applyFuture is raft's future with raft's errors translated.
type applyFuture struct{ f raft.ApplyFuture }

func (a applyFuture) Error() error          { return translate(a.f.Error()) }
func (a applyFuture) Index() uint64         { return a.f.Index() }
func (a applyFuture) Response() interface{} { return a.f.Response() }
