package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// refusingBroker answers every Produce with the group's refusal of a reused
// sequence, as broker/grpcapi sends it, and counts the attempts.
type refusingBroker struct {
	api.UnimplementedBrokerServer
	calls atomic.Int32
}

func (b *refusingBroker) Produce(context.Context, *api.ProduceRequest) (*api.ProduceResponse, error) {
	b.calls.Add(1)
	st, err := status.New(codes.InvalidArgument, `sequence reused: producer "p" sequence 1 held other content`).
		WithDetails(&errdetails.ErrorInfo{Domain: api.ErrorDomain, Reason: api.ReasonSequenceReused})
	if err != nil {
		return nil, err
	}
	return nil, st.Err()
}

// Defect: a reused producer sequence was acknowledged but never stored. The
// group now refuses it; the SDK reports that as ErrSequenceReused at once,
// a definite failure, without retrying.
func TestSendReusedSequenceIsPermanent(t *testing.T) {
	fake := &refusingBroker{}
	c, err := New(Config{Servers: []string{serveBroker(t, fake)}, RetryTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := c.NewProducer()
	_, err = p.Send(ctx, "t", Message{Body: []byte("x")})
	if !errors.Is(err, ErrSequenceReused) {
		t.Fatalf("got %v, want ErrSequenceReused", err)
	}
	if status.Code(err) != codes.InvalidArgument || Retryable(err) {
		t.Fatalf("error %v: code %s, retryable %v", err, status.Code(err), Retryable(err))
	}
	for _, want := range []string{p.ID(), "sequence 1", "nothing of this request was stored"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := fake.calls.Load(); n != 1 {
		t.Fatalf("the SDK sent the refused request %d times, want 1", n)
	}
	// An InvalidArgument without the reason stays an ordinary error.
	if sequenceReused(status.Error(codes.InvalidArgument, "sequence reused")) {
		t.Fatal("a bare InvalidArgument taken for a reused sequence")
	}
}
