package broker

import (
	"fmt"

	"github.com/raftmq/raftmq/broker/brokererr"
)

// Errors of the broker service (package brokererr, which the facade's
// subpackages return them from). A wire protocol maps each to its own
// codes; none of them carries raft or gRPC types.
var (
	ErrNotLeader          = brokererr.ErrNotLeader
	ErrUnavailable        = brokererr.ErrUnavailable
	ErrUnknownOutcome     = brokererr.ErrUnknownOutcome
	ErrInvalidArgument    = brokererr.ErrInvalidArgument
	ErrNotFound           = brokererr.ErrNotFound
	ErrAlreadyExists      = brokererr.ErrAlreadyExists
	ErrOutOfRange         = brokererr.ErrOutOfRange
	ErrTooLarge           = brokererr.ErrTooLarge
	ErrFailedPrecondition = brokererr.ErrFailedPrecondition
	ErrShutdown           = brokererr.ErrShutdown
	ErrTimeout            = brokererr.ErrTimeout
	ErrBusy               = brokererr.ErrBusy
	ErrSequenceReused     = brokererr.ErrSequenceReused
)

// NotLeaderError says where the leader is, as far as this node knows.
type NotLeaderError struct {
	LeaderID   string
	PeerAddr   string // the leader's API address as nodes reach it
	ClientAddr string // the leader's API address as clients reach it
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return "not the leader, and no leader is known"
	}
	return fmt.Sprintf("not the leader; the leader is %s at %s", e.LeaderID, e.ClientAddr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

func invalid(format string, args ...any) error { return brokererr.Invalid(format, args...) }
