package election

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
)

func TestTranslateRaftErrors(t *testing.T) {
	for _, tc := range []struct{ raft, want error }{
		{raft.ErrNotLeader, ErrNotLeader},
		{raft.ErrLeadershipTransferInProgress, ErrNotLeader},
		{raft.ErrNotVoter, ErrNotLeader},
		{raft.ErrLeadershipLost, ErrUnknownOutcome},
		{raft.ErrAbortedByRestore, ErrUnknownOutcome},
		{raft.ErrEnqueueTimeout, ErrTimeout},
		{raft.ErrRaftShutdown, ErrShutdown},
	} {
		got := translate(fmt.Errorf("context: %w", tc.raft))
		if !errors.Is(got, tc.want) || errors.Is(got, tc.raft) {
			t.Errorf("translate(%v) = %v, want %v without raft's error", tc.raft, got, tc.want)
		}
	}
	other := errors.New("disk on fire")
	if got := translate(other); got != other {
		t.Errorf("translate(%v) = %v, want it unchanged", other, got)
	}
}

// TestApplyFutureTranslates: the future Apply returns answers election's
// sentinels, not raft's errors.
func TestApplyFutureTranslates(t *testing.T) {
	f := applyFuture{raft.ApplyFuture(failedFuture{raft.ErrNotLeader})}
	if err := f.Error(); !errors.Is(err, ErrNotLeader) || errors.Is(err, raft.ErrNotLeader) {
		t.Errorf("Error() = %v, want ErrNotLeader without raft's error", err)
	}
}

// failedFuture is a raft.ApplyFuture that failed.
type failedFuture struct{ err error }

func (f failedFuture) Error() error          { return f.err }
func (f failedFuture) Index() uint64         { return 0 }
func (f failedFuture) Response() interface{} { return nil }
