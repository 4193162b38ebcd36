package server_test

import (
	"bytes"
	"context"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// TestProduceStreamServesCallsAsProduce: calls on one ProduceStream, at
// the leader and through a follower, are answered as Produce calls would
// be, each under its own id: many in flight at once, a reused sequence
// refused with its reason, a call without a request, and timeouts of any
// value (none, negative, absurdly long) carried without harm.
func TestProduceStreamServesCallsAsProduce(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	ctx := ctxT(t, 60*time.Second)
	for _, node := range []int{l, (l + 1) % 3} {
		st := openProduceStream(ctx, t, c.Config(node).Listen)
		const n = 200
		producer := "ps-" + c.Config(node).Raft.ID
		calls := map[uint64]*api.ProduceCall{}
		for i := range uint64(n) {
			call := &api.ProduceCall{Id: 1000 + i, Request: &api.ProduceRequest{Topic: "ps", ProducerId: producer, Sequence: i + 1,
				Messages: []*api.ProduceMessage{{Body: []byte{byte(i)}}, {Body: []byte{byte(i), 1}}}, PackedAcks: i%2 == 0}}
			switch i % 4 {
			case 1:
				call.TimeoutMs = -5
			case 2:
				call.TimeoutMs = math.MaxInt64
			case 3:
				call.TimeoutMs = 30_000
			}
			calls[call.Id] = call
			if err := st.Send(call); err != nil {
				t.Fatal(err)
			}
		}
		reused := &api.ProduceCall{Id: 1, Request: &api.ProduceRequest{Topic: "ps", ProducerId: producer, Sequence: 1,
			Messages: []*api.ProduceMessage{{Body: []byte("other")}}}}
		empty := &api.ProduceCall{Id: 2}
		for _, call := range []*api.ProduceCall{reused, empty} {
			if err := st.Send(call); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		answered := map[uint64]bool{}
		for range n + 2 {
			r, err := st.Recv()
			if err != nil {
				t.Fatalf("node %d: stream ended after %d replies: %v", node, len(answered), err)
			}
			if answered[r.Id] {
				t.Fatalf("node %d: call %d answered twice", node, r.Id)
			}
			answered[r.Id] = true
			switch r.Id {
			case reused.Id:
				if !hasReason(r.Error.Err(), codes.InvalidArgument, api.ReasonSequenceReused) {
					t.Errorf("node %d: reused sequence answered %v, want InvalidArgument with reason %s", node, r.Error.Err(), api.ReasonSequenceReused)
				}
				continue
			case empty.Id:
				if status.Code(r.Error.Err()) != codes.InvalidArgument {
					t.Errorf("node %d: a call without a request answered %v, want InvalidArgument", node, r.Error.Err())
				}
				continue
			}
			call, ok := calls[r.Id]
			if !ok {
				t.Fatalf("node %d: reply to call %d, which was not made", node, r.Id)
			}
			if err := r.Error.Err(); err != nil {
				t.Fatalf("node %d: call %d (timeout %d ms): %v", node, r.Id, call.TimeoutMs, err)
			}
			acks := r.Response.GetAcks()
			if r.Id%2 == 0 { // asked packed
				if acks, err = r.Response.GetPackedAcks().Unpack(2); err != nil {
					t.Fatalf("node %d: call %d: %v", node, r.Id, err)
				}
			}
			if len(acks) != 2 || acks[0].Id == "" || acks[0].Id == acks[1].Id {
				t.Fatalf("node %d: call %d acks %v, want two with their ids", node, r.Id, acks)
			}
		}
		if _, err := st.Recv(); err == nil {
			t.Fatalf("node %d: a reply beyond the calls made", node)
		}
	}
}

// openProduceStream dials addr with opts and opens a ProduceStream there;
// the connection closes when the test ends.
func openProduceStream(ctx context.Context, t *testing.T, addr string, opts ...grpc.DialOption) api.Broker_ProduceStreamClient {
	t.Helper()
	cc, err := api.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	st, err := api.NewBrokerClient(cc).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func hasReason(err error, code codes.Code, reason string) bool {
	st := status.Convert(err)
	if st.Code() != code {
		return false
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Reason == reason {
			return true
		}
	}
	return false
}

// TestSynchronousStreamCallsSendNoPings: one call at a time on a
// ProduceStream, as a synchronous producer makes them, costs one HTTP/2
// message each way and no PING frames: with gRPC's dynamic flow-control
// windows each side pinged the other for every message it received, and
// each ping woke the other process once more.
func TestSynchronousStreamCallsSendNoPings(t *testing.T) {
	c := newCluster(t, 1, nil)
	ctx := ctxT(t, 60*time.Second)
	var tap frameTap
	st := openProduceStream(ctx, t, c.Config(0).Listen, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &tappedConn{Conn: conn, tap: &tap}, nil
	}))
	const n = 100
	for i := range uint64(n) {
		call := &api.ProduceCall{Id: i + 1, Request: &api.ProduceRequest{Topic: "sync", ProducerId: "pings", Sequence: i + 1,
			Messages: []*api.ProduceMessage{{Body: bytes.Repeat([]byte{byte(i)}, 1024)}}}}
		if err := st.Send(call); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.Id != call.Id || r.Error.Err() != nil {
			t.Fatalf("call %d answered as %d: %v", call.Id, r.Id, r.Error.Err())
		}
	}
	sent, received := tap.frames(t)
	// HTTP/2 frame types: DATA 0, PING 6.
	if sent[0] < n || received[0] < n {
		t.Fatalf("the tap saw %d DATA frames sent and %d received for %d calls", sent[0], received[0], n)
	}
	// Keepalive pings only a connection silent for api.KeepaliveTime.
	if sent[6] > 2 || received[6] > 2 {
		t.Errorf("%d calls cost %d PING frames sent and %d received, want none", n, sent[6], received[6])
	}
}

// frameTap keeps the bytes a client connection wrote and read.
type frameTap struct {
	mu            sync.Mutex
	written, read bytes.Buffer
}

type tappedConn struct {
	net.Conn
	tap *frameTap
}

func (c *tappedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.tap.mu.Lock()
	c.tap.written.Write(p[:n])
	c.tap.mu.Unlock()
	return n, err
}

func (c *tappedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.tap.mu.Lock()
	c.tap.read.Write(p[:n])
	c.tap.mu.Unlock()
	return n, err
}

// frames counts the HTTP/2 frames of each type the client sent and received.
func (tap *frameTap) frames(t *testing.T) (sent, received map[byte]int) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	w := tap.written.Bytes()
	if !bytes.HasPrefix(w, []byte(preface)) {
		t.Fatalf("the client's first bytes are not HTTP/2's preface: %q", w[:min(len(w), 24)])
	}
	return countFrames(w[len(preface):]), countFrames(tap.read.Bytes())
}

// countFrames counts the whole frames in b by type (a frame header is a
// 24-bit length, a type, flags and a 32-bit stream id).
func countFrames(b []byte) map[byte]int {
	n := map[byte]int{}
	for len(b) >= 9 {
		size := int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		if len(b) < 9+size {
			break
		}
		n[b[3]]++
		b = b[9+size:]
	}
	return n
}
