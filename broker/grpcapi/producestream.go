package grpcapi

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/api"
)

// streamCallWorkers bounds how many calls of one ProduceStream run at once.
// While all are busy the stream reads no further call, so a caller that
// sends faster than its calls commit waits on HTTP/2's flow control.
const streamCallWorkers = 64

// maxCallTimeout bounds a streamed call's timeout_ms, which a caller may
// set to anything.
const maxCallTimeout = 24 * time.Hour

// ProduceStream serves the Produce calls that arrive on one stream. Each
// runs as a Produce call would (admission, permissions, forwarding to the
// leader) on one of up to streamCallWorkers goroutines that live as long as
// the stream, and its reply is sent with its id as soon as it ends. When
// the caller closes its side, the calls still running end first.
func (s *Server) ProduceStream(st api.Broker_ProduceStreamServer) error {
	ctx := st.Context()
	calls := make(chan *api.ProduceCall)
	var (
		sendMu  sync.Mutex
		wg      sync.WaitGroup
		workers int
	)
	work := func() {
		defer wg.Done()
		for c := range calls {
			r := s.streamedCall(ctx, c)
			sendMu.Lock()
			_ = st.Send(r) // fails only once the stream has ended: nobody is left to tell
			sendMu.Unlock()
		}
	}
	defer func() {
		close(calls)
		wg.Wait()
	}()
	for {
		c, refused, err := recvCall(st, s.b.RefusesProduce)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if refused != nil {
			sendMu.Lock()
			_ = st.Send(refused)
			sendMu.Unlock()
			continue
		}
		select {
		case calls <- c:
			continue
		default:
		}
		if workers < streamCallWorkers {
			workers++
			wg.Add(1)
			go work()
		}
		calls <- c
	}
}

// recvCall reads the stream's next call. When the node would refuse it
// at once (refuses, given its size, says why: busy), it is not decoded
// beyond its id and refused is its answer.
func recvCall(st grpc.ServerStream, refuses func(int) error) (c *api.ProduceCall, refused *api.ProduceReply, err error) {
	var raw rawMessage
	if err := st.RecvMsg(&raw); err != nil {
		return nil, nil, err
	}
	defer raw.Free()
	b := raw.Bytes()
	if err := refuses(len(b)); err != nil {
		if id, ok := callID(b); ok {
			return nil, &api.ProduceReply{Id: id, Error: api.CallStatusOf(toStatus(err))}, nil
		}
	}
	c = new(api.ProduceCall)
	if err := proto.Unmarshal(b, c); err != nil {
		return nil, nil, status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
	}
	return c, nil, nil
}

// callID is the id of the encoded ProduceCall b (field 1), read without
// decoding the rest; ok is false when b does not hold one.
func callID(b []byte) (id uint64, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			id, n = protowire.ConsumeVarint(b)
			return id, n >= 0
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return 0, false
}

// streamedCall runs call c of a ProduceStream and answers it.
func (s *Server) streamedCall(ctx context.Context, c *api.ProduceCall) *api.ProduceReply {
	if c.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(min(c.TimeoutMs, maxCallTimeout.Milliseconds()))*time.Millisecond)
		defer cancel()
	}
	resp, err := s.streamedProduce(ctx, c.Request)
	if err != nil {
		return &api.ProduceReply{Id: c.Id, Error: api.CallStatusOf(err)}
	}
	return &api.ProduceReply{Id: c.Id, Response: resp}
}

// streamedProduce is Produce for a request that arrived on a stream: the
// check a Produce call passes before its request is read (its caller's
// permissions) comes first. The node's refusal of produce calls while its
// byte budget is used up does not apply: the request is read already, and
// it waits for the budget in Produce as an admitted call does.
func (s *Server) streamedProduce(ctx context.Context, req *api.ProduceRequest) (*api.ProduceResponse, error) {
	if req == nil {
		return nil, status.Error(codes.InvalidArgument, "a produce call without its request")
	}
	if err := authorizeStreamed(ctx, api.Broker_Produce_FullMethodName, req); err != nil {
		return nil, err
	}
	return s.Produce(ctx, req)
}
