package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// streamNode serves ProduceStream: serve runs each stream.
type streamNode struct {
	api.UnimplementedBrokerServer
	serve     func(api.Broker_ProduceStreamServer) error
	unaryBusy bool // unary calls are refused busy
	streams   atomic.Int64
	unary     atomic.Int64
}

func (n *streamNode) ProduceStream(st api.Broker_ProduceStreamServer) error {
	n.streams.Add(1)
	return n.serve(st)
}

func (n *streamNode) Produce(context.Context, *api.ProduceRequest) (*api.ProduceResponse, error) {
	n.unary.Add(1)
	if n.unaryBusy {
		return nil, status.Error(codes.ResourceExhausted, "busy")
	}
	return &api.ProduceResponse{NodeId: "unary"}, nil
}

func answered(c *api.ProduceCall) *api.ProduceReply {
	return &api.ProduceReply{Id: c.Id, Response: &api.ProduceResponse{NodeId: c.Request.Topic}}
}

// answerAllBut answers every call at once but those to topic, which it
// never answers; a stream that fails (a call over the size limit) ends with
// its error.
func answerAllBut(topic string) func(api.Broker_ProduceStreamServer) error {
	return func(st api.Broker_ProduceStreamServer) error {
		for {
			c, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if c.Request.Topic != topic {
				st.Send(answered(c))
			}
		}
	}
}

func streamClient(t *testing.T, n api.BrokerServer) (*Client, grpc.ClientConnInterface) {
	t.Helper()
	c, err := New(Config{Servers: []string{serveBroker(t, n)}, RetryTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cc, err := c.clientConn(c.cfg.Servers[0])
	if err != nil {
		t.Fatal(err)
	}
	return c, cc
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestProduceStreamRepliesByID: calls on one stream get their own replies
// whatever order the node answers them in, errors keep their code and
// details, and each call tells the node how long its caller waits.
func TestProduceStreamRepliesByID(t *testing.T) {
	n := &streamNode{}
	n.serve = func(st api.Broker_ProduceStreamServer) error {
		var held []*api.ProduceCall
		for {
			c, err := st.Recv()
			if err != nil {
				return nil
			}
			if c.TimeoutMs <= 0 || c.TimeoutMs > time.Minute.Milliseconds() {
				t.Errorf("call %d carries timeout %d ms, want within the caller's minute", c.Id, c.TimeoutMs)
			}
			switch c.Request.Topic {
			case "hold":
				held = append(held, c)
				continue
			case "reused":
				st.Send(&api.ProduceReply{Id: c.Id, Error: api.CallStatusOf(reasonStatus(codes.InvalidArgument, api.ReasonSequenceReused))})
			default:
				st.Send(answered(c))
			}
			for _, h := range held { // answered after the call that came later
				st.Send(answered(h))
			}
			held = nil
		}
	}
	c, cc := streamClient(t, n)
	ctx := ctxFor(t, time.Minute)
	first := make(chan *api.ProduceResponse, 1)
	go func() {
		r, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "hold"})
		if err != nil {
			t.Errorf("held call: %v", err)
		}
		first <- r
	}()
	time.Sleep(50 * time.Millisecond) // let the held call go first
	r, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "t2"})
	if err != nil || r.NodeId != "t2" {
		t.Fatalf("second call: %v, %v; want its own reply", r, err)
	}
	if r := <-first; r == nil || r.NodeId != "hold" {
		t.Fatalf("first call got %v, want its own reply", r)
	}
	_, err = c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "reused"})
	if !sequenceReused(err) {
		t.Fatalf("refused call: %v, want InvalidArgument with reason %s", err, api.ReasonSequenceReused)
	}
	if s, u := n.streams.Load(), n.unary.Load(); s != 1 || u != 0 {
		t.Fatalf("%d streams and %d unary calls, want every call on one stream", s, u)
	}
}

func reasonStatus(code codes.Code, reason string) error {
	st, err := status.New(code, "refused").WithDetails(&errdetails.ErrorInfo{Domain: api.ErrorDomain, Reason: reason})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// TestProduceStreamCallGivesUpAlone: a call whose context ends while its
// reply is outstanding returns the context's error; the stream serves the
// next call.
func TestProduceStreamCallGivesUpAlone(t *testing.T) {
	n := &streamNode{serve: answerAllBut("never")}
	c, cc := streamClient(t, n)
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.streams.Produce(short, cc, &api.ProduceRequest{Topic: "never"}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("unanswered call: %v, want DeadlineExceeded", err)
	}
	if r, err := c.streams.Produce(ctxFor(t, time.Minute), cc, &api.ProduceRequest{Topic: "next"}); err != nil || r.NodeId != "next" {
		t.Fatalf("next call: %v, %v", r, err)
	}
	if s := n.streams.Load(); s != 1 {
		t.Fatalf("%d streams, want the first kept", s)
	}
}

// TestProduceStreamEndFailsWaitingCalls: when the node ends a stream, the
// calls waiting on it fail with its status at once, and the next call opens
// a new stream.
func TestProduceStreamEndFailsWaitingCalls(t *testing.T) {
	n := &streamNode{}
	n.serve = func(st api.Broker_ProduceStreamServer) error {
		for {
			c, err := st.Recv()
			if err != nil {
				return nil
			}
			if c.Request.Topic == "end" {
				return status.Error(codes.Unavailable, "node stopping")
			}
			st.Send(answered(c))
		}
	}
	c, cc := streamClient(t, n)
	ctx := ctxFor(t, time.Minute)
	start := time.Now()
	_, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "end"})
	if status.Code(err) != codes.Unavailable || !Retryable(err) || time.Since(start) > 10*time.Second {
		t.Fatalf("call on an ended stream: %v after %s, want Unavailable at once", err, time.Since(start))
	}
	if r, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "again"}); err != nil || r.NodeId != "again" {
		t.Fatalf("call after the end: %v, %v", r, err)
	}
	if s := n.streams.Load(); s != 2 {
		t.Fatalf("%d streams, want a second one after the first ended", s)
	}
}

// TestProduceStreamUnauthenticatedOpensAnother: a call refused as
// Unauthenticated (its user's secret changed since the stream opened)
// makes the next call open a new stream, which carries a fresh credential.
func TestProduceStreamUnauthenticatedOpensAnother(t *testing.T) {
	n := &streamNode{}
	var refused atomic.Bool
	n.serve = func(st api.Broker_ProduceStreamServer) error {
		for {
			c, err := st.Recv()
			if err != nil {
				return nil
			}
			if refused.CompareAndSwap(false, true) {
				st.Send(&api.ProduceReply{Id: c.Id, Error: api.CallStatusOf(status.Error(codes.Unauthenticated, "secret changed"))})
				continue
			}
			st.Send(answered(c))
		}
	}
	c, cc := streamClient(t, n)
	ctx := ctxFor(t, time.Minute)
	for i := range 3 {
		_, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "t" + strconv.Itoa(i)})
		if i == 0 && status.Code(err) != codes.Unauthenticated || i > 0 && err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if s := n.streams.Load(); s != 2 {
		t.Fatalf("%d streams, want one more after the refusal and no more after that", s)
	}
}

// TestProduceWithoutStreams: a node that does not serve ProduceStream (an
// earlier release) gets the call as a unary Produce, and later calls go
// unary without trying a stream again.
func TestProduceWithoutStreams(t *testing.T) {
	n := &unaryNode{}
	c, cc := streamClient(t, n)
	ctx := ctxFor(t, time.Minute)
	for i := range 3 {
		if r, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "t"}); err != nil || r.NodeId != "unary" {
			t.Fatalf("call %d: %v, %v", i, r, err)
		}
	}
	if u := n.unary.Load(); u != 3 {
		t.Fatalf("%d unary calls, want 3", u)
	}
	if s := n.streamTries.Load(); s != 1 {
		t.Fatalf("%d streams asked for, want 1: the node is not remembered as serving no streams", s)
	}
}

// unaryNode serves unary Produce calls only, as a node of an earlier
// release.
type unaryNode struct {
	api.UnimplementedBrokerServer
	unary       atomic.Int64
	streamTries atomic.Int64
}

func (n *unaryNode) ProduceStream(api.Broker_ProduceStreamServer) error {
	n.streamTries.Add(1)
	return status.Error(codes.Unimplemented, "unknown method ProduceStream")
}

func (n *unaryNode) Produce(context.Context, *api.ProduceRequest) (*api.ProduceResponse, error) {
	n.unary.Add(1)
	return &api.ProduceResponse{NodeId: "unary"}, nil
}

// TestProduceStreamOversizedCallFailsAlone: a call over the node's message
// size ends the whole stream (gRPC's limit); the calls that waited on it go
// again as unary calls, so only the oversized one fails, as a unary call
// would, and the next call opens a new stream.
func TestProduceStreamOversizedCallFailsAlone(t *testing.T) {
	n := &streamNode{serve: answerAllBut("hold")}
	c, cc := oversizedStreamClient(t, n)
	ctx := ctxFor(t, time.Minute)
	held := make(chan error, 1)
	go func() {
		r, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "hold"})
		if err == nil && r.NodeId != "unary" {
			err = fmt.Errorf("answered by %q, want the unary retry", r.NodeId)
		}
		held <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.streams.Produce(ctx, cc, oversized); status.Code(err) != codes.ResourceExhausted || Retryable(err) {
		t.Fatalf("oversized call: %v, want ResourceExhausted that is not retried", err)
	}
	if err := <-held; err != nil {
		t.Fatalf("the call that waited beside it: %v", err)
	}
	if r, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "next"}); err != nil || r.NodeId != "next" {
		t.Fatalf("next call: %v, %v, want it on a new stream", r, err)
	}
	if st, u := n.streams.Load(), n.unary.Load(); st != 2 || u != 1 {
		t.Fatalf("%d streams, %d unary calls served; want 2 and 1 (gRPC refuses the oversized one before the handler)", st, u)
	}
}

// TestProduceStreamEndedThenBusyIsUnknown: a call that waited on a stream
// an oversized call ended may have been taken by the node already, so when
// it is sent again and refused busy, its outcome is unknown (retried with
// the same sequence), not a refusal that stored nothing.
func TestProduceStreamEndedThenBusyIsUnknown(t *testing.T) {
	n := &streamNode{serve: answerAllBut("hold"), unaryBusy: true}
	c, cc := oversizedStreamClient(t, n)
	ctx := ctxFor(t, time.Minute)
	held := make(chan error, 1)
	go func() {
		_, err := c.streams.Produce(ctx, cc, &api.ProduceRequest{Topic: "hold"})
		held <- err
	}()
	time.Sleep(50 * time.Millisecond)
	c.streams.Produce(ctx, cc, oversized)
	if err := <-held; status.Code(err) != codes.Aborted || api.Busy(err) || !Retryable(err) || Classify(err) != Unknown {
		t.Fatalf("the call that waited beside the oversized one, refused busy when sent again: %v; want Aborted, outcome unknown", err)
	}
}

var oversized = &api.ProduceRequest{Topic: "big", Messages: []*api.ProduceMessage{{Body: make([]byte, 8<<10)}}}

// oversizedStreamClient is a client of n served with a 4 KiB message limit.
func oversizedStreamClient(t *testing.T, n api.BrokerServer) (*Client, grpc.ClientConnInterface) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.MaxRecvMsgSize(4 << 10))
	api.RegisterBrokerServer(s, n)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	c, err := New(Config{Servers: []string{l.Addr().String()}, RetryTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	cc, err := c.clientConn(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return c, cc
}

// TestProduceStreamOpeningHoldsUpOnlyItsNode: while a stream to a node
// that never answers is being opened (up to the connection's 2 s connect
// timeout, api.Dial), calls to another node go on at once.
func TestProduceStreamOpeningHoldsUpOnlyItsNode(t *testing.T) {
	c, cc := streamClient(t, &streamNode{serve: answerAllBut("never")})
	stalled, err := c.clientConn(stalledNode(t))
	if err != nil {
		t.Fatal(err)
	}
	opening := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.streams.Produce(ctx, stalled, &api.ProduceRequest{Topic: "t"})
		opening <- err
	}()
	time.Sleep(100 * time.Millisecond) // the call to the stalled node is opening its stream
	start := time.Now()
	if r, err := c.streams.Produce(ctxFor(t, time.Minute), cc, &api.ProduceRequest{Topic: "other"}); err != nil || r.NodeId != "other" {
		t.Fatalf("call to the answering node: %v, %v", r, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("call to the answering node took %s: it waited for the other node's stream", d)
	}
	if err := <-opening; err == nil {
		t.Fatal("call to the stalled node succeeded")
	}
}
