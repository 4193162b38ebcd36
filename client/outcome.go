package client

import (
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNotSent: the messages were never handed to the group, so none of them
// is stored; sending them again cannot create a duplicate. A Send or
// SendAsyncContext whose context has ended before its request was started
// fails with it.
var ErrNotSent = errors.New("not sent")

// ErrNoConnection (with ErrNotSent) ends a call none of whose attempts could
// connect to a node: nothing was sent.
var ErrNoConnection = errors.New("no node could be reached")

// Outcome is what a failed or successful send means for its messages.
type Outcome int

// Outcomes of a send.
const (
	// Acknowledged: stored, with one ack per message.
	Acknowledged Outcome = iota
	// Failed: definitely not stored (never sent, or refused by the group);
	// sending again stores the messages once.
	Failed
	// Unknown: sent, and possibly stored; sending again with a new
	// producer may store them twice.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Acknowledged:
		return "acknowledged"
	case Failed:
		return "failed"
	}
	return "outcome unknown"
}

// Classify tells what the error of a Send means for its messages: only an
// error that says the messages were never sent, or that the group refused
// them, is Failed; anything else (a timeout, a cancelled context, a lost
// connection after the request left) is Unknown.
func Classify(err error) Outcome {
	if err == nil {
		return Acknowledged
	}
	if errors.Is(err, ErrNotSent) || errors.Is(err, ErrRequestTooLarge) || errors.Is(err, ErrSequenceReused) {
		return Failed
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.OutOfRange,
		codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented:
		return Failed
	}
	return Unknown
}

// neverSent reports whether err says the request never left this process:
// no connection to a raftmq node could be made (refused, a name that does
// not resolve, a server that does not speak its API, a failed TLS
// handshake), so no node can have stored anything of it.
func neverSent(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.FailedPrecondition:
		return otherGroup(err)
	case codes.Unavailable:
		return strings.Contains(st.Message(), "Error while dialing") || unreachable(err) != ""
	case codes.DeadlineExceeded, codes.Canceled:
		return notReady(st.Message())
	}
	return false
}

// notReady reports whether a gRPC error message says the call ended while
// it waited for a connection to become ready, before anything was sent.
func notReady(msg string) bool {
	return strings.Contains(msg, "while waiting for connections to become ready") || strings.HasPrefix(msg, "latest balancer error:")
}
