package election

import (
	"errors"

	"github.com/hashicorp/raft"
)

// Errors of this package: every error a call returns wraps one of them (or
// is a plain validation message). raft's own errors are translated once, in
// translate; callers never see a raft type.
var (
	// ErrNotLeader: this node is not the leader (or is handing leadership
	// over); nothing was appended.
	ErrNotLeader = errors.New("not the leader")
	// ErrUnknownOutcome: leadership was lost while the command was in
	// flight; it may or may not be committed. Retry with the same producer
	// id and sequence.
	ErrUnknownOutcome = errors.New("leadership lost while committing: outcome unknown")
	// ErrTimeout: the command was not accepted in time; nothing was appended.
	ErrTimeout = errors.New("timed out waiting for raft")
	// ErrShutdown: the node is shutting down.
	ErrShutdown = errors.New("node is shutting down")
	// ErrNoSuchServer names a server that is not in the configuration.
	ErrNoSuchServer = errors.New("no such server")
	// ErrRefused: a membership change that would hurt availability.
	ErrRefused = errors.New("refused")
	// ErrOwnLog: a node to be added holds a log that is not this group's
	// (it began a group of its own); adding it would overwrite that log or
	// depose this group's leader (CheckJoiner).
	ErrOwnLog = errors.New("already holds a log of its own")
	// ErrNoAnswer: a node to be added did not answer a raft call.
	ErrNoAnswer = errors.New("no answer to a raft call")
)

// errNoCampaign fails this node's own vote requests (NeverCampaign); raft
// logs it, no caller sees it.
var errNoCampaign = errors.New("this node does not campaign now: its log or state machine is damaged, or it is catching up after an unclean start")

// translate maps raft's errors to this package's sentinels. It is the only
// place that knows them; raft's error is dropped, not wrapped, so no caller
// can come to depend on it (its text says nothing the sentinel does not).
func translate(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrNotVoter):
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		return ErrUnknownOutcome
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return err
}
