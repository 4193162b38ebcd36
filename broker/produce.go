package broker

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/raftmq/raftmq/broker/batch"
	"github.com/raftmq/raftmq/broker/delay"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// ProduceMessage is one message of a produce request.
type ProduceMessage struct {
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
	Queue      int32 // used when HasQueue
	HasQueue   bool
	Timestamp  int64 // unix ms; 0: when its entry is appended (the leader's clock)
	// Delayed delivery, at most one (package delay): DelayLevel 1..18, or
	// DeliverAt in unix ms. A DELAY or TIMER_DELIVER_MS property sets them.
	DelayLevel int
	DeliverAt  int64
}

// ProduceRequest appends messages to one topic. ProducerID and Seq make a
// retry idempotent; an empty ProducerID turns dedupe off.
type ProduceRequest struct {
	Topic      string
	ProducerID string
	Seq        uint64
	Messages   []ProduceMessage
}

// ProduceResult acknowledges every message of a request, in order.
type ProduceResult struct {
	Acks      []store.Ack
	Duplicate bool
	// DeliverAt holds, for a delayed request, each message's delivery time
	// (unix ms); its acks name the message's queue and offset 0.
	DeliverAt []int64
}

// Limits of one produce request.
const (
	// DefaultMaxRequestBytes is the default bound of one encoded produce
	// request (--max-request-bytes): four maximum-size bodies with room
	// for their keys and properties, and a quarter of the largest entry the
	// log store reads back.
	DefaultMaxRequestBytes = 16 << 20
	// MaxRequestLimit is the largest MaxRequestBytes (and MaxBatchBytes)
	// Validate accepts: what fits in one Raft entry with the batch header.
	MaxRequestLimit = raftlog.MaxEntryBytes - raftlog.BatchOverhead

	MaxMessagesPerRequest = 65536
	maxKeyBytes           = 16 << 10
	maxTagBytes           = 255
	maxProperties         = 128
	maxPropertyBytes      = 16 << 10
)

// Produce appends a request once it is committed on a quorum and applied
// here. Only the leader produces; others get a NotLeaderError.
func (b *Broker) Produce(ctx context.Context, req ProduceRequest) (ProduceResult, error) {
	start := time.Now()
	b.pace.busy()
	ctx, cancel := b.callCtx(ctx)
	defer cancel()
	if err := ValidateProduce(&b.cfg, &req); err != nil {
		b.m.produceErrors.WithLabelValues("invalid").Inc()
		return ProduceResult{}, err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return ProduceResult{}, err
	}
	if err := b.deadLetterProduce(ctx, &req); err != nil { // retry_produce.go
		return ProduceResult{}, err
	}
	nq := b.fsm.QueueCount(req.Topic)
	if nq == 0 {
		if !b.cfg.AutoCreateTopics {
			b.m.produceErrors.WithLabelValues("unknown_topic").Inc()
			return ProduceResult{}, fmt.Errorf("%w: topic %q does not exist and auto-create is off; run `raftmq topic create %s`", ErrNotFound, req.Topic, req.Topic)
		}
		if _, err := b.CreateTopic(ctx, req.Topic, int32(b.cfg.DefaultQueues), true); err != nil {
			return ProduceResult{}, err
		}
		nq = b.fsm.QueueCount(req.Topic)
	}
	lr := raftlog.Request{ProducerID: req.ProducerID, Seq: req.Seq, Topic: req.Topic, Messages: make([]raftlog.Message, len(req.Messages))}
	rr := b.roundRobinBase(&req)
	for i := range req.Messages {
		m := &req.Messages[i]
		q, err := pickQueue(m, rr+uint64(i), nq)
		if err != nil {
			b.m.produceErrors.WithLabelValues("invalid").Inc()
			return ProduceResult{}, err
		}
		lr.Messages[i] = raftlog.Message{Queue: q, Timestamp: m.Timestamp, Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body}
	}
	delayed := isDelayed(&req.Messages[0])
	if delayed {
		if err := b.stage(ctx, &req, &lr); err != nil {
			return ProduceResult{}, err
		}
	}
	half := isTransactional(&req)
	if half {
		if err := b.stageHalf(ctx, req.Topic, &lr); err != nil {
			return ProduceResult{}, err
		}
	}
	// The exact bytes this request adds to its entry (p.Size): what the
	// budget, the batcher and the request bound count.
	p := batch.NewPending(lr)
	if p.Size > b.cfg.MaxRequestBytes {
		b.m.produceErrors.WithLabelValues("invalid").Inc()
		return ProduceResult{}, tooLargeRequest(p.Size, len(req.Messages), b.cfg.MaxRequestBytes)
	}
	// While the budget is used up the request waits its turn (requests
	// are admitted in arrival order as earlier ones commit) rather than be
	// refused and retried at random, which under a flood of producers
	// starves some requests for their clients' whole timeouts. It waits
	// for at most admitWait, and only while at least admitWait would be
	// left of ctx once admitted, so that it is answered before its client
	// stops waiting; past that, and when as many bytes wait as may be
	// held, it is refused busy (nothing stored; the client retries).
	if !b.admit(ctx, p.Size) {
		return ProduceResult{}, b.busy()
	}
	// Once queued, the request's bytes count until its outcome is
	// delivered, even when this call stops waiting for it first.
	p.HeldIn(&b.pending)
	select {
	case b.batch.In() <- p:
	case <-ctx.Done():
		b.pending.Give(p.Size)
		return ProduceResult{}, fmt.Errorf("%w: produce queue full: %w", ErrTimeout, ctx.Err())
	case <-b.stop:
		b.pending.Give(p.Size)
		return ProduceResult{}, ErrShutdown
	}
	var out batch.Outcome
	select {
	case out = <-p.Done():
	case <-ctx.Done():
		// The request is with raft; it may still commit. Report it as
		// unknown so the client retries with the same sequence.
		return ProduceResult{}, fmt.Errorf("%w: %w", ErrUnknownOutcome, ctx.Err())
	}
	if out.Err != nil {
		b.m.produceErrors.WithLabelValues("raft").Inc()
		return ProduceResult{}, out.Err
	}
	if out.Res.Err != nil {
		// Refused by the state machine (a duplicate whose queues do not
		// match, too): nothing of it was stored.
		b.m.produceErrors.WithLabelValues("rejected").Inc()
		return ProduceResult{}, b.replicaErr(out.Res.Err)
	}
	b.m.produceMessages.Add(float64(len(req.Messages)))
	b.m.ops.produced(req.Topic, len(req.Messages))
	b.m.produceBytes.Add(float64(p.Size))
	b.m.produceLatency.Observe(time.Since(start).Seconds())
	res := ProduceResult{Acks: out.Res.Acks, Duplicate: out.Res.Duplicate}
	if delayed {
		res.DeliverAt = b.stagedAcks(&req, &lr, res.Acks)
	}
	if half {
		halfAcks(&lr, res.Acks)
	}
	return res, nil
}

// admitWait bounds how long a produce request waits for room in the budget,
// and is the time it must have left once admitted: with at most
// pendingTarget's worth held ahead of it, it is then answered in time.
const admitWait = 2 * pendingTarget

// admit waits for n bytes of the budget (batch.Budget.Wait) for at most
// admitWait, and not past ctx's deadline less admitWait.
func (b *Broker) admit(ctx context.Context, n int) bool {
	until := time.Now().Add(admitWait)
	if d, ok := ctx.Deadline(); ok && d.Add(-admitWait).Before(until) {
		until = d.Add(-admitWait)
	}
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	return b.pending.Wait(ctx, n)
}

// AdmitProduce tells, before a produce request is read, whether this node
// has room for one: it returns an ErrBusy error while the byte budget
// (MaxPendingBytes, or less under a flood) is used up. The transport calls
// it so that a flood of unary produce calls is refused before its requests
// are received and decoded; Produce then waits for the budget with the
// request's real size.
func (b *Broker) AdmitProduce() error {
	if b.pending.Full() {
		return b.busy()
	}
	return nil
}

// RefusesProduce returns the ErrBusy error Produce would answer at once
// for a request of about n bytes: as many bytes wait for room as the
// budget admits. A transport that holds a request's bytes undecoded asks
// it first, so that a flood's refused requests cost no decoding.
func (b *Broker) RefusesProduce(n int) error {
	if b.pending.Refuses(n) {
		return b.busy()
	}
	return nil
}

func (b *Broker) busy() error {
	b.m.produceErrors.WithLabelValues("busy").Inc()
	return fmt.Errorf("%w: %d bytes of produce requests held and %d waiting for room, of %d this node admits now (what it answers in %s, at most --max-pending-mb); retry shortly",
		ErrBusy, b.pending.Held(), b.pending.Waiting(), b.pending.Limit(), pendingTarget)
}

// ValidateProduce checks a produce request against the limits in cfg; it is
// what every wire protocol's decoded request goes through first.
func ValidateProduce(cfg *Config, req *ProduceRequest) error {
	if err := store.ValidateName("topic", req.Topic); err != nil {
		return storeErr(err)
	}
	if len(req.ProducerID) > raftlog.MaxNameLen {
		return invalid("producer id is %d bytes, at most %d", len(req.ProducerID), raftlog.MaxNameLen)
	}
	if len(req.Messages) == 0 {
		return invalid("produce request has no messages")
	}
	if len(req.Messages) > MaxMessagesPerRequest {
		return invalid("produce request has %d messages, at most %d", len(req.Messages), MaxMessagesPerRequest)
	}
	if err := validateDelay(cfg, req); err != nil {
		return err
	}
	if err := validateTxn(req); err != nil {
		return err
	}
	// The request's size as the log encodes it, with the largest queue
	// number in place of the one the leader will pick, so that it bounds
	// the entry bytes whatever the queue.
	size := (&raftlog.Request{ProducerID: req.ProducerID, Seq: req.Seq, Topic: req.Topic}).EncodedSize()
	now := time.Now().UnixMilli() // the stamp of a message without one, for its size: read once
	for i := range req.Messages {
		m := &req.Messages[i]
		if len(m.Body) > cfg.MaxMessageBytes {
			return fmt.Errorf("%w: message %d body is %d bytes, the limit (--max-message-bytes) is %d", ErrTooLarge, i, len(m.Body), cfg.MaxMessageBytes)
		}
		if len(m.Key) > maxKeyBytes {
			return invalid("message %d key is %d bytes, at most %d", i, len(m.Key), maxKeyBytes)
		}
		if len(m.Tag) > maxTagBytes {
			return invalid("message %d tag is %d bytes, at most %d", i, len(m.Tag), maxTagBytes)
		}
		if len(m.Properties) > maxProperties {
			return invalid("message %d has %d properties, at most %d", i, len(m.Properties), maxProperties)
		}
		for k, v := range m.Properties {
			if k == "" || len(k)+len(v) > maxPropertyBytes {
				return invalid("message %d property %q: empty name or longer than %d bytes", i, k, maxPropertyBytes)
			}
		}
		ts := m.Timestamp
		if ts == 0 {
			ts = now
		}
		lm := raftlog.Message{Queue: store.MaxQueues - 1, Timestamp: ts, Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body}
		size += lm.EncodedSize()
	}
	size += 10 // the message count's varint at its widest
	size += delayOverhead(req) + txnOverhead(req)
	if size > cfg.MaxRequestBytes {
		return tooLargeRequest(size, len(req.Messages), cfg.MaxRequestBytes)
	}
	return nil
}

func tooLargeRequest(size, messages, limit int) error {
	return fmt.Errorf("%w: produce request of %d messages encodes to %d bytes (bodies, keys, tags, properties and lengths), "+
		"the limit (--max-request-bytes) is %d; send fewer or smaller messages per request", ErrTooLarge, messages, size, limit)
}

// roundRobinBase is where round-robin queue choice starts for a request.
// For an idempotent request it is derived from (producer id, sequence), so a
// retry sent to another node (a new leader) picks exactly the queues the
// first attempt picked: the group's answer to a duplicate is the first
// attempt's offsets, which only match the same queues.
func (b *Broker) roundRobinBase(req *ProduceRequest) uint64 {
	if req.ProducerID == "" {
		return b.rr.Add(uint64(len(req.Messages)))
	}
	h := fnv.New64a()
	h.Write([]byte(req.ProducerID))
	var seq [8]byte
	for i := range seq {
		seq[i] = byte(req.Seq >> (8 * i))
	}
	h.Write(seq[:])
	return h.Sum64()
}

// pickQueue: explicit queue, else the key's hash (one key stays in one queue,
// so it stays ordered), else round robin from rr.
func pickQueue(m *ProduceMessage, rr uint64, nq int) (uint32, error) {
	switch {
	case m.HasQueue:
		if m.Queue < 0 || int(m.Queue) >= nq {
			return 0, invalid("queue %d: the topic has queues 0..%d", m.Queue, nq-1)
		}
		return uint32(m.Queue), nil
	case m.Key != "":
		h := fnv.New32a()
		h.Write([]byte(m.Key))
		return h.Sum32() % uint32(nq), nil
	default:
		return uint32(rr % uint64(nq)), nil
	}
}

// batchLoop runs the group commit (package batch) until the broker stops.
func (b *Broker) batchLoop() { b.batch.RunBatch(b.stop) }

// completeLoop answers produce requests as their entries commit, until the
// broker stops.
func (b *Broker) completeLoop() { b.batch.RunComplete(b.stop) }

// CreateTopic creates a topic (leader only).
func (b *Broker) CreateTopic(ctx context.Context, name string, queues int32, ifNotExists bool) (store.TopicInfo, error) {
	if err := store.ValidateName("topic", name); err != nil {
		return store.TopicInfo{}, storeErr(err)
	}
	if err := delay.RefuseTopic(name); err != nil {
		return store.TopicInfo{}, err
	}
	if err := refuseHalfTopic(name); err != nil {
		return store.TopicInfo{}, err
	}
	if queues == 0 {
		queues = int32(b.cfg.DefaultQueues)
	}
	if queues < 1 || queues > store.MaxQueues {
		return store.TopicInfo{}, invalid("topic %q: %d queues, want 1..%d", name, queues, store.MaxQueues)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return store.TopicInfo{}, err
	}
	ti, err := b.w.CreateTopic(ctx, name, queues, ifNotExists)
	if err != nil {
		return store.TopicInfo{}, b.replicaErr(err)
	}
	return ti, nil
}
