package remoting

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/broker"
	rmq "github.com/raftmq/raftmq/remoting"
)

// codeOf is the one place broker errors (and the gRPC errors of forwarded
// calls) become RocketMQ response codes. The Go client retries a send
// answered 1, 14, 16 or 17; everything that may pass by itself maps to 14
// (SERVICE_NOT_AVAILABLE, as DLedger maps NOT_LEADER), an unknown outcome to
// 1 (SYSTEM_ERROR): the retry carries the same UNIQ_KEY and is stored once.
func codeOf(err error) int16 {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		switch st.Code() {
		case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Canceled:
			return rmq.ServiceNotAvailable
		case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition, codes.AlreadyExists:
			return rmq.MessageIllegal
		case codes.NotFound:
			return rmq.TopicNotExist
		}
		return rmq.SystemError
	}
	switch {
	case errors.Is(err, broker.ErrNotLeader), errors.Is(err, broker.ErrUnavailable), errors.Is(err, broker.ErrShutdown),
		errors.Is(err, broker.ErrBusy), errors.Is(err, broker.ErrTimeout), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return rmq.ServiceNotAvailable
	case errors.Is(err, broker.ErrUnknownOutcome):
		return rmq.SystemError
	case errors.Is(err, broker.ErrInvalidArgument), errors.Is(err, broker.ErrTooLarge), errors.Is(err, broker.ErrSequenceReused),
		errors.Is(err, broker.ErrOutOfRange), errors.Is(err, broker.ErrAlreadyExists), errors.Is(err, broker.ErrFailedPrecondition):
		return rmq.MessageIllegal
	case errors.Is(err, broker.ErrNotFound):
		return rmq.TopicNotExist
	}
	return rmq.SystemError
}

// errResponse answers req with err's code and text.
func errResponse(req *rmq.Command, err error) *rmq.Command {
	return rmq.Response(req, codeOf(err), err.Error())
}

// callCodeOf is codeOf for the requests that are not sends (send-back,
// queue locks, view by id): RocketMQ answers those SYSTEM_ERROR for
// whatever the request itself cannot fix, and 14 where a retry may pass.
func callCodeOf(err error) int16 {
	if c := codeOf(err); c == rmq.ServiceNotAvailable {
		return c
	}
	return rmq.SystemError
}

// callErrResponse answers a request that is not a send with err.
func callErrResponse(req *rmq.Command, err error) *rmq.Command {
	return rmq.Response(req, callCodeOf(err), err.Error())
}
