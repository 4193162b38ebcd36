package grpcapi

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
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
