package grpcapi

import (
	"errors"
	"testing"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
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

func statusCode(err error) string {
	s, _ := status.FromError(err)
	return s.Code().String()
}
