package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// Message is what a cluster producer sends. Group, when set, pins the
// message to that group (and Queue, when also set, to that queue of it); a
// Key without a Group pins it to the queue the key hashes to over all
// queues of the topic. A pinned message waits for its group to come back;
// an unpinned one (no Group, no Key) goes to any group that takes writes.
type Message struct {
	client.Message
	Group string
}

// Ack is one stored message: its group, queue, offset and id.
type Ack struct {
	Group string
	*api.Ack
}

// SendError is a failed send to one group, with what it means for the
// messages (client.Classify): Failed ones were not stored, Unknown ones may
// have been.
type SendError struct {
	Group   string
	Outcome client.Outcome
	Err     error
}

func (e *SendError) Error() string {
	return fmt.Sprintf("send to group %s (%s): %v", e.Group, e.Outcome, e.Err)
}
func (e *SendError) Unwrap() error { return e.Err }

// Producer spreads messages over every queue of every group of a topic.
// It keeps one idempotent client.Producer per group. A group whose send is
// unanswered for Config.SlowSend, or fails, is avoided by unpinned writes
// for Config.FaultPenalty and then until a probe (one Status call) finds
// it led again (when every group is avoided, one that was only slow is
// preferred to one that failed); unpinned messages still waiting in that group's producer
// (not yet sent, so not stored) move to another group at once, while a
// request already sent runs to its end in its group, where a retry is
// appended once. So an unpinned message is never stored twice; the price
// is that a request in flight when its group dies whole waits for that
// group up to client.Config.RetryTimeout (or its context) and then fails
// with a *SendError of outcome Unknown. A leader change within a group
// costs such a request only the election.
type Producer struct {
	c   *Cluster
	cfg client.ProducerConfig

	mu      sync.Mutex
	byGrp   map[string]*client.Producer
	faults  map[string]fault // groups avoided until a probe finds a leader
	probing map[string]bool
	closed  bool
	next    atomic.Uint64

	wg sync.WaitGroup // probes
}

// fault is why and until when unpinned writes avoid a group: down (a send
// failed, or a probe found no leader) or only slow (a send unanswered for
// Config.SlowSend, which a loaded group may be).
type fault struct {
	until time.Time
	down  bool
}

// NewProducer returns a producer; cfg configures each group's producer.
func (c *Cluster) NewProducer(cfg client.ProducerConfig) *Producer {
	return &Producer{c: c, cfg: cfg, byGrp: map[string]*client.Producer{}, faults: map[string]fault{}, probing: map[string]bool{}}
}

// Close waits for the producer's probes to end; sends in flight finish.
// It is idempotent.
func (p *Producer) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// probeLocked asks a faulty group whose penalty is over whether it has a
// leader again, in the background; only a yes lets unpinned writes back,
// so a group that is still down never gets another write stuck in it.
func (p *Producer) probeLocked(group string) {
	if p.probing[group] || p.closed {
		return
	}
	p.probing[group] = true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), max(p.c.cfg.SlowSend, time.Second))
		defer cancel()
		ok := false
		if cl, err := p.c.Client(ctx, group); err == nil {
			st, err := cl.Status(ctx)
			ok = err == nil && st.LeaderId != ""
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.probing, group)
		if ok {
			delete(p.faults, group)
		} else {
			p.faults[group] = fault{until: time.Now().Add(p.c.cfg.FaultPenalty), down: true}
		}
	}()
}

func (p *Producer) producer(ctx context.Context, group string) (*client.Producer, error) {
	p.mu.Lock()
	pr := p.byGrp[group]
	p.mu.Unlock()
	if pr != nil {
		return pr, nil
	}
	cl, err := p.c.Client(ctx, group)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr = p.byGrp[group]; pr == nil {
		pr = cl.NewProducerWith(p.cfg)
		p.byGrp[group] = pr
	}
	return pr, nil
}

// markFaulty avoids group for FaultPenalty; down says the group failed a
// send (else it was only slow), and stays said until the fault clears.
func (p *Producer) markFaulty(group string, down bool) {
	p.mu.Lock()
	p.faults[group] = fault{until: time.Now().Add(p.c.cfg.FaultPenalty), down: down || p.faults[group].down}
	p.mu.Unlock()
}

func (p *Producer) clearFault(group string) {
	p.mu.Lock()
	delete(p.faults, group)
	p.mu.Unlock()
}

// Faulty lists the groups unpinned writes avoid now.
func (p *Producer) Faulty() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := sortedNames(p.faults)
	return out
}

// pick chooses the queue of an unpinned send: round robin over the
// writable queues of the groups not avoided and not in skip, leaving out
// for SlowSend the groups whose client has just found no leader or no node
// (client.Client.Trouble: a leader that died, before the election) unless
// no other group is left; when every group is avoided, of those only slow
// (not down) if any, the one whose penalty ends first (RocketMQ's
// pickOneAtLeast).
func (p *Producer) pick(r *Route, skip map[string]bool) (Queue, bool) {
	now := time.Now()
	troubled := map[string]bool{}
	for g := range r.Groups {
		if t := p.c.trouble(g); !t.IsZero() && now.Sub(t) < p.c.cfg.SlowSend {
			troubled[g] = true
		}
	}
	p.mu.Lock()
	var ok, shaky, avoided []Queue
	faults := map[string]fault{}
	for _, q := range r.Queues {
		if r.ReadOnly[q.Group] || skip[q.Group] {
			continue
		}
		if f, bad := p.faults[q.Group]; bad {
			if !now.Before(f.until) {
				p.probeLocked(q.Group)
			}
			avoided = append(avoided, q)
			faults[q.Group] = f
			continue
		}
		if troubled[q.Group] {
			shaky = append(shaky, q)
			continue
		}
		ok = append(ok, q)
	}
	p.mu.Unlock()
	n := p.next.Add(1)
	if len(ok) > 0 {
		return ok[n%uint64(len(ok))], true
	}
	if len(shaky) > 0 {
		return shaky[n%uint64(len(shaky))], true
	}
	if len(avoided) == 0 {
		return Queue{}, false
	}
	best := avoided[0]
	for _, q := range avoided {
		f, b := faults[q.Group], faults[best.Group]
		if f.down != b.down {
			if !f.down {
				best = q
			}
			continue
		}
		if f.until.Before(b.until) {
			best = q
		}
	}
	return best, true
}

// pinned returns where a pinned message goes, or false for an unpinned one.
func pinned(r *Route, m *Message) (Queue, bool, error) {
	switch {
	case m.Group != "":
		n, ok := r.Groups[m.Group]
		if !ok {
			return Queue{}, true, fmt.Errorf("group %s: %w for topic %s", m.Group, ErrUnknownGroup, r.Topic)
		}
		q := int32(-1)
		if m.Queue != nil {
			if *m.Queue < 0 || int(*m.Queue) >= n {
				return Queue{}, true, fmt.Errorf("queue %d: group %s has %d queues of %s", *m.Queue, m.Group, n, r.Topic)
			}
			q = *m.Queue
		}
		return Queue{Group: m.Group, Queue: q}, true, nil
	case m.Queue != nil:
		return Queue{}, true, errors.New("a message's Queue needs its Group: queues are numbered per group")
	case m.Key != "":
		h := fnv.New32a()
		h.Write([]byte(m.Key))
		return r.Queues[h.Sum32()%uint32(len(r.Queues))], true, nil
	}
	return Queue{}, false, nil
}

// Send stores msgs and returns one ack per message, in order. Unpinned
// messages are spread one by one over the queues of every group that
// takes writes (round robin, as one group's producer spreads them over its
// queues); pinned ones go to their groups. When sends to several groups are needed and some fail, the acks
// of the others are returned with an error joining a *SendError per failed
// group.
func (p *Producer) Send(ctx context.Context, topic string, msgs ...Message) ([]Ack, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: send: no messages", client.ErrNotSent)
	}
	r, err := p.c.Route(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", client.ErrNotSent, err)
	}
	type part struct {
		idx  []int
		msgs []client.Message
	}
	parts := map[string]*part{} // pinned, by group
	var free part
	for i := range msgs {
		q, isPinned, err := pinned(r, &msgs[i])
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", client.ErrNotSent, i, err)
		}
		m := msgs[i].Message
		if !isPinned {
			free.idx, free.msgs = append(free.idx, i), append(free.msgs, m)
			continue
		}
		if r.ReadOnly[q.Group] {
			return nil, fmt.Errorf("%w: message %d: group %s refuses writes to %s", client.ErrNotSent, i, q.Group, topic)
		}
		if q.Queue >= 0 {
			qq := q.Queue
			m.Queue = &qq
		}
		pt := parts[q.Group]
		if pt == nil {
			pt = &part{}
			parts[q.Group] = pt
		}
		pt.idx, pt.msgs = append(pt.idx, i), append(pt.msgs, m)
	}
	acks := make([]Ack, len(msgs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	put := func(idx []int, group string, as []*api.Ack, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		for k, i := range idx {
			acks[i] = Ack{Group: group, Ack: as[k]}
		}
	}
	for g, pt := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			as, err := p.sendTo(ctx, topic, g, pt.msgs, false)
			put(pt.idx, g, as, err)
		}()
	}
	if len(free.msgs) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			as, err := p.sendFree(ctx, r, free.msgs)
			mu.Lock()
			defer mu.Unlock()
			for k, i := range free.idx {
				acks[i] = as[k]
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		if len(errs) == 1 {
			return acks, errs[0]
		}
		return acks, errors.Join(errs...)
	}
	return acks, nil
}

// sendFree spreads unpinned messages over the writable queues of the
// groups not avoided, one queue after the other (the same round robin over
// all queues of all groups that one group's producer does over its
// queues), and sends each group its part at once. A group's part that is
// provably not stored there moves to the groups not tried yet; when every
// group has been tried, the rest waits in one of them.
func (p *Producer) sendFree(ctx context.Context, r *Route, msgs []client.Message) ([]Ack, error) {
	acks := make([]Ack, len(msgs))
	pending := make([]int, len(msgs))
	for i := range pending {
		pending[i] = i
	}
	skip := map[string]bool{}
	var errs []error
	for len(pending) > 0 {
		type part struct {
			idx  []int
			msgs []client.Message
		}
		parts := map[string]*part{}
		final := false
		for _, i := range pending {
			q, ok := p.pick(r, skip)
			if !ok && len(skip) > 0 {
				q, ok = p.pick(r, nil) // every group tried once: wait in one
				final = true
			}
			if !ok {
				return acks, joinErrs(append(errs, fmt.Errorf("%w: topic %s: %w", client.ErrNotSent, r.Topic, ErrNoWritableGroup)))
			}
			pt := parts[q.Group]
			if pt == nil {
				pt = &part{}
				parts[q.Group] = pt
			}
			m := msgs[i]
			qq := q.Queue
			m.Queue = &qq
			pt.idx, pt.msgs = append(pt.idx, i), append(pt.msgs, m)
		}
		movable := !final && p.untried(r, skip) > 1
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			retry []int
		)
		for g, pt := range parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				as, err := p.sendTo(ctx, r.Topic, g, pt.msgs, movable)
				mu.Lock()
				defer mu.Unlock()
				var se *SendError
				switch {
				case err == nil:
					for k, i := range pt.idx {
						acks[i] = Ack{Group: g, Ack: as[k]}
					}
				case movable && errors.As(err, &se) && se.Outcome == client.Failed && ctx.Err() == nil:
					skip[g] = true // not stored there: try another group
					retry = append(retry, pt.idx...)
				default:
					errs = append(errs, err)
				}
			}()
		}
		wg.Wait()
		sort.Ints(retry)
		pending = retry
	}
	return acks, joinErrs(errs)
}

// untried counts the groups of r that take writes and are not in skip.
func (p *Producer) untried(r *Route, skip map[string]bool) int {
	n := 0
	for g := range r.Groups {
		if !r.ReadOnly[g] && !skip[g] {
			n++
		}
	}
	return n
}

func joinErrs(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

// sendTo sends msgs to group. A send unanswered for SlowSend marks the
// group faulty; when movable, messages still queued in the group's
// producer are then withdrawn (client.ErrNotSent: Failed).
func (p *Producer) sendTo(ctx context.Context, topic, group string, msgs []client.Message, movable bool) ([]*api.Ack, error) {
	pr, err := p.producer(ctx, group)
	if err != nil {
		return nil, &SendError{Group: group, Outcome: client.Failed, Err: err}
	}
	type result struct {
		acks []*api.Ack
		err  error
	}
	ch := make(chan result, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slow := time.AfterFunc(p.c.cfg.SlowSend, func() {
		p.markFaulty(group, false)
		if movable {
			cancel() // only what is not sent yet: a started request runs to its end
		}
	})
	start := time.Now()
	pr.SendAsyncContext(sctx, topic, msgs, func(acks []*api.Ack, err error) { ch <- result{acks, err} })
	var res result
	select {
	case res = <-ch:
	case <-ctx.Done():
		// The caller gave up; the request may still be appended (once).
		// Unanswered that long, the group counts as down until a probe
		// finds it led.
		if !slow.Stop() {
			p.markFaulty(group, true)
		}
		return nil, &SendError{Group: group, Outcome: client.Unknown, Err: ctx.Err()}
	}
	if slow.Stop() && res.err == nil && time.Since(start) < p.c.cfg.SlowSend {
		p.clearFault(group)
	}
	if res.err != nil {
		p.markFaulty(group, true)
		return nil, &SendError{Group: group, Outcome: client.Classify(res.err), Err: res.err}
	}
	return res.acks, nil
}
