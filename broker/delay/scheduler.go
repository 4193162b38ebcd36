package delay

import (
	"errors"
	"math/bits"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/broker/brokererr"
	"github.com/raftmq/raftmq/broker/entry"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// The scheduler runs on the ready leader only: it delivers the staged
// messages whose time has come out of the schedule queues (Stage,
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

const (
	deliverBatchMessages = 1024
	deliverBatchBytes    = 1 << 20
	scheduleIdle         = time.Second
	scheduleRetry        = 100 * time.Millisecond
	// scheduleSpacing is the least time between two rounds woken by applies.
	scheduleSpacing = 2 * time.Millisecond
)

// State is what the scheduler and lookups read of the applied state.
type State interface {
	Changed() <-chan struct{}
	Locate(topic string, q int32, offset uint64, limit int) ([]store.Location, store.QueueRange, error)
	Topic(name string) (store.TopicInfo, error)
	QueueCount(topic string) int
}

// Cursors is the schedule queues' replicated state. *store.Store implements
// it.
type Cursors interface {
	ScheduleCursors() [store.ScheduleQueues]uint64
	ScheduleFloor() uint64
}

// Log gives the append time of a log entry: a delay level counts from it.
type Log interface {
	AppendedAt(index uint64) (time.Time, error)
}

// NotServedError is what Hooks.Read answers when this node cannot serve
// the entries it was given: Why says why; NotHeld, that it no longer holds
// the body of log entry Index (it installed a snapshot past it), so that
// another node must deliver it.
type NotServedError struct {
	Why     string
	NotHeld bool
	Index   uint64
}

func (e *NotServedError) Error() string { return e.Why }

// Hooks are the broker's parts the scheduler uses.
type Hooks struct {
	// Ready reports whether this node is still a ready leader.
	Ready func() bool
	// Busy reports whether producers fill the pipeline: deliveries wait.
	Busy func() bool
	// Read reads the stored messages of queue q of topic from offset out of
	// the entries locs, at most maxMessages and maxBytes, as a pull does;
	// next is the offset after the last one read. An entry it cannot serve
	// is a *NotServedError.
	Read func(topic string, q int32, offset uint64, locs []store.Location, maxMessages, maxBytes int) (msgs []entry.Message, next uint64, err error)
	// Submit hands one delivery to the batcher, the path every stored
	// message takes (brokererr.ErrShutdown once stop or the broker closes).
	// wait blocks until it is applied and returns the state machine's
	// answer for the request (refused) or the write's error (err).
	Submit func(stop <-chan struct{}, req raftlog.Request) (size int, wait func() (refused, err error), err error)
	// ReplicaErr maps an error of the state to the broker's.
	ReplicaErr func(error) error
}

// Scheduler delivers due delayed messages on the ready leader (Run) and
// answers lookups of staged messages (Staged).
type Scheduler struct {
	log     hclog.Logger
	fsm     State
	cursors Cursors // nil: this replica keeps no schedule state
	rlog    Log
	hooks   Hooks
	budget  int // bytes a round may hand to the batcher

	delivered prometheus.Counter // messages delivered into their topics
	restaged  prometheus.Counter // timed messages moved to a lower schedule queue
}

// New returns a scheduler. budget bounds the bytes of one round's
// deliveries (a share of the produce budget, so that producers are not
// refused for deliveries).
func New(logger hclog.Logger, fsm State, cursors Cursors, rlog Log, budget int, hooks Hooks) *Scheduler {
	return &Scheduler{log: logger, fsm: fsm, cursors: cursors, rlog: rlog, hooks: hooks, budget: budget,
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_delayed_delivered_total",
			Help: "Delayed messages this node delivered into their topics as leader."}),
		restaged: prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_delayed_restaged_total",
			Help: "Timed messages this node moved to a lower schedule queue as leader (write amplification)."}),
	}
}

// Collectors are the scheduler's figures for /metrics.
func (s *Scheduler) Collectors() []prometheus.Collector {
	waiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_delayed_waiting",
		Help: "Messages in the schedule queues (delayed messages not delivered yet; a restaged timed message counts once per copy waiting)."},
		func() float64 {
			if s.cursors == nil {
				return 0
			}
			ti, err := s.fsm.Topic(mq.ScheduleTopic)
			if err != nil {
				return 0
			}
			c := s.cursors.ScheduleCursors()
			var n uint64
			for q, r := range ti.Queues {
				if q < len(c) && r.Max > c[q] {
					n += r.Max - c[q]
				}
			}
			return float64(n)
		})
	return []prometheus.Collector{s.delivered, s.restaged, waiting}
}

// head is the time the first waiting message of a queue is due.
type head struct {
	offset uint64
	due    time.Time
}

// Run delivers until stop (this term's) or done (the broker's) closes.
func (s *Scheduler) Run(stop, done <-chan struct{}) {
	s.log.Info("scheduler started")
	defer s.log.Info("scheduler stopped")
	heads := map[uint32]head{}
	var lastRound time.Time
	var first uint32 // the queue a round starts with turns, so that none waits behind the others
	for {
		select {
		case <-stop:
			return
		case <-done:
			return
		default:
		}
		changed := s.fsm.Changed()
		now := time.Now()
		lastRound = now
		first = (first + 1) % store.ScheduleQueues
		next, err := s.round(stop, heads, first, now)
		wait := scheduleIdle
		switch {
		case err != nil:
			if !errors.Is(err, brokererr.ErrShutdown) {
				s.log.Warn("scheduler: delivery failed, retrying", "error", err)
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
			// Let the apply's answers go out first; applies come fast
			// under load: space the rounds they wake.
			time.Sleep(max(scheduleSpacing-time.Since(lastRound), scheduleSpacing/4))
		case <-stop:
		case <-done:
		}
		t.Stop()
	}
}

// sent is a delivery handed to the batcher.
type sent struct {
	req  *raftlog.Request
	wait func() (refused, err error)
}

// round delivers what is due now out of every schedule queue and returns
// when to look again: the earliest due time of a waiting head (now when it
// delivered: more may be due), zero when nothing waits.
func (s *Scheduler) round(stop <-chan struct{}, heads map[uint32]head, first uint32, now time.Time) (time.Time, error) {
	if !s.hooks.Ready() {
		return now.Add(scheduleRetry), nil // stopping: a role change is on its way
	}
	ti, err := s.fsm.Topic(mq.ScheduleTopic)
	if err != nil {
		return time.Time{}, nil // nothing was ever delayed
	}
	if s.hooks.Busy() {
		// Producers fill the pipeline: deliveries wait a little rather
		// than take their room.
		return now.Add(10 * time.Millisecond), nil
	}
	budget := s.budget
	cursors := s.cursors.ScheduleCursors()
	var next time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	var out []sent
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
		reqs, due, err := s.dueRequests(q, c, now)
		if err != nil {
			s.log.Warn("scheduler: cannot read schedule queue", "queue", q, "offset", c, "error", err)
			earliest(now.Add(scheduleRetry))
			continue
		}
		if len(reqs) == 0 {
			heads[q] = head{offset: c, due: due}
			earliest(due)
			continue
		}
		earliest(now)
		for i := range reqs {
			size, wait, err := s.hooks.Submit(stop, reqs[i])
			if err != nil {
				return time.Time{}, s.awaitAll(out, err)
			}
			out = append(out, sent{&reqs[i], wait})
			budget -= size
		}
	}
	return next, s.awaitAll(out, nil)
}

// awaitAll waits for the submitted deliveries and returns the first error
// (or first): a stale delivery is no error, someone delivered first.
func (s *Scheduler) awaitAll(out []sent, first error) error {
	for _, p := range out {
		refused, err := p.wait()
		switch {
		case err != nil:
			first = cmpErr(first, err)
		case refused != nil && !errors.Is(refused, store.ErrScheduleStale):
			// Stored nowhere (its topic is gone): the cursor moved on.
			s.log.Warn("scheduler: delivery dropped", "topic", p.req.Topic, "messages", len(p.req.Messages), "error", refused)
		case refused != nil:
		case p.req.Topic == mq.ScheduleTopic:
			s.restaged.Add(float64(len(p.req.Messages)))
		default:
			s.delivered.Add(float64(len(p.req.Messages)))
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

// dueRequests reads schedule queue q from offset c and builds the
// deliveries of its due prefix, at most deliverBatchMessages messages.
// When nothing is due it returns when the head is.
func (s *Scheduler) dueRequests(q uint32, c uint64, now time.Time) ([]raftlog.Request, time.Time, error) {
	locs, _, err := s.fsm.Locate(mq.ScheduleTopic, int32(q), c, 64)
	if err != nil {
		return nil, time.Time{}, s.hooks.ReplicaErr(err)
	}
	msgs, _, err := s.hooks.Read(mq.ScheduleTopic, int32(q), c, locs, deliverBatchMessages, deliverBatchBytes)
	if err != nil {
		return nil, time.Time{}, err
	}
	appended := map[uint64]time.Time{}
	appendedAt := func(id string) time.Time {
		idx, err := raftlog.MessageIndex(id)
		if err != nil {
			return time.Time{}
		}
		t, ok := appended[idx]
		if !ok {
			t, _ = s.rlog.AppendedAt(idx)
			appended[idx] = t
		}
		return t
	}
	var reqs []raftlog.Request
	var cur *raftlog.Request
	size := 0
	for i := range msgs {
		m := &msgs[i]
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
		topic, lm := s.nextStage(q, m, due, now)
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
func dueTime(q uint32, m *entry.Message, appendedAt func(string) time.Time) time.Time {
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
func (s *Scheduler) nextStage(q uint32, m *entry.Message, due, now time.Time) (string, raftlog.Message) {
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
	if n := s.fsm.QueueCount(topic); n > 0 && qid >= 0 {
		qid %= n
	}
	lm.Queue = uint32(max(qid, 0))
	for _, k := range []string{mq.PropDelay, mq.PropTimerDeliverMS, mq.PropRealTopic, mq.PropRealQueue, mq.PropSchedulePopMS} {
		delete(props, k)
	}
	return topic, lm
}
