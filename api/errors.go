package api

import (
	"strings"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A status error of the Broker service may carry a
// google.rpc.ErrorInfo detail with ErrorDomain and one of these reasons when
// the gRPC code alone does not tell a client what to do.
const (
	ErrorDomain = "raftmq"
	// ReasonSequenceReused (code InvalidArgument): the producer id and
	// sequence were already used by a request with other content. Nothing of
	// the request was stored; resending it under that sequence fails again.
	ReasonSequenceReused = "SEQUENCE_REUSED"
	// ReasonOtherGroup (code FailedPrecondition): the call named, in
	// GroupIDKey, another group's id than this node's. Nothing of it was
	// done; the client's other addresses may still serve its group.
	ReasonOtherGroup = "OTHER_GROUP"
)

// GroupIDKey is the metadata key of a call that names the id of the group
// it is meant for (StatusResponse.group_id).
const GroupIDKey = "raftmq-group-id"

// CallStatusOf is err as the status a unary call would fail with.
func CallStatusOf(err error) *CallStatus {
	st := status.Convert(err).Proto()
	return &CallStatus{Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails()}
}

// Err is the status error s describes (nil for a nil s or code OK).
func (s *CallStatus) Err() error {
	if s == nil {
		return nil
	}
	return status.ErrorProto(&spb.Status{Code: s.Code, Message: s.Message, Details: s.Details})
}

// OverSizeLimit reports whether gRPC refused a message over its size limit
// ("received message larger than max" from the node, "trying to send
// message larger than max" on the caller's side): it does so before any
// handler reads the message, so nothing of it was done.
func OverSizeLimit(err error) bool {
	return status.Code(err) == codes.ResourceExhausted && strings.Contains(status.Convert(err).Message(), "larger than max")
}

// Busy reports whether a node refused a call busy (ResourceExhausted, but
// not gRPC's size refusal): a node refuses before the request is queued
// for the log, so nothing of it is stored.
func Busy(err error) bool {
	return status.Code(err) == codes.ResourceExhausted && !OverSizeLimit(err)
}
