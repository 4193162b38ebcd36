package grpcapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
)

// FuzzProduceRequest feeds arbitrary bytes through what a produce request
// meets first on a node: protobuf decoding, conversion and validation.
// Nothing may panic; whatever is refused is refused as invalid or too large.
func FuzzProduceRequest(f *testing.F) {
	q := int32(2)
	seed, _ := proto.Marshal(&api.ProduceRequest{Topic: "orders", ProducerId: "p", Sequence: 9,
		Messages: []*api.ProduceMessage{{Key: "k", Tag: "t", Properties: map[string]string{"a": "b"}, Body: []byte("hi"), Queue: &q}}})
	f.Add(seed)
	f.Add([]byte{})
	cfg := broker.DefaultConfig()
	f.Fuzz(func(t *testing.T, data []byte) {
		var req api.ProduceRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		breq := produceRequest(&req)
		err := broker.ValidateProduce(&cfg, &breq)
		if err != nil && !errors.Is(err, broker.ErrInvalidArgument) && !errors.Is(err, broker.ErrTooLarge) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}

func TestToStatusCodes(t *testing.T) {
	cases := map[error]string{
		&broker.NotLeaderError{}:     "Unavailable",
		broker.ErrUnknownOutcome:     "Aborted",
		broker.ErrInvalidArgument:    "InvalidArgument",
		broker.ErrTooLarge:           "InvalidArgument",
		broker.ErrNotFound:           "NotFound",
		broker.ErrOutOfRange:         "OutOfRange",
		broker.ErrAlreadyExists:      "AlreadyExists",
		broker.ErrFailedPrecondition: "FailedPrecondition",
		errors.New("boom"):           "Internal",
	}
	for err, want := range cases {
		if got := statusCode(toStatus(err)); got != want {
			t.Errorf("%v: %s, want %s", err, got, want)
		}
	}
}

// TestUnknownOutcomeIsRetriedFailedPreconditionIsNot: the code of an
// unknown outcome is one the SDK retries (with the same sequence); the code
// of a definite refusal is one it gives up on, so a caller can count it as
// not stored.
func TestUnknownOutcomeIsRetriedFailedPreconditionIsNot(t *testing.T) {
	unknown := fmt.Errorf("%w: leadership lost while committing", broker.ErrUnknownOutcome)
	refused := fmt.Errorf("%w: refused, this request was not appended: sequence 3", broker.ErrFailedPrecondition)
	if st := toStatus(unknown); status.Code(st) != codes.Aborted || !client.Retryable(st) {
		t.Errorf("unknown outcome: %v, want Aborted and retried", st)
	}
	st := toStatus(refused)
	if status.Code(st) != codes.FailedPrecondition || client.Retryable(st) {
		t.Errorf("refusal: %v, want FailedPrecondition and not retried", st)
	}
	if strings.Contains(status.Convert(st).Message(), "unknown") {
		t.Errorf("refusal %q says its outcome is unknown", status.Convert(st).Message())
	}
}

func statusCode(err error) string {
	s, _ := status.FromError(err)
	return s.Code().String()
}
