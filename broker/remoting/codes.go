package remoting

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/broker"
	rmq "github.com/raftmq/raftmq/remoting"
)

// codeOf is the RocketMQ response code of err: the one broker.CodeOf gives
// a broker error, or broker.RocketMQOfGRPC the gRPC code of a forwarded
// call's answer.
func codeOf(err error) int32 {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return int32(broker.RocketMQOfGRPC(st.Code()))
	}
	return int32(broker.CodeOf(err).RocketMQ)
}

// errResponse answers req with err's code and text.
func errResponse(req *rmq.Command, err error) *rmq.Command {
	return rmq.Response(req, codeOf(err), err.Error())
}

// callCodeOf is codeOf for the requests that are not sends (send-back,
// queue locks, view by id): RocketMQ answers those SYSTEM_ERROR for
// whatever the request itself cannot fix, and 14 where a retry may pass.
func callCodeOf(err error) int32 {
	if c := codeOf(err); c == rmq.ServiceNotAvailable {
		return c
	}
	return rmq.SystemError
}

// callErrResponse answers a request that is not a send with err.
func callErrResponse(req *rmq.Command, err error) *rmq.Command {
	return rmq.Response(req, callCodeOf(err), err.Error())
}
