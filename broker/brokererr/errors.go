package brokererr

import (
	"errors"
	"fmt"
)

// Errors of the broker service. A wire protocol maps each to its own codes;
// none of them carries raft or gRPC types.
var (
	// ErrNotLeader: the operation must run on the leader. The error is a
	// *NotLeaderError naming the leader when one is known.
	ErrNotLeader = errors.New("not the leader")
	// ErrUnavailable: no leader is known right now, or the new leader is
	// still applying earlier entries. Retry shortly.
	ErrUnavailable = errors.New("group unavailable")
	// ErrUnknownOutcome: the write may or may not have been committed.
	// Retry with the same producer id and sequence (gRPC: Aborted, which
	// the SDK retries so).
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrInvalidArgument: the request is malformed; retrying will not help.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: an unknown topic or group.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: the topic exists with another queue count.
	ErrAlreadyExists = errors.New("already exists")
	// ErrOutOfRange: an offset past the end of a queue.
	ErrOutOfRange = errors.New("offset out of range")
	// ErrTooLarge: a message or request above the configured limits.
	ErrTooLarge = errors.New("too large")
	// ErrFailedPrecondition: the operation conflicts with the current state
	// and was refused: a definite failure, nothing of it was stored.
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrShutdown: the node is stopping.
	ErrShutdown = errors.New("node is shutting down")
	// ErrTimeout: the operation did not finish within its deadline.
	ErrTimeout = errors.New("timeout")
	// ErrBusy: the leader holds as many produce bytes as it may
	// (MaxPendingBytes). Retry after a short wait.
	ErrBusy = errors.New("busy")
	// ErrSequenceReused: the producer id and sequence were already used by
	// a request with other content. Nothing of this request was stored, and
	// sending it again under that sequence will not help.
	ErrSequenceReused = errors.New("sequence reused")
)

// Invalid is an ErrInvalidArgument that says what is wrong.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}
