package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// Message is what a producer sends.
type Message struct {
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
	// Queue, when not nil, names the queue; otherwise the key's hash picks
	// it (one key stays ordered), or round robin when there is no key.
	Queue *int32
	// Delayed delivery, at most one (client/delay.go): DelayLevel is one
	// of RocketMQ's 18 levels (1s 5s 10s 30s 1m ... 2h); DeliverAt a time
	// at most the broker's --max-delay ahead. The ack names the message's
	// queue, offset 0 and its delivery time (AckDeliverAt).
	DelayLevel int
	DeliverAt  time.Time
}

// ProducerConfig tunes a Producer.
type ProducerConfig struct {
	// MaxRequestMessages and MaxRequestBytes bound one coalesced request;
	// a single Send larger than them goes alone.
	MaxRequestMessages int
	MaxRequestBytes    int
	// RequestLimit is the broker's bound of one request as its log encodes
	// it (--max-request-bytes; default DefaultRequestLimit). A Send over it
	// fails at once with ErrRequestTooLarge; coalesced requests stay under it.
	RequestLimit int
	// MaxInflight is how many requests the producer keeps in flight at once;
	// concurrent Sends beyond that are coalesced into the next request.
	// The default, 2, keeps one request committing while the next one
	// fills: with 4 producers x 256 Sends in flight it gave 19 % more
	// 100 B messages/s than 8 did, at less client CPU (docs/BENCHMARKS.md).
	MaxInflight int
}

// DefaultProducerConfig returns the defaults.
func DefaultProducerConfig() ProducerConfig {
	return ProducerConfig{MaxRequestMessages: 4096, MaxRequestBytes: 1 << 20, RequestLimit: DefaultRequestLimit, MaxInflight: 2}
}

// Producer sends messages idempotently: every request carries the
// producer's id and its own sequence number, and a retry after an unknown
// outcome (leader died mid-commit, timeout) reuses them, so the group appends
// it once.
//
// Send is safe for concurrent use. Concurrent Sends to one topic are
// coalesced into one request while MaxInflight requests are already in
// flight, so many goroutines sending one message each cost about what one
// goroutine sending large batches does. Messages of one Send stay together
// and in order; a goroutine that waits for each Send keeps its order.
type Producer struct {
	c      *Client
	id     string // decided by idOnce (producerID)
	idOnce sync.Once
	cfg    ProducerConfig
	seq    atomic.Uint64

	mu          sync.Mutex
	queue       []*sendOp // waiting to be sent, in arrival order
	inflight    int
	outstanding map[uint64]bool // sequences sent and not yet answered
}

// ErrSequenceReused: the group refused a request because the producer id
// and sequence it carried were already used by a request with other content
// (another producer with the same id, or one that reuses sequences). Nothing
// of the request was stored. It is a definite failure: the SDK does not
// retry it, and resending the same request under that sequence fails again.
var ErrSequenceReused = errors.New("producer sequence reused")

// sendErr classifies the error of a request that the SDK stopped retrying.
func (p *Producer) sendErr(seq uint64, err error) error {
	if sequenceReused(err) {
		return fmt.Errorf("%w: producer %s sequence %d; nothing of this request was stored: %w", ErrSequenceReused, p.producerID(), seq, err)
	}
	return err
}

// sequenceReused reports whether err is the group's refusal of a reused
// sequence (InvalidArgument with api.ReasonSequenceReused).
func sequenceReused(err error) bool {
	return hasReason(err, codes.InvalidArgument, api.ReasonSequenceReused)
}

// hasReason reports whether err is a status error with code and an
// ErrorInfo of raftmq's domain naming reason.
func hasReason(err error, code codes.Code, reason string) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		return false
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == api.ErrorDomain && ei.Reason == reason {
			return true
		}
	}
	return false
}

// seqSpan bounds how far the newest sequence may run ahead of the oldest
// unanswered one. The group remembers the last 1024 sequences of a producer;
// a retry older than that would be refused, so a request that keeps being
// retried holds back new requests instead of falling out of the window.
const seqSpan = 512

type sendOp struct {
	ctx   context.Context // a queued op whose ctx has ended is never sent
	topic string
	msgs  []Message
	size  int
	done  func([]*api.Ack, error)
}

// NewProducer returns a producer with default config. Its id is a number
// its group hands out or else a fresh random one (ID).
func (c *Client) NewProducer() *Producer { return c.NewProducerWith(DefaultProducerConfig()) }

// NewProducerWith returns a producer with the given config.
func (c *Client) NewProducerWith(cfg ProducerConfig) *Producer {
	d := DefaultProducerConfig()
	if cfg.MaxRequestMessages <= 0 {
		cfg.MaxRequestMessages = d.MaxRequestMessages
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = d.MaxRequestBytes
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = d.MaxInflight
	}
	if cfg.RequestLimit <= 0 {
		cfg.RequestLimit = d.RequestLimit
	}
	cfg.MaxRequestBytes = min(cfg.MaxRequestBytes, cfg.RequestLimit)
	return &Producer{c: c, id: newProducerID(), cfg: cfg, outstanding: map[uint64]bool{}}
}

// ID is the producer id its requests carry. A producer asks its group for
// a number when it first sends (or is first asked its id) and then sends
// as "#<number>", which the group's log stores in two or three bytes; a
// group that does not hand numbers out (an earlier release, or one not
// reached within a few seconds) leaves it its random id. Either way the id
// never changes afterwards.
func (p *Producer) ID() string { return p.producerID() }

// producerNumberTimeout bounds the wait for a producer number: past it the
// producer keeps its random id.
const producerNumberTimeout = 5 * time.Second

// producerID decides the producer's id once: "#<n>" when the group hands
// out number n within producerNumberTimeout, else its random id.
func (p *Producer) producerID() string {
	p.idOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), min(producerNumberTimeout, p.c.cfg.RetryTimeout))
		defer cancel()
		r, err := call(ctx, p.c, func(ctx context.Context, cl api.BrokerClient) (*api.NumberProducerResponse, error) {
			return cl.NumberProducer(ctx, &api.NumberProducerRequest{})
		})
		if err == nil {
			p.id = "#" + strconv.FormatUint(r.GetNumber(), 10)
		}
	})
	return p.id
}

// Send appends msgs to topic atomically and returns one ack per message,
// retrying across leader changes. If ctx has ended before the messages'
// request is started, Send fails at once with ErrNotSent and nothing is
// sent; if it ends later, the messages may still be appended (exactly once).
func (p *Producer) Send(ctx context.Context, topic string, msgs ...Message) ([]*api.Ack, error) {
	type result struct {
		acks []*api.Ack
		err  error
	}
	ch := make(chan result, 1)
	start := time.Now()
	op := p.sendAsync(ctx, topic, msgs, func(acks []*api.Ack, err error) { ch <- result{acks, err} })
	select {
	case r := <-ch:
		return r.acks, r.err
	case <-ctx.Done():
		if p.withdraw(op) {
			return nil, fmt.Errorf("%w: %w", ErrNotSent, ctx.Err())
		}
		select {
		case r := <-ch:
			return r.acks, r.err
		default:
		}
		if f := p.c.failedSince(start); f != nil {
			return nil, fmt.Errorf("%w (retrying; last error from %s: %v)", ctx.Err(), f.addr, f.err)
		}
		return nil, ctx.Err()
	}
}

// SendAsync is Send without waiting: it queues msgs and returns at once;
// done is called exactly once, with one ack per message or the error, after
// the SDK's retries (bounded by Config.RetryTimeout). done runs on an SDK
// goroutine and must not block for long: later acks of this producer wait
// for it. It may run before SendAsync returns when msgs are refused at once.
// Many SendAsync calls in flight cost one goroutine per request, not one per
// call; the caller bounds how many are outstanding (memory is not bounded
// otherwise). Calls in flight together may be appended in another order
// than they were made; to keep one key's order, wait for each Send.
func (p *Producer) SendAsync(topic string, msgs []Message, done func([]*api.Ack, error)) {
	p.sendAsync(context.Background(), topic, msgs, done)
}

// SendAsyncContext is SendAsync with a context: when ctx has ended before
// the messages' request is started, done gets an ErrNotSent error and
// nothing is sent. A request already started runs to its end as with
// SendAsync, and done gets its result.
func (p *Producer) SendAsyncContext(ctx context.Context, topic string, msgs []Message, done func([]*api.Ack, error)) {
	p.sendAsync(ctx, topic, msgs, done)
}

func (p *Producer) sendAsync(ctx context.Context, topic string, msgs []Message, done func([]*api.Ack, error)) *sendOp {
	if len(msgs) == 0 {
		done(nil, fmt.Errorf("%w: send: no messages", ErrNotSent))
		return nil
	}
	if err := ctx.Err(); err != nil {
		done(nil, fmt.Errorf("%w: %w", ErrNotSent, err))
		return nil
	}
	op := &sendOp{ctx: ctx, topic: topic, msgs: msgs, done: done}
	for i := range msgs {
		op.size += messageSize(&msgs[i])
	}
	if n := requestOverhead(topic) + op.size; n > p.cfg.RequestLimit {
		done(nil, tooLarge(len(msgs), n, p.cfg.RequestLimit))
		return nil
	}
	p.mu.Lock()
	p.queue = append(p.queue, op)
	p.dispatchLocked()
	p.mu.Unlock()
	return op
}

// withdraw takes op out of the queue if no request has taken it yet, and
// reports whether it did (op is then never sent nor called back).
func (p *Producer) withdraw(op *sendOp) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, q := range p.queue {
		if q == op {
			p.queue = append(p.queue[:i:i], p.queue[i+1:]...)
			return true
		}
	}
	return false
}

// request is one produce request being sent: the operations it carries,
// their message count and its sequence.
type request struct {
	ops []*sendOp
	n   int
	seq uint64
}

// dispatchLocked starts requests while fewer than MaxInflight are in flight,
// each on a goroutine of its own.
func (p *Producer) dispatchLocked() {
	for {
		r, ok := p.nextLocked()
		if !ok {
			return
		}
		go p.run(r)
	}
}

// nextLocked takes the next request off the queue when one may start: fewer
// than MaxInflight in flight and the sequence window open. It takes as many
// waiting operations of one topic as fit.
func (p *Producer) nextLocked() (request, bool) {
	if p.inflight >= p.cfg.MaxInflight {
		// Nothing can start: ended operations are dropped when a request
		// ends and one can, so a full window costs no scan per call.
		return request{}, false
	}
	p.dropEndedLocked()
	if len(p.queue) == 0 || !p.windowOpenLocked() {
		return request{}, false
	}
	first := p.queue[0]
	r := request{ops: []*sendOp{first}, n: len(first.msgs)}
	size := requestOverhead(first.topic) + first.size
	rest := p.queue[:0:0]
	for _, op := range p.queue[1:] {
		// size bounds the request as the broker's log encodes it, so a
		// coalesced request never exceeds the broker's request bound.
		if op.topic == first.topic && delayedOp(op) == delayedOp(first) && r.n+len(op.msgs) <= p.cfg.MaxRequestMessages && size+op.size <= p.cfg.MaxRequestBytes {
			r.ops = append(r.ops, op)
			r.n += len(op.msgs)
			size += op.size
		} else {
			rest = append(rest, op)
		}
	}
	p.queue = rest
	p.inflight++
	r.seq = p.seq.Add(1)
	p.outstanding[r.seq] = true
	return r, true
}

// run sends r and then, while another request may start, sends that one
// too: under a steady load one goroutine carries request after request and
// keeps the stack it grew in gRPC's call path (a fresh goroutine per request
// spent about 5 % of a loaded producer's CPU growing its stack).
func (p *Producer) run(r request) {
	for {
		p.send(r)
		p.mu.Lock()
		p.inflight--
		delete(p.outstanding, r.seq)
		next, ok := p.nextLocked()
		p.dispatchLocked()
		p.mu.Unlock()
		if !ok {
			return
		}
		r = next
	}
}

// dropEndedLocked fails the queued operations whose context has ended as
// not sent; their callbacks run on their own goroutines, outside p.mu.
func (p *Producer) dropEndedLocked() {
	keep := p.queue[:0]
	for _, op := range p.queue {
		if op.ctx.Done() == nil { // never ends (SendAsync)
			keep = append(keep, op)
			continue
		}
		if err := op.ctx.Err(); err != nil {
			go op.done(nil, fmt.Errorf("%w: %w", ErrNotSent, err))
			continue
		}
		keep = append(keep, op)
	}
	clear(p.queue[len(keep):])
	p.queue = keep
}

func (p *Producer) windowOpenLocked() bool {
	next := p.seq.Load() + 1
	for s := range p.outstanding {
		if next-s >= seqSpan {
			return false
		}
	}
	return true
}

// send makes produce request r and calls back each of its operations.
func (p *Producer) send(r request) {
	batch, n, seq := r.ops, r.n, r.seq
	req := &api.ProduceRequest{Topic: batch[0].topic, ProducerId: p.producerID(), Sequence: seq, Messages: make([]*api.ProduceMessage, 0, n), PackedAcks: true}
	pms := make([]api.ProduceMessage, n) // one allocation for the request's messages
	for _, op := range batch {
		for _, m := range op.msgs {
			pm := &pms[len(req.Messages)]
			pm.Key, pm.Tag, pm.Properties, pm.Body, pm.Queue = m.Key, m.Tag, m.Properties, m.Body, m.Queue
			pm.DelayLevel, pm.DeliverAtMs = delayFields(&m)
			req.Messages = append(req.Messages, pm)
		}
	}
	size := 0
	for _, op := range batch {
		size += op.size
	}
	var resp *api.ProduceResponse
	err := p.c.doConn(context.Background(), size, 0, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := p.c.streams.Produce(ctx, cc, req)
		if err == nil {
			resp = r
		}
		return err
	})
	err = explainSizeRefusal(err, p.cfg.RequestLimit)
	if err != nil {
		err = p.sendErr(seq, err)
	}
	var acks []*api.Ack
	if err == nil {
		acks, err = resp.AcksFor(n)
	}
	off := 0
	for _, op := range batch {
		if err != nil {
			op.done(nil, err)
		} else {
			op.done(acks[off:off+len(op.msgs):off+len(op.msgs)], nil)
			off += len(op.msgs)
		}
	}
}
