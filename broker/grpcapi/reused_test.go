package grpcapi

import (
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/store"
)

// A reused sequence is InvalidArgument (a definite failure, never retried)
// with an ErrorInfo that names the reason, and the message says what differs.
func TestToStatusSequenceReused(t *testing.T) {
	err := fmt.Errorf("%w: %w: producer %q sequence 3 held 1 messages", broker.ErrSequenceReused, store.ErrSequenceReused, "p")
	st, ok := status.FromError(toStatus(err))
	if !ok || st.Code() != codes.InvalidArgument || st.Message() != err.Error() {
		t.Fatalf("status %v", st)
	}
	var reasons []string
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			reasons = append(reasons, ei.Domain+"/"+ei.Reason)
		}
	}
	if fmt.Sprint(reasons) != fmt.Sprintf("[%s/%s]", api.ErrorDomain, api.ReasonSequenceReused) {
		t.Fatalf("details %v", reasons)
	}
}
