package api

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ProduceStreams sends produce requests over one ProduceStream per
// connection, shared by every caller: a call on an open stream costs one
// message each way, where a unary Produce call also opens and closes an
// HTTP/2 stream with headers and trailers (about a third less CPU on both
// sides and 40-80 µs less per synchronous request on a 2-core VM,
// docs/BENCHMARKS.md). A node that does not serve ProduceStream gets unary
// calls. The SDK's Client sends its producers' requests through it, and a
// node the requests it forwards to the leader. The zero value is ready.
type ProduceStreams struct {
	// StreamContext, when set, prepares the context each stream opens
	// with (a node marks the streams of the calls it forwards).
	StreamContext func(context.Context) context.Context

	mu    sync.Mutex
	slots map[grpc.ClientConnInterface]*streamSlot
}

// errNoStream: the node does not serve ProduceStream (an earlier release).
// Nothing of the call was done there.
var errNoStream = errors.New("node does not serve ProduceStream")

// errUnaryOnce: the stream ended because one of its calls was over the
// node's message size limit (gRPC's ResourceExhausted ends the whole
// stream). Every call that waited on it goes again on its own, as a unary
// call with the same sequence, so that only the oversized one fails.
var errUnaryOnce = errors.New("produce stream ended by an oversized call")

// streamSlot is one connection's stream: a stream being opened to one node
// (bounded by its first call's context) holds up only the calls to that
// node.
type streamSlot struct {
	mu    sync.Mutex
	open  *produceStream
	unary bool // the node answered Unimplemented
}

// Produce sends req on cc's stream, or as a unary call to a node without
// streams, and returns what a unary Produce call would.
func (ps *ProduceStreams) Produce(ctx context.Context, cc grpc.ClientConnInterface, req *ProduceRequest) (*ProduceResponse, error) {
	s, err := ps.get(ctx, cc)
	if err == nil {
		var resp *ProduceResponse
		if resp, err = s.call(ctx, req); err == nil {
			return resp, nil
		}
	}
	switch {
	case errors.Is(err, errNoStream):
		return NewBrokerClient(cc).Produce(ctx, req)
	case errors.Is(err, errUnaryOnce):
		resp, uerr := NewBrokerClient(cc).Produce(ctx, req)
		if Busy(uerr) {
			// The node may have taken the call on the stream before the
			// stream ended: a refusal now does not mean nothing was stored.
			uerr = status.Errorf(codes.Aborted, "outcome unknown: the produce stream ended (%v), and the call sent again was refused: %v", err, status.Convert(uerr).Message())
		}
		return resp, uerr
	}
	return nil, err
}

// get returns cc's open stream, opening one if it has none (bounded by
// ctx, the first call's context; the stream itself outlives it).
func (ps *ProduceStreams) get(ctx context.Context, cc grpc.ClientConnInterface) (*produceStream, error) {
	ps.mu.Lock()
	slot := ps.slots[cc]
	if slot == nil {
		if ps.slots == nil {
			ps.slots = map[grpc.ClientConnInterface]*streamSlot{}
		}
		slot = &streamSlot{}
		ps.slots[cc] = slot
	}
	ps.mu.Unlock()

	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.unary {
		return nil, errNoStream
	}
	old := slot.open
	if old != nil && !old.retired.Load() {
		return old, nil
	}
	sctx, cancel := context.WithCancel(context.Background())
	if ps.StreamContext != nil {
		sctx = ps.StreamContext(sctx)
	}
	stop := context.AfterFunc(ctx, cancel)
	st, err := NewBrokerClient(cc).ProduceStream(sctx)
	if !stop() { // ctx ended while the stream opened
		cancel()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		cancel()
		if status.Code(err) == codes.Unimplemented {
			slot.noStreams()
			return nil, errNoStream
		}
		return nil, err
	}
	if old != nil {
		old.drain()
	}
	s := &produceStream{st: st, cancel: cancel, pending: map[uint64]chan streamReply{}}
	slot.open = s
	go s.read(func() {
		slot.mu.Lock()
		defer slot.mu.Unlock()
		slot.noStreams()
	})
	return s, nil
}

func (slot *streamSlot) noStreams() {
	slot.unary = true
	slot.open = nil
}

// produceStream is one ProduceStream: calls wait in pending for the reply
// with their id, which read hands them.
type produceStream struct {
	st     Broker_ProduceStreamClient
	cancel context.CancelFunc
	sendMu sync.Mutex
	// retired: new calls open another stream (this one ended, or its
	// credential no longer holds); calls already sent still get replies.
	retired atomic.Bool

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan streamReply
	err     error // why the stream ended, once it has
}

type streamReply struct {
	resp *ProduceResponse
	err  error
}

// call sends req and waits for its reply or the end of ctx. When ctx ends
// while the stream does not take the call (a node that stopped reading),
// the whole stream is cancelled: it is of no use to any call.
func (s *produceStream) call(ctx context.Context, req *ProduceRequest) (*ProduceResponse, error) {
	ch := make(chan streamReply, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	s.next++
	id := s.next
	s.pending[id] = ch
	s.mu.Unlock()

	msg := &ProduceCall{Id: id, Request: req}
	if d, ok := ctx.Deadline(); ok {
		msg.TimeoutMs = max(time.Until(d).Milliseconds(), 1)
	}
	stop := context.AfterFunc(ctx, s.cancel)
	s.sendMu.Lock()
	err := s.st.Send(msg)
	s.sendMu.Unlock()
	if !stop() || err != nil {
		// The stream has ended, or ctx ended it: read tells every call
		// waiting why, this one too.
		s.retired.Store(true)
	}
	select {
	case r := <-ch:
		return r.resp, r.err
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// read hands each reply to its call until the stream ends, then fails the
// calls still waiting with the reason. noStream is called when the node
// does not serve ProduceStream.
func (s *produceStream) read(noStream func()) {
	for {
		r, err := s.st.Recv()
		if err != nil {
			switch {
			case status.Code(err) == codes.Unimplemented:
				noStream()
				err = errNoStream
			case status.Code(err) == codes.ResourceExhausted:
				err = errUnaryOnce
			case errors.Is(err, io.EOF):
				err = status.Error(codes.Unavailable, "the node ended the produce stream")
			}
			s.end(err)
			return
		}
		reply := streamReply{resp: r.Response, err: r.Error.Err()}
		switch {
		case reply.err == nil && reply.resp == nil:
			reply.err = status.Error(codes.Internal, "the node answered a produce call with neither a response nor an error")
		case status.Code(reply.err) == codes.Unauthenticated:
			s.retired.Store(true) // the next call opens a stream with a fresh credential
		}
		s.mu.Lock()
		ch := s.pending[r.Id]
		delete(s.pending, r.Id)
		s.mu.Unlock()
		if ch != nil {
			ch <- reply
		}
	}
}

// end records why the stream ended and fails every call waiting.
func (s *produceStream) end(err error) {
	s.retired.Store(true)
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	for id, ch := range s.pending {
		ch <- streamReply{err: err}
		delete(s.pending, id)
	}
}

// drain closes the stream for sending: the node answers the calls it has
// and then ends it.
func (s *produceStream) drain() {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	_ = s.st.CloseSend()
}
