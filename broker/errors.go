package broker

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/raftmq/raftmq/broker/brokererr"
)

// Errors of the broker service (package brokererr, which the facade's
// subpackages return them from). Each wire protocol answers them with the
// codes the table wireCodes gives; none of them carries raft or gRPC types.
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

// RocketMQ response codes (RocketMQ's ResponseCode, as package remoting
// names them) the broker's errors are answered with.
const (
	rocketSystemError         int16 = 1
	rocketMessageIllegal      int16 = 13
	rocketServiceNotAvailable int16 = 14
	rocketTopicNotExist       int16 = 17
)

// WireCode is how each wire protocol answers one kind of error.
type WireCode struct {
	// Err is the kind, matched with errors.Is; nil for an error of no
	// kind in the table.
	Err error
	// GRPC is the gRPC status code. Clients retry Unavailable and Aborted
	// (the latter with the same producer sequence).
	GRPC codes.Code
	// RocketMQ is the RocketMQ response code. The Go client retries a send
	// answered 1, 14, 16 or 17: whatever may pass by itself is 14
	// (SERVICE_NOT_AVAILABLE, as DLedger answers NOT_LEADER), an unknown
	// outcome 1 (SYSTEM_ERROR), whose retry carries the same UNIQ_KEY and
	// is stored once.
	RocketMQ int16
}

// wireCodes is the one table from the broker's error kinds, and the context
// errors a call may end with, to each wire's codes. An error is answered
// with the codes of the first kind in the table it wraps, so a kind that
// decides the answer whatever else the error wraps comes first: an unknown
// outcome whose wait was cut short is still an unknown outcome.
var wireCodes = []WireCode{
	{ErrNotLeader, codes.Unavailable, rocketServiceNotAvailable},
	{ErrUnavailable, codes.Unavailable, rocketServiceNotAvailable},
	{ErrShutdown, codes.Unavailable, rocketServiceNotAvailable},
	{ErrUnknownOutcome, codes.Aborted, rocketSystemError},
	{ErrTimeout, codes.DeadlineExceeded, rocketServiceNotAvailable},
	{context.DeadlineExceeded, codes.DeadlineExceeded, rocketServiceNotAvailable},
	{context.Canceled, codes.Canceled, rocketServiceNotAvailable},
	{ErrSequenceReused, codes.InvalidArgument, rocketMessageIllegal},
	{ErrInvalidArgument, codes.InvalidArgument, rocketMessageIllegal},
	{ErrTooLarge, codes.InvalidArgument, rocketMessageIllegal},
	{ErrNotFound, codes.NotFound, rocketTopicNotExist},
	{ErrAlreadyExists, codes.AlreadyExists, rocketMessageIllegal},
	{ErrOutOfRange, codes.OutOfRange, rocketMessageIllegal},
	{ErrFailedPrecondition, codes.FailedPrecondition, rocketMessageIllegal},
	{ErrBusy, codes.ResourceExhausted, rocketServiceNotAvailable},
}

// unknownKind answers an error of no kind in the table.
var unknownKind = WireCode{GRPC: codes.Internal, RocketMQ: rocketSystemError}

// CodeOf returns the wire codes err is answered with: those of the first
// kind in the table that err wraps.
func CodeOf(err error) WireCode {
	for _, w := range wireCodes {
		if errors.Is(err, w.Err) {
			return w
		}
	}
	return unknownKind
}

// RocketMQOfGRPC is the RocketMQ code of a gRPC status code, for the
// answers of calls forwarded to another node: the code the table pairs
// with it (each gRPC code in the table has one), or SYSTEM_ERROR.
func RocketMQOfGRPC(c codes.Code) int16 {
	for _, w := range wireCodes {
		if w.GRPC == c {
			return w.RocketMQ
		}
	}
	return unknownKind.RocketMQ
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}
