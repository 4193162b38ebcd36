package broker

import (
	"errors"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/broker/route"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// The scheduler runs on the ready leader only: it delivers the staged
// messages whose time has come out of the schedule queues (delay.go,
// store/schedule.go).
//
// Each round it reads, per schedule queue, the messages from the queue's
// delivered cursor on while they are due, and hands them to the batcher as
// produce requests from the queue's reserved producer id, with sequence the
// schedule offset of the first message: into their real topic and queue,
// or (a timed message not due yet) into a lower schedule queue. The state
// machine applies such a request only when its sequence is the cursor, so
// a delivery that a deposed or restarted leader repeats is a no-op. It then
// sleeps until the earliest head of a queue is due, or the state machine
// applies something (a new message may be due sooner), at most a second.

// MaxMaxDelay is the largest --max-delay: what the schedule queues hold.
const MaxMaxDelay = 365 * 24 * time.Hour

const (
	deliverBatchMessages = 1024
	deliverBatchBytes    = 1 << 20
	scheduleIdle         = time.Second
	scheduleRetry        = 100 * time.Millisecond
	// scheduleSpacing is the least time between two rounds woken by applies.
	scheduleSpacing = 2 * time.Millisecond
)

// scheduler is the running scheduler's stop channel (nil when stopped) and
// its counters.
type scheduler struct {
	mu         sync.Mutex
	stop       chan struct{}
	handOverAt time.Time          // last scheduleHandOver attempt
	delivered  prometheus.Counter // messages delivered into their topics
	restaged   prometheus.Counter // timed messages moved to a lower schedule queue
}

// registerDelayMetrics adds the scheduler's figures to /metrics.
func (b *Broker) registerDelayMetrics() {
	b.scheduler.delivered = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_delayed_delivered_total",
		Help: "Delayed messages this node delivered into their topics as leader."})
	b.scheduler.restaged = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_delayed_restaged_total",
		Help: "Timed messages this node moved to a lower schedule queue as leader (write amplification)."})
	waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_delayed_waiting",
		Help: "Messages in the schedule queues (delayed messages not delivered yet; a restaged timed message counts once per copy waiting)."},
		func() float64 {
			if b.sched == nil {
				return 0
			}
			ti, err := b.fsm.Topic(mq.ScheduleTopic)
			if err != nil {
				return 0
			}
			c := b.sched.ScheduleCursors()
			var n uint64
			for q, r := range ti.Queues {
				if q < len(c) && r.Max > c[q] {
					n += r.Max - c[q]
				}
			}
			return float64(n)
		})
	b.m.reg.MustRegister(b.scheduler.delivered, b.scheduler.restaged, waiting)
}

// scheduleOnRoleChange starts the scheduler on a leader once it is ready
// and stops it on any other role. It does not block (it runs on raft's
// observer goroutine).
func (b *Broker) scheduleOnRoleChange(ev election.Event) {
	if b.sched == nil {
		return
	}
	b.scheduler.mu.Lock()
	defer b.scheduler.mu.Unlock()
	if b.scheduler.stop != nil && (ev.Role != election.Leader || ev.Ready) {
		close(b.scheduler.stop)
		b.scheduler.stop = nil
	}
	if ev.Role == election.Leader && ev.Ready && !b.closed.Load() {
		stop := make(chan struct{})
		b.scheduler.stop = stop
		b.goFunc(func() { b.scheduleLoop(stop) })
	}
}

// head is the time the first waiting message of a queue is due.
type head struct {
	offset uint64
	due    time.Time
}

func (b *Broker) scheduleLoop(stop <-chan struct{}) {
	b.log.Info("scheduler started")
	defer b.log.Info("scheduler stopped")
	heads := map[uint32]head{}
	var lastRound time.Time
	var first uint32 // the queue a round starts with turns, so that none waits behind the others
	for {
		select {
		case <-stop:
			return
		case <-b.stop:
			return
		default:
		}
		changed := b.fsm.Changed()
		now := time.Now()
		lastRound = now
		first = (first + 1) % store.ScheduleQueues
		next, err := b.scheduleRound(stop, heads, first, now)
		wait := scheduleIdle
		switch {
		case err != nil:
			if !errors.Is(err, ErrShutdown) {
				b.log.Warn("scheduler: delivery failed, retrying", "error", err)
			}
			wait = scheduleRetry
		case !next.IsZero():
			wait = min(wait, time.Until(next))
		}
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
			// Applies come fast under load: space the rounds they wake.
			if d := scheduleSpacing - time.Since(lastRound); d > 0 {
				time.Sleep(d)
			}
		case <-stop:
		case <-b.stop:
		}
		t.Stop()
	}
}

// scheduleRound delivers what is due now out of every schedule queue and
// returns when to look again: the earliest due time of a waiting head
// (now when it delivered: more may be due), zero when nothing waits.
func (b *Broker) scheduleRound(stop <-chan struct{}, heads map[uint32]head, first uint32, now time.Time) (time.Time, error) {
	if !b.node.Ready() {
		return now.Add(scheduleRetry), nil // stopping: a role change is on its way
	}
	ti, err := b.fsm.Topic(mq.ScheduleTopic)
	if err != nil {
		return time.Time{}, nil // nothing was ever delayed
	}
	if b.pending.held() > b.cfg.MaxPendingBytes/2 {
		// Producers fill the pipeline: deliveries wait a little rather
		// than take their room.
		return now.Add(10 * time.Millisecond), nil
	}
	// A round hands over at most a quarter of the produce budget, so that
	// producers are not refused (ErrBusy) for deliveries.
	budget := b.cfg.MaxPendingBytes / 4
	cursors := b.sched.ScheduleCursors()
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	var sent []*pending
	for i := uint32(0); i < store.ScheduleQueues && budget > 0; i++ {
		q := (first + i) % store.ScheduleQueues
		if int(q) >= len(ti.Queues) {
			continue
		}
		c := cursors[q]
		if c >= ti.Queues[q].Max {
			delete(heads, q)
			continue
		}
		if h, ok := heads[q]; ok && h.offset == c && h.due.After(now) {
			earliest(h.due)
			continue
		}
		reqs, due, err := b.dueRequests(q, c, now)
		if err != nil {
			b.log.Warn("scheduler: cannot read schedule queue", "queue", q, "offset", c, "error", err)
			var nh *notHeldError
			if errors.As(err, &nh) {
				b.scheduleHandOver(nh.index)
			}
			earliest(now.Add(scheduleRetry))
			continue
		}
		if len(reqs) == 0 {
			heads[q] = head{offset: c, due: due}
			earliest(due)
			continue
		}
		earliest(now)
		for _, r := range reqs {
			p, err := b.submit(stop, r)
			if err != nil {
				return time.Time{}, b.awaitAll(sent, err)
			}
			sent = append(sent, p)
			budget -= p.size
		}
	}
	return next, b.awaitAll(sent, nil)
}

// awaitAll waits for the submitted deliveries and returns the first error
// (or first): a stale delivery is no error, someone delivered first.
func (b *Broker) awaitAll(sent []*pending, first error) error {
	for _, p := range sent {
		out := <-p.done
		b.pending.give(p.size)
		switch {
		case out.err != nil:
			first = cmpErr(first, out.err)
		case out.res.Err != nil && !errors.Is(out.res.Err, store.ErrScheduleStale):
			// Stored nowhere (its topic is gone): the cursor moved on.
			b.log.Warn("scheduler: delivery dropped", "topic", p.req.Topic, "messages", len(p.req.Messages), "error", out.res.Err)
		case out.res.Err != nil:
		case p.req.Topic == mq.ScheduleTopic:
			b.scheduler.restaged.Add(float64(len(p.req.Messages)))
		default:
			b.scheduler.delivered.Add(float64(len(p.req.Messages)))
		}
	}
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// submit hands one delivery to the batcher, the path every stored message
// takes. It counts in the pending bytes but is never refused by them.
func (b *Broker) submit(stop <-chan struct{}, req raftlog.Request) (*pending, error) {
	p := &pending{req: req, done: make(chan outcome, 1)}
	p.size = p.req.EncodedSize()
	b.pending.take(p.size, math.MaxInt)
	select {
	case b.produceCh <- p:
		return p, nil
	case <-stop:
	case <-b.stop:
	}
	b.pending.give(p.size)
	return nil, ErrShutdown
}

// dueRequests reads schedule queue q from offset c and builds the
// deliveries of its due prefix, at most deliverBatchMessages messages.
// When nothing is due it returns when the head is.
func (b *Broker) dueRequests(q uint32, c uint64, now time.Time) ([]raftlog.Request, time.Time, error) {
	locs, _, err := b.fsm.Locate(mq.ScheduleTopic, int32(q), c, 64)
	if err != nil {
		return nil, time.Time{}, b.replicaErr(err)
	}
	pr := PullRequest{Topic: mq.ScheduleTopic, Queue: int32(q), Offset: c, MaxMessages: deliverBatchMessages, MaxBytes: deliverBatchBytes}
	res := PullResult{NextOffset: c}
	local, why, err := b.read(locs, &pr, &res)
	if err != nil {
		return nil, time.Time{}, err
	}
	if local == route.LocalNotHeld && len(locs) > 0 {
		return nil, time.Time{}, &notHeldError{index: locs[0].LogIndex, why: why}
	}
	if local != route.LocalServed {
		return nil, time.Time{}, errors.New(why)
	}
	appended := map[uint64]time.Time{}
	appendedAt := func(id string) time.Time {
		idx, err := raftlog.MessageIndex(id)
		if err != nil {
			return time.Time{}
		}
		t, ok := appended[idx]
		if !ok {
			t, _ = b.rlog.AppendedAt(idx)
			appended[idx] = t
		}
		return t
	}
	var reqs []raftlog.Request
	var cur *raftlog.Request
	size := 0
	for i := range res.Messages {
		m := &res.Messages[i]
		if m.Offset != c+uint64(i) {
			break // never: the reader returns the queue's offsets in order
		}
		due := dueTime(q, m, appendedAt)
		if due.After(now) {
			if len(reqs) == 0 {
				return nil, due, nil
			}
			break
		}
		topic, lm := b.nextStage(q, m, due, now)
		ms := lm.EncodedSize()
		if cur == nil || cur.Topic != topic || size+ms > deliverBatchBytes {
			reqs = append(reqs, raftlog.Request{ProducerID: store.ScheduleProducer(q), Seq: m.Offset, Topic: topic})
			cur, size = &reqs[len(reqs)-1], 0
		}
		cur.Messages = append(cur.Messages, lm)
		size += ms
	}
	return reqs, time.Time{}, nil
}

// dueTime is when message m leaves schedule queue q: a delay level counts
// from its entry's append time; a timed message as produced leaves at
// once; a restaged one when its SCHEDULE_POP_MS says.
func dueTime(q uint32, m *Message, appendedAt func(string) time.Time) time.Time {
	switch {
	case q < store.ScheduleLevels:
		return appendedAt(m.ID).Add(mq.DelayLevels[q])
	case q == store.ScheduleIntakeQueue:
		return appendedAt(m.ID)
	}
	ms, err := strconv.ParseInt(m.Properties[mq.PropSchedulePopMS], 10, 64)
	if err != nil {
		return time.Time{} // written by the broker: never; deliver rather than hold it
	}
	return time.UnixMilli(ms)
}

// nextStage is where message m of schedule queue q goes once due (at
// due): its real topic, or for a timed message whose time is still ahead
// the schedule queue of the largest wait ScheduleUnit<<j that does not pass
// its time, counted from due (not now, so a late round does not make every
// later stage late), or the final queue for the last part shorter than
// ScheduleUnit. The stages of one message are the set bits of its wait in
// units, plus the final part: the write amplification of a timed message.
func (b *Broker) nextStage(q uint32, m *Message, due, now time.Time) (string, raftlog.Message) {
	props := make(map[string]string, len(m.Properties)+1)
	for k, v := range m.Properties {
		props[k] = v
	}
	if q < store.ScheduleLevels || q == store.ScheduleIntakeQueue {
		props[mq.PropStagedID] = m.ID // the first stage: the id the ack named
	}
	lm := raftlog.Message{Timestamp: m.Timestamp, Key: m.Key, Tag: m.Tag, Body: m.Body, Properties: props}
	if due.IsZero() { // the entry's append time is unknown here
		due = now
	}
	if q >= store.ScheduleIntakeQueue && q != store.ScheduleFinalQueue {
		at, err := strconv.ParseInt(props[mq.PropTimerDeliverMS], 10, 64)
		if err == nil && time.UnixMilli(at).After(now) {
			wait := time.UnixMilli(at).Sub(due)
			if wait < store.ScheduleUnit {
				lm.Queue = store.ScheduleFinalQueue
				props[mq.PropSchedulePopMS] = strconv.FormatInt(at, 10)
			} else {
				j := min(bits.Len64(uint64(wait/store.ScheduleUnit))-1, store.ScheduleCascadeCount-1)
				lm.Queue = store.ScheduleCascadeQueue(j)
				props[mq.PropSchedulePopMS] = strconv.FormatInt(due.Add(store.ScheduleUnit<<j).UnixMilli(), 10)
			}
			return mq.ScheduleTopic, lm
		}
	}
	topic := props[mq.PropRealTopic]
	qid, _ := strconv.Atoi(props[mq.PropRealQueue])
	if n := b.fsm.QueueCount(topic); n > 0 && qid >= 0 {
		qid %= n
	}
	lm.Queue = uint32(max(qid, 0))
	for _, k := range []string{mq.PropDelay, mq.PropTimerDeliverMS, mq.PropRealTopic, mq.PropRealQueue, mq.PropSchedulePopMS} {
		delete(props, k)
	}
	return topic, lm
}

// notHeldError: this node lacks the body of a waiting message (it installed
// a snapshot past it), so it cannot deliver it.
type notHeldError struct {
	index uint64
	why   string
}

func (e *notHeldError) Error() string { return e.why }

// scheduleHandOverEvery spaces the hand-over attempts of scheduleHandOver.
const scheduleHandOverEvery = 10 * time.Second

// scheduleHandOver hands leadership to a healthy voter that holds log entry
// index, when this leader cannot read a waiting message there: the other
// node delivers it. With no such voter it does nothing (the messages wait).
func (b *Broker) scheduleHandOver(index uint64) {
	b.scheduler.mu.Lock()
	if time.Since(b.scheduler.handOverAt) < scheduleHandOverEvery {
		b.scheduler.mu.Unlock()
		return
	}
	b.scheduler.handOverAt = time.Now()
	b.scheduler.mu.Unlock()
	to := b.holderVoter(index)
	if to == "" {
		b.log.Warn("scheduler: no healthy voter holds the entry of a waiting delayed message", "index", index)
		return
	}
	if err := b.node.Transfer(to); err != nil {
		b.log.Warn("scheduler: handing leadership to a node that holds waiting delayed messages failed", "to", to, "index", index, "error", err)
		return
	}
	b.log.Info("scheduler: handed leadership to a node that holds waiting delayed messages", "to", to, "index", index)
}

// holderVoter is the voter (not this node) that answered recently, is not
// damaged, holds the bodies of log entry index and has applied the most
// ("" when none).
func (b *Broker) holderVoter(index uint64) string {
	servers, err := b.node.Servers()
	if err != nil {
		return ""
	}
	best, applied := "", uint64(0)
	for _, s := range servers {
		if !s.Voter || s.ID == b.cfg.NodeID {
			continue
		}
		p, ok := b.view.Get(s.ID)
		if !ok || time.Since(p.LastOK) > b.fresh() || p.State.Damaged || p.State.First == 0 || p.State.First > index || p.State.Applied < index {
			continue
		}
		if best == "" || p.State.Applied > applied {
			best, applied = s.ID, p.State.Applied
		}
	}
	return best
}
