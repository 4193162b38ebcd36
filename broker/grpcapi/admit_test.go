package grpcapi

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// countingBroker answers every call and counts the produce calls that
// reached it.
type countingBroker struct {
	api.UnimplementedBrokerServer
	produces atomic.Int32
}

func (c *countingBroker) Produce(context.Context, *api.ProduceRequest) (*api.ProduceResponse, error) {
	c.produces.Add(1)
	return &api.ProduceResponse{}, nil
}

// ProduceStream answers each call with what authorizeStreamed says of it.
func (c *countingBroker) ProduceStream(st api.Broker_ProduceStreamServer) error {
	for {
		call, err := st.Recv()
		if err != nil {
			return nil
		}
		r := &api.ProduceReply{Id: call.Id, Response: &api.ProduceResponse{}}
		if err := authorizeStreamed(st.Context(), api.Broker_Produce_FullMethodName, call.Request); err != nil {
			r = &api.ProduceReply{Id: call.Id, Error: api.CallStatusOf(err)}
		}
		if err := st.Send(r); err != nil {
			return err
		}
	}
}

func (c *countingBroker) Status(context.Context, *api.StatusRequest) (*api.StatusResponse, error) {
	return &api.StatusResponse{}, nil
}

// gate is a broker's admission: produce fails while full, and the group
// has id id.
type gate struct {
	full atomic.Bool
	id   atomic.Pointer[string]
}

func (g *gate) AdmitProduce() error {
	if g.full.Load() {
		return fmt.Errorf("%w: test budget used up", broker.ErrBusy)
	}
	return nil
}

func (g *gate) GroupID() string {
	if p := g.id.Load(); p != nil {
		return *p
	}
	return ""
}

func (g *gate) Config() broker.Config { return broker.Config{NodeID: "n1", Group: "g"} }

// serveGate runs a real gRPC server with the admission tap of g over impl
// and returns a client of it.
func serveGate(t *testing.T, g *gate, impl api.BrokerServer) api.BrokerClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.InTapHandle(admit(g)))
	api.RegisterBrokerServer(srv, impl)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return api.NewBrokerClient(conn)
}

// TestAdmitProduceRefusesBeforeTheHandler runs a real gRPC server with the
// admission tap: while admission fails, produce calls end ResourceExhausted
// (which the SDK retries) without reaching the handler, and other calls
// still go through.
func TestAdmitProduceRefusesBeforeTheHandler(t *testing.T) {
	g := &gate{}
	impl := &countingBroker{}
	cl := serveGate(t, g, impl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &api.ProduceRequest{Topic: "t", Messages: []*api.ProduceMessage{{Body: make([]byte, 1<<20)}}}

	if _, err := cl.Produce(ctx, req); err != nil {
		t.Fatalf("produce with room: %v", err)
	}
	g.full.Store(true)
	for i := 0; i < 3; i++ {
		_, err := cl.Produce(ctx, req)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("produce while full: got %v, want ResourceExhausted", err)
		}
	}
	if _, err := cl.Status(ctx, &api.StatusRequest{}); err != nil {
		t.Fatalf("status while full: %v", err)
	}
	if n := impl.produces.Load(); n != 1 {
		t.Fatalf("handler saw %d produce calls, want 1 (refused calls must not reach it)", n)
	}
	g.full.Store(false)
	if _, err := cl.Produce(ctx, req); err != nil {
		t.Fatalf("produce after room came back: %v", err)
	}
}

// TestAdmitRefusesAnotherGroupsCall: a call naming another group id than
// the one the node knows is refused with FailedPrecondition and reason
// OTHER_GROUP before its handler runs; a call naming the node's id, or
// none, and any call while the node knows no id, go through.
func TestAdmitRefusesAnotherGroupsCall(t *testing.T) {
	g := &gate{}
	impl := &countingBroker{}
	cl := serveGate(t, g, impl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(id string) error {
		c := ctx
		if id != "" {
			c = metadata.AppendToOutgoingContext(ctx, api.GroupIDKey, id)
		}
		_, err := cl.Produce(c, &api.ProduceRequest{Topic: "t"})
		return err
	}
	if err := produce("bbbb"); err != nil {
		t.Fatalf("a call naming a group, to a node that knows none: %v", err)
	}
	own := "aaaa"
	g.id.Store(&own)
	for _, id := range []string{"aaaa", ""} {
		if err := produce(id); err != nil {
			t.Fatalf("a call naming group %q, to a node of group aaaa: %v", id, err)
		}
	}
	err := produce("bbbb")
	st := status.Convert(err)
	reason := ""
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == api.ErrorDomain {
			reason = ei.Reason
		}
	}
	if st.Code() != codes.FailedPrecondition || reason != api.ReasonOtherGroup || !strings.Contains(st.Message(), "bbbb") || !strings.Contains(st.Message(), "aaaa") {
		t.Errorf("a call naming bbbb to a node of aaaa: %v (reason %q), want FailedPrecondition %s naming both", err, reason, api.ReasonOtherGroup)
	}
	if n := impl.produces.Load(); n != 3 {
		t.Fatalf("handler saw %d produce calls, want the 3 admitted", n)
	}
}
