package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// heldBroker answers Produce only once release is closed, and counts the
// produce requests that reached it.
type heldBroker struct {
	api.UnimplementedBrokerServer
	release  chan struct{}
	produces atomic.Int32
}

func (h *heldBroker) Produce(ctx context.Context, req *api.ProduceRequest) (*api.ProduceResponse, error) {
	h.produces.Add(1)
	<-h.release
	acks := make([]*api.Ack, len(req.Messages))
	for i := range acks {
		acks[i] = &api.Ack{}
	}
	return &api.ProduceResponse{Acks: acks}, nil
}

func (h *heldBroker) Status(context.Context, *api.StatusRequest) (*api.StatusResponse, error) {
	return &api.StatusResponse{}, nil
}

// TestSendWithEndedContextIsNeverSent: a Send whose context ends while its
// messages still wait in the producer's queue fails with ErrNotSent and is
// never sent, and one whose context has already ended is refused at once.
// Otherwise queued messages would go out after the caller had been told the
// send failed (an interrupted produce would keep sending).
func TestSendWithEndedContextIsNeverSent(t *testing.T) {
	h := &heldBroker{release: make(chan struct{})}
	c, err := New(Config{Servers: []string{serveBroker(t, h)}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.NewProducerWith(ProducerConfig{MaxInflight: 1})

	first := make(chan error, 1)
	go func() { _, err := p.Send(context.Background(), "t", Message{Body: []byte("1")}); first <- err }()
	deadline := time.Now().Add(30 * time.Second)
	for h.produces.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first request never reached the broker")
		}
		time.Sleep(time.Millisecond)
	}

	// Queued behind the first request, then the caller gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = p.Send(ctx, "t", Message{Body: []byte("2")})
	if !errors.Is(err, ErrNotSent) || Classify(err) != Failed {
		t.Fatalf("queued send whose context ended: %v (%v), want ErrNotSent (failed)", err, Classify(err))
	}
	async := make(chan error, 1)
	actx, acancel := context.WithCancel(context.Background())
	p.SendAsyncContext(actx, "t", []Message{{Body: []byte("3")}}, func(_ []*api.Ack, err error) { async <- err })
	acancel()
	// Already ended: refused without being queued.
	_, err = p.Send(ctx, "t", Message{Body: []byte("4")})
	if !errors.Is(err, ErrNotSent) {
		t.Fatalf("send with an ended context: %v, want ErrNotSent", err)
	}

	close(h.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-async:
		if !errors.Is(err, ErrNotSent) {
			t.Fatalf("async send whose context ended in the queue: %v, want ErrNotSent", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the async send was never called back")
	}
	time.Sleep(100 * time.Millisecond)
	if n := h.produces.Load(); n != 1 {
		t.Fatalf("%d produce requests reached the broker, want 1: sends whose context had ended went out", n)
	}
}

func TestClassify(t *testing.T) {
	cases := map[error]Outcome{
		nil: Acknowledged,
		fmt.Errorf("%w: %w", ErrNotSent, context.Canceled):    Failed,
		status.Error(codes.InvalidArgument, "too large"):      Failed,
		status.Error(codes.FailedPrecondition, "refused"):     Failed,
		status.Error(codes.Aborted, "outcome unknown"):        Unknown,
		status.Error(codes.Unavailable, "no leader"):          Unknown,
		fmt.Errorf("%w (last error: x)", context.Canceled):    Unknown,
		fmt.Errorf("%w (retrying)", context.DeadlineExceeded): Unknown,
		tooLarge(2, 20<<20, 16<<20):                           Failed,
		explainSizeRefusal(status.Error(codes.ResourceExhausted, "grpc: received message larger than max (50 vs. 40)"), 64<<20): Failed,
		fmt.Errorf("%w: producer p sequence 3", ErrSequenceReused):                                                              Failed,
	}
	for err, want := range cases {
		if got := Classify(err); got != want {
			t.Errorf("%v: %v, want %v", err, got, want)
		}
	}
}

// TestSendToNoNodeFailsNotUnknown: a send to an address that refuses every
// connection never left the process, so it fails (safe to send again),
// whether the call ends at its deadline or gives up on the unreachable
// address first; one whose request reached a node that then vanished
// stays unknown.
func TestSendToNoNodeFailsNotUnknown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // refused from now on
	for _, giveUp := range []time.Duration{0, 300 * time.Millisecond} {
		c, err := New(Config{Servers: []string{addr}, RetryTimeout: time.Second, GiveUpUnreachable: giveUp})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.NewProducer().Send(context.Background(), "t", Message{Body: []byte("x")})
		c.Close()
		if !errors.Is(err, ErrNotSent) || !errors.Is(err, ErrNoConnection) || Classify(err) != Failed {
			t.Errorf("give up after %v: %v (%v); want a failed send that was never sent", giveUp, err, Classify(err))
		}
	}
	// A server that is not raftmq's API (an HTTP port): nothing sent either.
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	go func() {
		for {
			conn, err := hl.Accept()
			if err != nil {
				return
			}
			// As an HTTP server does: answer, and keep the connection.
			conn.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			go func() { io.Copy(io.Discard, conn); conn.Close() }()
		}
	}()
	c, err := New(Config{Servers: []string{hl.Addr().String()}, RetryTimeout: time.Second, GiveUpUnreachable: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.NewProducer().Send(context.Background(), "t", Message{Body: []byte("x")})
	c.Close()
	if !errors.Is(err, ErrNotSent) || Classify(err) != Failed {
		t.Errorf("send to an HTTP port: %v (%v); want a failed send that was never sent", err, Classify(err))
	}
	if neverSent(status.Error(codes.Unavailable, "error reading from server: EOF")) {
		t.Error("a connection lost after the request was written counts as never sent")
	}
}

// A listener that never accepts (a paused process, a blackhole behind a
// proxy): the kernel completes the connection, nothing answers. A send
// there is failed and never sent, and the error names the address and why.
func TestSendToSilentAddressIsNotSent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	c, err := New(Config{Servers: []string{addr}, RetryTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.NewProducer().Send(context.Background(), "t", Message{Body: []byte("x")})
	if !errors.Is(err, ErrNotSent) || Classify(err) != Failed || !strings.Contains(err.Error(), addr) {
		t.Errorf("send to a silent address: %v (%v); want a failed send, never sent, naming %s", err, Classify(err), addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.Status(ctx); err == nil || !strings.Contains(err.Error(), addr+": ") {
		t.Errorf("status of a silent address: %v; want an error naming %s and why", err, addr)
	}
	if !neverSent(status.Error(codes.DeadlineExceeded, "context deadline exceeded while waiting for connections to become ready")) {
		t.Error("a call that timed out waiting for a connection counts as sent")
	}
}

// busyBroker refuses every produce request busy, as a leader whose budget
// is full does.
type busyBroker struct {
	api.UnimplementedBrokerServer
	produces atomic.Int32
}

func (b *busyBroker) Produce(context.Context, *api.ProduceRequest) (*api.ProduceResponse, error) {
	b.produces.Add(1)
	return nil, status.Error(codes.ResourceExhausted, "busy: 67108864 bytes of produce requests are waiting for raft")
}

func (b *busyBroker) Status(context.Context, *api.StatusRequest) (*api.StatusResponse, error) {
	return &api.StatusResponse{}, nil
}

// TestSendRefusedBusyIsNotSent: a send the group refused busy on every
// attempt stored nothing, so it fails with ErrNotSent (not outcome
// unknown), and its retries slow down instead of coming every 50 ms.
func TestSendRefusedBusyIsNotSent(t *testing.T) {
	b := &busyBroker{}
	c, err := New(Config{Servers: []string{serveBroker(t, b)}, RetryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.NewProducer().Send(context.Background(), "t", Message{Body: []byte("x")})
	if !errors.Is(err, ErrNotSent) || errors.Is(err, ErrNoConnection) || Classify(err) != Failed || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("send refused busy throughout: %v (%v); want a failed send, never stored, saying busy", err, Classify(err))
	}
	// Pauses doubling from 10 ms (jittered to half) to 1 s fit at most 10
	// attempts in 2 s; at the 50 ms cap of other errors there would be 40.
	if n := b.produces.Load(); n < 2 || n > 12 {
		t.Fatalf("%d attempts in 2 s of busy refusals; want 2..12", n)
	}
}
