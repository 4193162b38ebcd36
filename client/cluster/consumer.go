package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
)

// Record is a consumed message and the group that holds it.
type Record struct {
	Group string
	client.Record
}

// ConsumerConfig configures a cluster Consumer.
type ConsumerConfig struct {
	// Consumer is every group's client.ConsumerConfig (Topic and Group
	// are required). Queues, which pins queues of one group, is refused.
	Consumer client.ConsumerConfig
	// Groups, when set, reads only these groups; default every group that
	// holds the topic, including groups that take it on later.
	Groups []string
	// OnError, when set, is called with a *GroupError when one group's
	// poll fails; that group's poller retries after a second, the others
	// go on. Called from the pollers' goroutines.
	OnError func(error)
}

// Consumer reads a topic from every group that holds it. It runs one
// client.Consumer per group, each a member of the consumer group on that
// group's coordinator under the same member id, so the consumer group
// balances every group's queues over its members. One poller goroutine per
// group pulls a batch and waits until Poll has handed it out and Poll is
// called again (which is when, as with client.Consumer, the batch counts
// as processed): a group that is down holds back only its own queues.
type Consumer struct {
	c   *Cluster
	cfg ConsumerConfig

	ready chan batch // filled by the pollers

	mu       sync.Mutex
	pollers  map[string]*poller
	released []*poller // handed out by the last Poll: resumed at the next
	closed   bool
	lastScan time.Time

	ctx    context.Context // ends at Close: stops the pollers
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type batch struct {
	p    *poller
	recs []client.Record
}

type poller struct {
	group  string
	cn     *client.Consumer
	resume chan struct{}
	// pending is a batch pulled and not handed out (guarded by
	// Consumer.mu); Close seeks its queues back so it is not committed.
	pending []client.Record
	// floor is the positions as the current pull began (guarded by
	// Consumer.mu): everything below them has been handed out, whatever
	// the pull in flight has moved the positions to.
	floor map[int32]uint64
}

// NewConsumer starts reading; it fails when the topic has no route.
func (c *Cluster) NewConsumer(ctx context.Context, cfg ConsumerConfig) (*Consumer, error) {
	if len(cfg.Consumer.Queues) > 0 {
		return nil, errors.New("cluster consumer: Queues pins queues of one group; use that group's client.Consumer")
	}
	if cfg.Consumer.Topic == "" || cfg.Consumer.Group == "" {
		return nil, errors.New("cluster consumer: topic and consumer group are required")
	}
	if cfg.Consumer.MemberID == "" {
		cfg.Consumer.MemberID = fmt.Sprintf("c-%d", time.Now().UnixNano())
	}
	cn := &Consumer{c: c, cfg: cfg, ready: make(chan batch, 64), pollers: map[string]*poller{}}
	cn.ctx, cn.cancel = context.WithCancel(context.Background())
	if err := cn.scan(ctx); err != nil {
		cn.cancel()
		return nil, err
	}
	return cn, nil
}

// MemberID is this consumer's member id in every group.
func (cn *Consumer) MemberID() string { return cn.cfg.Consumer.MemberID }

// scan starts a poller for every group of the route that has none.
func (cn *Consumer) scan(ctx context.Context) error {
	r, err := cn.c.Route(ctx, cn.cfg.Consumer.Topic)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, g := range cn.cfg.Groups {
		if _, ok := r.Groups[g]; !ok {
			return fmt.Errorf("group %s: %w for topic %s", g, ErrUnknownGroup, r.Topic)
		}
		want[g] = true
	}
	for _, g := range sortedNames(r.Groups) {
		if len(want) > 0 && !want[g] {
			continue
		}
		cn.mu.Lock()
		have := cn.pollers[g] != nil || cn.closed
		cn.mu.Unlock()
		if have {
			continue
		}
		cl, err := cn.c.Client(ctx, g)
		if err != nil {
			return err
		}
		sub, err := cl.NewConsumer(cn.cfg.Consumer)
		if err != nil {
			return err
		}
		p := &poller{group: g, cn: sub, resume: make(chan struct{}, 1)}
		cn.mu.Lock()
		if cn.closed {
			cn.mu.Unlock()
			return nil
		}
		cn.pollers[g] = p
		cn.wg.Add(1)
		go func() {
			defer cn.wg.Done()
			cn.run(p)
		}()
		cn.mu.Unlock()
	}
	cn.mu.Lock()
	cn.lastScan = time.Now()
	cn.mu.Unlock()
	return nil
}

func (cn *Consumer) run(p *poller) {
	for {
		cn.mu.Lock()
		p.floor = p.cn.Positions()
		cn.mu.Unlock()
		recs, err := p.cn.Poll(cn.ctx)
		if cn.ctx.Err() != nil {
			cn.mu.Lock()
			p.pending = append(p.pending, recs...)
			cn.mu.Unlock()
			return
		}
		if err != nil {
			if cn.cfg.OnError != nil {
				cn.cfg.OnError(&GroupError{Group: p.group, Err: err})
			}
			select {
			case <-cn.ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		if len(recs) == 0 {
			continue
		}
		cn.mu.Lock()
		p.pending = recs
		cn.mu.Unlock()
		select {
		case cn.ready <- batch{p: p, recs: recs}:
		case <-cn.ctx.Done():
			return
		}
		select {
		case <-p.resume:
		case <-cn.ctx.Done():
			return
		}
	}
}

// Poll returns the next messages of any group, waiting up to the
// consumer's Wait when there are none. As with client.Consumer, calling
// Poll marks everything the previous Poll returned as processed.
func (cn *Consumer) Poll(ctx context.Context) ([]Record, error) {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return nil, errors.New("consumer is closed")
	}
	for _, p := range cn.released {
		p.resume <- struct{}{}
	}
	cn.released = cn.released[:0]
	rescan := time.Since(cn.lastScan) >= cn.c.cfg.RefreshInterval
	cn.mu.Unlock()
	if rescan && len(cn.cfg.Groups) == 0 {
		if err := cn.scan(ctx); err != nil && cn.cfg.OnError != nil {
			cn.cfg.OnError(err) // a group added later waits for the next scan
		}
	}
	wait := cn.cfg.Consumer.Wait
	if wait <= 0 {
		wait = client.DefaultConsumerConfig("", "").Wait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var got []batch
	select {
	case b := <-cn.ready:
		got = append(got, b)
	case <-timer.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for more := true; more; { // whatever else is ready now
		select {
		case b := <-cn.ready:
			got = append(got, b)
		default:
			more = false
		}
	}
	var out []Record
	cn.mu.Lock()
	for _, b := range got {
		for _, r := range b.recs {
			out = append(out, Record{Group: b.p.group, Record: r})
			if f := b.p.floor; f != nil && f[r.Queue] <= r.Offset {
				f[r.Queue] = r.Offset + 1 // handed out now
			}
		}
		b.p.pending = nil
		cn.released = append(cn.released, b.p)
	}
	cn.mu.Unlock()
	return out, nil
}

// Assigned lists the queues this consumer reads now, over every group.
func (cn *Consumer) Assigned() []Queue {
	cn.mu.Lock()
	ps := make([]*poller, 0, len(cn.pollers))
	for _, p := range cn.pollers {
		ps = append(ps, p)
	}
	cn.mu.Unlock()
	var out []Queue
	for _, p := range ps {
		for _, q := range p.cn.Assigned() {
			out = append(out, Queue{Group: p.group, Queue: q})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Queue < out[j].Queue
	})
	return out
}

// Close stops the pollers, then closes every group's consumer: it commits
// what Poll handed out (the caller has processed it) and leaves the
// consumer group on each group. Batches pulled and not handed out are not
// committed. The errors of the groups are joined, each a *GroupError.
func (cn *Consumer) Close(ctx context.Context) error {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return nil
	}
	cn.closed = true
	cn.mu.Unlock()
	cn.cancel()
	cn.wg.Wait()
	for more := true; more; { // batches queued and never handed out
		select {
		case <-cn.ready:
		default:
			more = false
		}
	}
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, p := range cn.pollers {
		// Not handed out: seek back so Close does not commit them.
		first := map[int32]uint64{}
		for _, r := range p.pending {
			if o, ok := first[r.Queue]; !ok || r.Offset < o {
				first[r.Queue] = r.Offset
			}
		}
		for q, o := range first {
			p.cn.Seek(q, o)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.cn.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, &GroupError{Group: p.group, Err: err})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CaughtUp reports whether Poll has handed out every queue of end that
// holds messages up to its end offset (from EndOffsets), as of each group's
// current pull: the question of a lone member reading to the end. A queue
// this consumer does not hold (yet: its poller has not joined that group,
// or the group's assignment has not given it the queue; or at all: another
// member holds it) is not caught up, so a member of a consumer group with
// other members never is. With nothing to read it is caught up once a
// poller has started.
func (cn *Consumer) CaughtUp(end map[Queue]uint64) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	only := map[string]bool{}
	for _, g := range cn.cfg.Groups {
		only[g] = true
	}
	checked := false
	for q, off := range end {
		if off == 0 || (len(only) > 0 && !only[q.Group]) {
			continue
		}
		checked = true
		p := cn.pollers[q.Group]
		if p == nil {
			return false
		}
		// The floor, not the positions now: a pull in flight has moved
		// them past records it has not handed over yet.
		if next, ok := p.floor[q.Queue]; !ok || next < off {
			return false
		}
	}
	if checked {
		return true
	}
	for _, p := range cn.pollers {
		if len(p.floor) > 0 {
			return true
		}
	}
	return false
}

// EndOffsets is the end of every queue of topic in every group now.
func (c *Cluster) EndOffsets(ctx context.Context, topic string) (map[Queue]uint64, error) {
	r, err := c.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := map[Queue]uint64{}
	for _, g := range sortedNames(r.Groups) {
		cl, err := c.Client(ctx, g)
		if err != nil {
			return nil, err
		}
		ti, err := cl.DescribeTopic(ctx, topic)
		if err != nil {
			return nil, &GroupError{Group: g, Err: err}
		}
		for _, q := range ti.QueueInfo {
			out[Queue{Group: g, Queue: q.Queue}] = q.MaxOffset
		}
	}
	return out, nil
}

// Seek moves queue q back (or forward) to offset, as client.Consumer.Seek:
// call it between Polls, for a queue the last Poll handed out.
func (cn *Consumer) Seek(q Queue, offset uint64) {
	cn.mu.Lock()
	p := cn.pollers[q.Group]
	cn.mu.Unlock()
	if p != nil {
		p.cn.Seek(q.Queue, offset)
	}
}
