package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/mq"
)

// ConsumeResult is what a push consumer's handler answers for a batch.
type ConsumeResult int

const (
	// ConsumeSuccess: every message of the batch is done.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater: the batch failed. A concurrent consumer sends each
	// message back (the group delivers it again after its retry delay, or
	// dead-letters it); an orderly consumer retries the batch in place after
	// SuspendTime, and dead-letters it after MaxReconsumeTimes.
	ConsumeRetryLater
)

func (r ConsumeResult) String() string {
	if r == ConsumeSuccess {
		return "success"
	}
	return "retry-later"
}

// MessageExt is a message as a push consumer's handler sees it. A message of
// the group's retry topic is presented as a message of its original topic.
type MessageExt struct {
	// Topic is the original topic (RETRY_TOPIC for a retried message).
	Topic string
	// ID is the id of the stored message this delivery read (for a retry,
	// the retry copy's; OriginID is the first stored copy's).
	ID         string
	OriginID   string
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
	Timestamp  int64
	// ReconsumeTimes is how often the message was sent back before this
	// delivery (0 on the first). An orderly consumer counts its retries in
	// place here too.
	ReconsumeTimes int32
	// StoredTopic, Queue and Offset are where this delivery was read:
	// %RETRY%<group> for a retried message.
	StoredTopic string
	Queue       int32
	Offset      uint64
	ServedBy    string
}

// Handler consumes a batch of messages (at most BatchSize, all of one
// queue, in queue order).
type Handler func(ctx context.Context, msgs []*MessageExt) ConsumeResult

// PushConfig configures a PushConsumer.
type PushConfig struct {
	Topic   string
	Group   string
	Handler Handler
	// From is where the group starts on a queue of Topic without a
	// committed offset: "earliest" (default) or "latest". The retry topic is
	// always read from its earliest message.
	From     string
	MemberID string // random when empty
	// Concurrency is how many batches are handled at once (default 4); an
	// orderly consumer handles one batch per queue at a time, in order.
	Concurrency int
	// BatchSize is the most messages handed to one handler call (default 1).
	BatchSize int
	// MaxUnfinished bounds the messages of one queue pulled and not yet
	// done (RocketMQ's pullThresholdForQueue, default 1000): the offset
	// committed for a queue never passes its lowest unfinished message.
	MaxUnfinished int
	// Orderly consumes each queue in order: one batch at a time, while
	// holding the queue's lock (LockQueues); a failed batch blocks its
	// queue and is retried in place after SuspendTime.
	Orderly     bool
	SuspendTime time.Duration // default 1 s
	// MaxReconsumeTimes: 0 takes the group's setting (DescribeGroup).
	MaxReconsumeTimes int32
	// RetryDelayLevel is the delay level of a message sent back (RocketMQ's
	// delayLevelWhenNextConsume): 0 lets the broker pick 3 + its reconsume
	// count; 1..18 a fixed level; -1 dead-letters at once.
	RetryDelayLevel int32
	// FollowerReads follows the broker's read suggestion (default true via
	// DefaultPushConfig).
	FollowerReads  bool
	Wait           time.Duration // long-poll wait of one pull (default 1 s)
	CommitInterval time.Duration // default 1 s
	MaxMessages    uint32        // one pull (default 64)
	// Tags or SQL filter Topic on the broker as ConsumerConfig's do; the
	// retry topic is read whole (its messages passed the filter once).
	Tags string
	SQL  string
	// OnError, when set, hears errors the consumer recovers from by itself
	// (a failed join, pull, send-back or commit).
	OnError func(error)
}

// DefaultPushConfig returns the defaults for a topic, group and handler.
func DefaultPushConfig(topic, group string, h Handler) PushConfig {
	return PushConfig{Topic: topic, Group: group, Handler: h, From: "earliest", Concurrency: 4, BatchSize: 1,
		MaxUnfinished: 1000, SuspendTime: time.Second, FollowerReads: true, Wait: time.Second,
		CommitInterval: time.Second, MaxMessages: 64}
}

type qref struct {
	topic string
	queue int32
}

// pushQueue is one assigned queue. Offsets pulled and not yet done are in
// pending (ascending) until done; the commit point is the lowest of them.
type pushQueue struct {
	ref       qref
	next      uint64 // next offset to pull
	pending   []uint64
	done      map[uint64]bool
	committed uint64
	hasCommit bool
	node      string
	stop      chan struct{}
	stopped   chan struct{}
	room      chan struct{} // signalled when a message of the queue is done
	// Orderly: the lock is trusted until lockedUntil.
	lockedUntil time.Time
}

// commitPoint drops done offsets off the front of pending and returns the
// offset the group may resume from.
func (q *pushQueue) commitPointLocked() uint64 {
	for len(q.pending) > 0 && q.done[q.pending[0]] {
		delete(q.done, q.pending[0])
		q.pending = q.pending[1:]
	}
	if len(q.pending) > 0 {
		return q.pending[0]
	}
	return q.next
}

type pushBatch struct {
	q    *pushQueue
	msgs []*MessageExt
}

// PushConsumer consumes a topic and the group's retry topic with a handler
// (RocketMQ's push consumer). Messages are delivered at least once: the
// offset committed for a queue stops at its lowest message not yet done,
// so a consumer that dies has what it held delivered again to the queue's
// next owner.
type PushConsumer struct {
	c   *Client
	cfg PushConfig

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	work     chan pushBatch
	inflight sync.WaitGroup // batches handed to the workers and not done

	mu           sync.Mutex
	queues       map[qref]*pushQueue
	maxReconsume int32
	heartbeat    time.Duration
	lease        time.Duration // orderly: the lock lease the broker answered
	closed       bool
}

// NewPushConsumer starts a push consumer; it joins the group at once and
// runs until Close.
func (c *Client) NewPushConsumer(ctx context.Context, cfg PushConfig) (*PushConsumer, error) {
	d := DefaultPushConfig(cfg.Topic, cfg.Group, cfg.Handler)
	switch {
	case cfg.Topic == "":
		return nil, errors.New("push consumer: topic is required")
	case cfg.Group == "":
		return nil, errors.New("push consumer: group is required")
	case cfg.Handler == nil:
		return nil, errors.New("push consumer: handler is required")
	case cfg.Tags != "" && cfg.SQL != "":
		return nil, errors.New("push consumer: a tag expression and a SQL92 filter cannot both be set")
	case cfg.Concurrency < 0, cfg.BatchSize < 0, cfg.MaxUnfinished < 0:
		return nil, errors.New("push consumer: concurrency, batch size and max unfinished must not be negative")
	case cfg.RetryDelayLevel < -1 || int(cfg.RetryDelayLevel) > len(mq.DelayLevels):
		return nil, fmt.Errorf("push consumer: retry delay level %d: want -1, 0 or 1..%d", cfg.RetryDelayLevel, len(mq.DelayLevels))
	case cfg.MaxReconsumeTimes < 0 || cfg.MaxReconsumeTimes > mq.MaxMaxReconsumeTimes:
		return nil, fmt.Errorf("push consumer: max reconsume times %d: want 0 (the group's) or 1..%d", cfg.MaxReconsumeTimes, mq.MaxMaxReconsumeTimes)
	}
	if cfg.From == "" {
		cfg.From = d.From
	}
	if cfg.From != "earliest" && cfg.From != "latest" {
		return nil, fmt.Errorf("push consumer: from %q: want earliest or latest", cfg.From)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = d.Concurrency
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = d.BatchSize
	}
	if cfg.MaxUnfinished == 0 {
		cfg.MaxUnfinished = d.MaxUnfinished
	}
	if cfg.SuspendTime <= 0 {
		cfg.SuspendTime = d.SuspendTime
	}
	if cfg.Wait <= 0 {
		cfg.Wait = d.Wait
	}
	if cfg.CommitInterval <= 0 {
		cfg.CommitInterval = d.CommitInterval
	}
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = d.MaxMessages
	}
	if cfg.MemberID == "" {
		cfg.MemberID = randomID("p-")
	}
	pc := &PushConsumer{c: c, cfg: cfg, queues: map[qref]*pushQueue{}, heartbeat: time.Second,
		work: make(chan pushBatch), maxReconsume: cfg.MaxReconsumeTimes}
	pc.refreshMaxReconsume(ctx)
	pc.ctx, pc.cancel = context.WithCancel(context.Background())
	if err := pc.join(ctx); err != nil {
		pc.cancel()
		return nil, err
	}
	if !cfg.Orderly {
		for range cfg.Concurrency {
			pc.goFunc(pc.worker)
		}
	}
	pc.goFunc(pc.loop)
	pc.mu.Lock()
	for _, q := range pc.queues {
		pc.startQueueLocked(q)
	}
	pc.mu.Unlock()
	return pc, nil
}

// MemberID is this consumer's id in its group.
func (pc *PushConsumer) MemberID() string { return pc.cfg.MemberID }

// Assigned lists the queues this consumer holds ("topic/queue"), sorted.
func (pc *PushConsumer) Assigned() []string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var out []string
	for r := range pc.queues {
		out = append(out, r.topic+"/"+strconv.Itoa(int(r.queue)))
	}
	sort.Strings(out)
	return out
}

func (pc *PushConsumer) goFunc(f func()) {
	pc.wg.Add(1)
	go func() {
		defer pc.wg.Done()
		f()
	}()
}

func (pc *PushConsumer) report(err error) {
	if err != nil && pc.cfg.OnError != nil && pc.ctx.Err() == nil {
		pc.cfg.OnError(err)
	}
}

// refreshMaxReconsume reads the group's max reconsume times, which an
// orderly consumer applies itself, unless the config fixes it.
func (pc *PushConsumer) refreshMaxReconsume(ctx context.Context) {
	if pc.cfg.MaxReconsumeTimes > 0 {
		return
	}
	n := int32(mq.DefaultMaxReconsume)
	if g, err := pc.c.DescribeGroup(ctx, pc.cfg.Group); err == nil && g.GetSettings() != nil {
		n = g.GetSettings().GetMaxReconsumeTimes()
	} else if err != nil && status.Code(err) != codes.NotFound {
		return // keep what we had
	}
	pc.mu.Lock()
	pc.maxReconsume = n
	pc.mu.Unlock()
}

// loop heartbeats (joins), commits and renews orderly locks.
func (pc *PushConsumer) loop() {
	commit := time.NewTicker(pc.cfg.CommitInterval)
	defer commit.Stop()
	beat := time.NewTimer(pc.heartbeat)
	defer beat.Stop()
	settings := time.NewTicker(30 * time.Second)
	defer settings.Stop()
	for {
		select {
		case <-pc.ctx.Done():
			return
		case <-settings.C:
			if pc.cfg.Orderly {
				ctx, cancel := context.WithTimeout(pc.ctx, 10*time.Second)
				pc.refreshMaxReconsume(ctx)
				cancel()
			}
		case <-commit.C:
			pc.report(pc.commit(pc.ctx))
		case <-beat.C:
			ctx, cancel := context.WithTimeout(pc.ctx, 10*time.Second)
			pc.report(pc.join(ctx))
			cancel()
			pc.mu.Lock()
			if !pc.closed {
				for _, q := range pc.queues {
					if q.stop == nil {
						pc.startQueueLocked(q)
					}
				}
			}
			hb := pc.heartbeat
			pc.mu.Unlock()
			beat.Reset(hb)
		}
	}
}

// join refreshes membership, subscribing Topic and the group's retry
// topic, and adjusts the queues held: revoked queues stop and commit where
// they are; added ones start from the group's committed offset.
func (pc *PushConsumer) join(ctx context.Context) error {
	retry := mq.RetryTopic(pc.cfg.Group)
	r, err := call(ctx, pc.c, func(ctx context.Context, cl api.BrokerClient) (*api.JoinGroupResponse, error) {
		return cl.JoinGroup(ctx, &api.JoinGroupRequest{Group: pc.cfg.Group, MemberId: pc.cfg.MemberID, Topics: []string{pc.cfg.Topic, retry}})
	})
	if err != nil {
		return fmt.Errorf("join group %s: %w", pc.cfg.Group, err)
	}
	want := map[qref]bool{}
	for _, a := range r.Assignments {
		for _, q := range a.Queues {
			want[qref{a.Topic, q}] = true
		}
	}
	pc.mu.Lock()
	if r.HeartbeatIntervalMs > 0 {
		pc.heartbeat = time.Duration(r.HeartbeatIntervalMs) * time.Millisecond
	}
	var revoked []*pushQueue
	for ref, q := range pc.queues {
		if !want[ref] {
			revoked = append(revoked, q)
			delete(pc.queues, ref)
		}
	}
	var added []qref
	for ref := range want {
		if pc.queues[ref] == nil {
			added = append(added, ref)
		}
	}
	pc.mu.Unlock()
	for _, q := range revoked {
		pc.release(ctx, q)
	}
	if len(added) == 0 {
		return nil
	}
	starts := map[string]map[int32]uint64{}
	for _, ref := range added {
		if starts[ref.topic] == nil {
			offs, err := pc.c.FetchOffsets(ctx, pc.cfg.Group, ref.topic)
			if err != nil {
				return fmt.Errorf("fetch offsets of %s: %w", ref.topic, err)
			}
			starts[ref.topic] = offs
		}
	}
	topics := map[string]*api.TopicInfo{}
	for _, ref := range added {
		q := &pushQueue{ref: ref, done: map[uint64]bool{}, room: make(chan struct{}, 1)}
		if o, ok := starts[ref.topic][ref.queue]; ok {
			q.next, q.committed, q.hasCommit = o, o, true
		} else {
			ti := topics[ref.topic]
			if ti == nil {
				if ti, err = pc.c.DescribeTopic(ctx, ref.topic); err != nil {
					return fmt.Errorf("describe topic %s: %w", ref.topic, err)
				}
				topics[ref.topic] = ti
			}
			if int(ref.queue) >= len(ti.QueueInfo) {
				continue
			}
			q.next = ti.QueueInfo[ref.queue].MinOffset
			if pc.cfg.From == "latest" && ref.topic == pc.cfg.Topic {
				q.next = ti.QueueInfo[ref.queue].MaxOffset
			}
		}
		pc.mu.Lock()
		if pc.queues[ref] == nil && !pc.closed {
			pc.queues[ref] = q
		}
		pc.mu.Unlock()
	}
	return nil
}

// release stops a queue that left this consumer and commits its commit
// point; messages still being handled are delivered again to the next
// owner.
func (pc *PushConsumer) release(ctx context.Context, q *pushQueue) {
	pc.mu.Lock()
	stop, stopped := q.stop, q.stopped
	pc.mu.Unlock()
	if stop != nil {
		close(stop)
		<-stopped // an orderly queue finishes its batch first
	}
	pc.mu.Lock()
	point := q.commitPointLocked()
	need := point > q.committed || !q.hasCommit
	pc.mu.Unlock()
	if need {
		pc.report(pc.c.CommitOffsets(ctx, pc.cfg.Group, []*api.QueueOffset{{Topic: q.ref.topic, Queue: q.ref.queue, Offset: point}}))
	}
	if pc.cfg.Orderly {
		pc.report(pc.c.UnlockQueues(ctx, pc.cfg.Group, pc.cfg.MemberID, []*api.QueueRef{{Topic: q.ref.topic, Queue: q.ref.queue}}))
	}
}

func (pc *PushConsumer) startQueueLocked(q *pushQueue) {
	q.stop, q.stopped = make(chan struct{}), make(chan struct{})
	stop, stopped := q.stop, q.stopped
	pc.wg.Add(1)
	go func() {
		defer pc.wg.Done()
		defer close(stopped)
		pc.runQueue(q, stop)
	}()
}

// runQueue pulls one queue and hands its messages on: to the workers, or,
// orderly, to the handler one batch at a time.
func (pc *PushConsumer) runQueue(q *pushQueue, stop chan struct{}) {
	ctx, cancel := context.WithCancel(pc.ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		if pc.cfg.Orderly && !pc.holdLock(ctx, q) {
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		pc.mu.Lock()
		full := len(q.pending) >= pc.cfg.MaxUnfinished
		pc.mu.Unlock()
		if full {
			select {
			case <-q.room:
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		msgs, err := pc.pull(ctx, q)
		if err != nil {
			if ctx.Err() != nil {
				return // stopped
			}
			pc.report(fmt.Errorf("pull %s/%d: %w", q.ref.topic, q.ref.queue, err))
			sleepCtx(ctx, backoff)
			backoff = min(backoff*2, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		for i := 0; i < len(msgs); i += pc.cfg.BatchSize {
			b := pushBatch{q: q, msgs: msgs[i:min(i+pc.cfg.BatchSize, len(msgs))]}
			if pc.cfg.Orderly {
				if !pc.consumeOrderly(ctx, b) {
					if ctx.Err() != nil {
						return // stopped: the batch is pending, the next owner gets it
					}
					// The lock was lost: read again from this batch once
					// the lock is back.
					pc.rewind(q, b.msgs[0].Offset)
					break
				}
				continue
			}
			pc.inflight.Add(1)
			select {
			case pc.work <- b:
			case <-ctx.Done():
				pc.inflight.Done()
				return // not handed on: pending, so delivered again
			}
		}
	}
}

// pull reads the next messages of q and records them as pending.
func (pc *PushConsumer) pull(ctx context.Context, q *pushQueue) ([]*MessageExt, error) {
	pc.mu.Lock()
	offset, node := q.next, q.node
	pc.mu.Unlock()
	if !pc.cfg.FollowerReads {
		node = ""
	}
	req := &api.PullRequest{Topic: q.ref.topic, Queue: q.ref.queue, Offset: offset, MaxMessages: pc.cfg.MaxMessages,
		WaitMs: uint32(pc.cfg.Wait.Milliseconds()), ConsumerId: pc.cfg.MemberID}
	if q.ref.topic == pc.cfg.Topic {
		req.FilterType, req.Filter = FilterTag, pc.cfg.Tags
		if pc.cfg.SQL != "" {
			req.FilterType, req.Filter = FilterSQL, pc.cfg.SQL
		}
	}
	r, err := pc.pullAt(ctx, node, req)
	if err != nil && node != "" && Retryable(err) && ctx.Err() == nil {
		r, err = pc.pullAt(ctx, "", req) // any error: fall back to the leader
	}
	if err != nil {
		pc.mu.Lock()
		q.node = ""
		pc.mu.Unlock()
		return nil, err
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	q.node = ""
	if sg := r.Suggestion; sg != nil && sg.Address != "" && pc.cfg.FollowerReads {
		q.node = sg.Address
	}
	if q.next != offset {
		return nil, nil
	}
	switch r.Status {
	case api.PullStatus_PULL_STATUS_OFFSET_MOVED:
		q.next = r.NextOffset
		return nil, nil
	case api.PullStatus_PULL_STATUS_FOUND:
	default:
		return nil, nil
	}
	out := make([]*MessageExt, 0, len(r.Messages))
	for _, m := range r.Messages {
		out = append(out, pc.present(m, r.ServedBy))
		q.pending = append(q.pending, m.Offset)
	}
	q.next = r.NextOffset
	return out, nil
}

func (pc *PushConsumer) pullAt(ctx context.Context, node string, req *api.PullRequest) (*api.PullResponse, error) {
	if node == "" {
		var r *api.PullResponse
		err := pc.c.doSized(ctx, 0, pc.cfg.Wait, func(ctx context.Context, cl api.BrokerClient) error {
			var err error
			r, err = cl.Pull(ctx, req)
			return err
		})
		return r, err
	}
	cl, err := pc.c.conn(node)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, pc.c.attemptTimeout(0, pc.cfg.Wait))
	defer cancel()
	return cl.Pull(actx, req)
}

// present turns a pulled message into what the handler sees.
func (pc *PushConsumer) present(m *api.Message, servedBy string) *MessageExt {
	e := &MessageExt{Topic: m.Topic, ID: m.Id, OriginID: m.Id, Key: m.Key, Tag: m.Tag, Properties: m.Properties,
		Body: m.Body, Timestamp: m.TimestampMs, StoredTopic: m.Topic, Queue: m.Queue, Offset: m.Offset, ServedBy: servedBy}
	if mq.IsRetryTopic(m.Topic) {
		if t := m.Properties[mq.PropRetryTopic]; t != "" {
			e.Topic = t
		}
		if o := m.Properties[mq.PropOriginMessageID]; o != "" {
			e.OriginID = o
		}
		if n, err := strconv.ParseInt(m.Properties[mq.PropReconsumeTime], 10, 32); err == nil && n > 0 {
			e.ReconsumeTimes = int32(n)
		}
	}
	return e
}

// handle runs the handler; a panic counts as retry-later.
func (pc *PushConsumer) handle(ctx context.Context, msgs []*MessageExt) (res ConsumeResult) {
	defer func() {
		if p := recover(); p != nil {
			pc.report(fmt.Errorf("handler panicked: %v", p))
			res = ConsumeRetryLater
		}
	}()
	return pc.cfg.Handler(ctx, msgs)
}

// worker handles batches of a concurrent consumer.
func (pc *PushConsumer) worker() {
	for {
		select {
		case b := <-pc.work:
			pc.consume(b)
			pc.inflight.Done()
		case <-pc.ctx.Done():
			return
		}
	}
}

// consume handles one batch and marks its messages done: at once on
// success; on retry-later once each is sent back. A message whose send-back
// fails is handled again here after a second (RocketMQ's client consumes
// it again locally), with its count raised, until it succeeds or is sent
// back.
func (pc *PushConsumer) consume(b pushBatch) {
	msgs := b.msgs
	for len(msgs) > 0 {
		if pc.handle(pc.ctx, msgs) == ConsumeSuccess {
			pc.finish(b.q, msgs)
			return
		}
		var failed []*MessageExt
		for _, m := range msgs {
			ctx, cancel := context.WithTimeout(pc.ctx, 30*time.Second)
			_, err := pc.c.SendBack(ctx, pc.cfg.Group, m.ID, pc.cfg.RetryDelayLevel, pc.cfg.MaxReconsumeTimes)
			cancel()
			if err != nil {
				pc.report(fmt.Errorf("send back %s: %w", m.ID, err))
				m.ReconsumeTimes++
				failed = append(failed, m)
				continue
			}
			pc.finish(b.q, []*MessageExt{m})
		}
		msgs = failed
		if len(msgs) > 0 && !sleepCtx(pc.ctx, time.Second) {
			return
		}
	}
}

// consumeOrderly handles one batch of an orderly queue in place: a failed
// batch is retried after SuspendTime, and after the max reconsume times its
// messages go to the dead-letter topic. It returns false when the queue was
// stopped before the batch was done.
func (pc *PushConsumer) consumeOrderly(ctx context.Context, b pushBatch) bool {
	for attempt := int32(0); ; attempt++ {
		for _, m := range b.msgs {
			m.ReconsumeTimes = attempt
		}
		if ctx.Err() != nil || !pc.holdLock(ctx, b.q) {
			return false
		}
		// The handler gets the consumer's context, not the queue's: a
		// queue that is revoked lets its batch finish.
		if pc.handle(pc.ctx, b.msgs) == ConsumeSuccess {
			pc.finish(b.q, b.msgs)
			return true
		}
		pc.mu.Lock()
		max := pc.maxReconsume
		pc.mu.Unlock()
		if attempt >= max {
			for _, m := range b.msgs {
				for {
					sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
					_, err := pc.c.SendBack(sctx, pc.cfg.Group, m.ID, -1, 0)
					cancel()
					if err == nil {
						break
					}
					pc.report(fmt.Errorf("dead-letter %s: %w", m.ID, err))
					if !sleepCtx(ctx, time.Second) {
						return false
					}
				}
			}
			pc.finish(b.q, b.msgs)
			return true
		}
		if !sleepCtx(ctx, pc.cfg.SuspendTime) {
			return false
		}
	}
}

// holdLock reports whether this member holds q's lock now, taking or
// renewing it when a third of the lease has passed since the last renewal.
func (pc *PushConsumer) holdLock(ctx context.Context, q *pushQueue) bool {
	pc.mu.Lock()
	until := q.lockedUntil
	pc.mu.Unlock()
	now := time.Now()
	if now.Before(until) && until.Sub(now) > pc.lockRenewAt() {
		return true
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sent := time.Now()
	r, err := pc.c.LockQueues(lctx, pc.cfg.Group, pc.cfg.MemberID, []*api.QueueRef{{Topic: q.ref.topic, Queue: q.ref.queue}})
	if err != nil {
		pc.report(fmt.Errorf("lock %s/%d: %w", q.ref.topic, q.ref.queue, err))
		return time.Now().Before(until)
	}
	held := false
	for _, l := range r.Locked {
		if l.Topic == q.ref.topic && l.Queue == q.ref.queue {
			held = true
		}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if held {
		// Trusted for half the lease from when the request was sent:
		// the other half covers the difference between the clocks of
		// the leaders that grant and judge the lock (store/locks.go).
		q.lockedUntil = sent.Add(time.Duration(r.LeaseMs) * time.Millisecond / 2)
		pc.lease = time.Duration(r.LeaseMs) * time.Millisecond
	} else {
		q.lockedUntil = time.Time{}
	}
	return held
}

func (pc *PushConsumer) lockRenewAt() time.Duration {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.lease == 0 {
		return time.Hour // renew at once
	}
	return pc.lease / 3
}

// rewind makes q read again from offset: what was pulled from there on
// is no longer pending.
func (pc *PushConsumer) rewind(q *pushQueue, offset uint64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	keep := q.pending[:0]
	for _, o := range q.pending {
		if o < offset {
			keep = append(keep, o)
		} else {
			delete(q.done, o)
		}
	}
	q.pending = keep
	q.next = min(q.next, offset)
}

// finish marks messages of q done.
func (pc *PushConsumer) finish(q *pushQueue, msgs []*MessageExt) {
	pc.mu.Lock()
	for _, m := range msgs {
		q.done[m.Offset] = true
	}
	q.commitPointLocked()
	pc.mu.Unlock()
	select {
	case q.room <- struct{}{}:
	default:
	}
}

// commit commits every held queue's commit point that moved.
func (pc *PushConsumer) commit(ctx context.Context) error {
	pc.mu.Lock()
	var offs []*api.QueueOffset
	byTopic := map[string][]*api.QueueOffset{}
	for _, q := range pc.queues {
		p := q.commitPointLocked()
		if p > q.committed || (!q.hasCommit && p > 0) {
			o := &api.QueueOffset{Topic: q.ref.topic, Queue: q.ref.queue, Offset: p}
			offs = append(offs, o)
			byTopic[q.ref.topic] = append(byTopic[q.ref.topic], o)
		}
	}
	pc.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	if err := pc.c.CommitOffsets(ctx, pc.cfg.Group, offs); err != nil {
		return fmt.Errorf("commit offsets: %w", err)
	}
	pc.mu.Lock()
	for _, o := range offs {
		if q := pc.queues[qref{o.Topic, o.Queue}]; q != nil && o.Offset > q.committed {
			q.committed, q.hasCommit = o.Offset, true
		}
	}
	pc.mu.Unlock()
	return nil
}

// Close stops pulling, lets the handlers finish the batches they hold
// (until ctx ends), commits what is done and leaves the group so its queues
// move at once. Messages not done are delivered again to their next owner.
func (pc *PushConsumer) Close(ctx context.Context) error {
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return nil
	}
	pc.closed = true
	var stops []chan struct{}
	var stoppeds []chan struct{}
	for _, q := range pc.queues {
		if q.stop != nil {
			stops = append(stops, q.stop)
			stoppeds = append(stoppeds, q.stopped)
		}
	}
	pc.mu.Unlock()
	for _, s := range stops {
		close(s)
	}
	for _, s := range stoppeds {
		select {
		case <-s:
		case <-ctx.Done():
		}
	}
	idle := make(chan struct{})
	go func() {
		pc.inflight.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-ctx.Done():
	}
	pc.cancel()
	<-idle // the workers end their batches once pc.ctx is cancelled
	pc.wg.Wait()
	err := pc.commit(ctx)
	if pc.cfg.Orderly {
		var refs []*api.QueueRef
		pc.mu.Lock()
		for r := range pc.queues {
			refs = append(refs, &api.QueueRef{Topic: r.topic, Queue: r.queue})
		}
		pc.mu.Unlock()
		if len(refs) > 0 {
			if uerr := pc.c.UnlockQueues(ctx, pc.cfg.Group, pc.cfg.MemberID, refs); err == nil {
				err = uerr
			}
		}
	}
	_, lerr := call(ctx, pc.c, func(ctx context.Context, cl api.BrokerClient) (*api.LeaveGroupResponse, error) {
		return cl.LeaveGroup(ctx, &api.LeaveGroupRequest{Group: pc.cfg.Group, MemberId: pc.cfg.MemberID})
	})
	if err == nil {
		err = lerr
	}
	return err
}

// Kill stops the consumer at once without committing or leaving the group,
// as a crashed process would (tests use it).
func (pc *PushConsumer) Kill() {
	pc.mu.Lock()
	pc.closed = true
	pc.mu.Unlock()
	pc.cancel()
	pc.wg.Wait()
}

// sleepCtx sleeps d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
