package batch

import (
	"context"
	"sync"
	"time"

	"github.com/raftmq/raftmq/broker/brokererr"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Writer hands one entry of requests to raft without waiting for it.
// *store.Store implements it.
type Writer interface {
	Produce(reqs []*raftlog.Request, sizeHint int, timeout time.Duration) store.ProduceFuture
}

// Config bounds the batcher.
type Config struct {
	MaxBatchBytes int           // an entry's requests encode to at most this (one larger request goes alone)
	MaxInflight   int           // entries handed to raft and not yet answered
	QueueLen      int           // requests waiting for a batch
	WriteTimeout  time.Duration // for raft to take an entry
}

// Hooks are the broker's parts the batcher reports to.
type Hooks struct {
	// Batched is told of every entry: its requests and its encoded bytes
	// (in the batch version the writer chose).
	Batched func(requests, bytes int)
	// ReplicaErr maps an error of the replica to the broker's.
	ReplicaErr func(error) error
}

// Pending is one request waiting for its entry to commit.
type Pending struct {
	Req    raftlog.Request
	Size   int // the bytes Req adds to its entry, at most (raftlog.Request.EncodedSize)
	done   chan Outcome
	budget *Budget // holds Size until the outcome is delivered; nil: none
}

// NewPending is req, queued as it encodes now.
func NewPending(req raftlog.Request) *Pending {
	return &Pending{Req: req, Size: req.EncodedSize(), done: make(chan Outcome, 1)}
}

// Done delivers the request's outcome once.
func (p *Pending) Done() <-chan Outcome { return p.done }

// HeldIn tells that p's Size bytes are held in bb: the batcher gives them
// back when it delivers p's outcome. A request whose caller stopped
// waiting (timed out) is still queued for raft, so its bytes count until
// then: the node admits no retry of it on top.
func (p *Pending) HeldIn(bb *Budget) { p.budget = bb }

func (p *Pending) deliver(o Outcome) {
	p.done <- o
	if p.budget != nil {
		p.budget.Give(p.Size)
	}
}

// Outcome is a request's answer: the state machine's result, or the error
// of its entry (brokererr.ErrShutdown when the batcher stopped first).
type Outcome struct {
	Res store.RequestResult
	Err error
}

type inflightEntry struct {
	f     store.ProduceFuture
	batch []*Pending
}

// Batcher is the group commit.
type Batcher struct {
	w        Writer
	cfg      Config
	hooks    Hooks
	in       chan *Pending
	inflight chan inflightEntry
}

// New returns a batcher over w; RunBatch and RunComplete run it.
func New(w Writer, cfg Config, hooks Hooks) *Batcher {
	if hooks.Batched == nil {
		hooks.Batched = func(int, int) {}
	}
	if hooks.ReplicaErr == nil {
		hooks.ReplicaErr = func(err error) error { return err }
	}
	return &Batcher{w: w, cfg: cfg, hooks: hooks, in: make(chan *Pending, cfg.QueueLen), inflight: make(chan inflightEntry, cfg.MaxInflight)}
}

// In is where requests wait for a batch.
func (bt *Batcher) In() chan<- *Pending { return bt.in }

// QueueFill is the fill of the produce queue (0..1).
func (bt *Batcher) QueueFill() float64 { return float64(len(bt.in)) / float64(cap(bt.in)) }

// InflightFill is the fill of the raft pipeline (0..1).
func (bt *Batcher) InflightFill() float64 {
	return float64(len(bt.inflight)) / float64(cap(bt.inflight))
}

// RunBatch is the group commit: it takes every request waiting right now
// (up to MaxBatchBytes) and hands them to the replica as one Raft entry
// without waiting, so the next batch forms while this one replicates. When
// stop closes, waiting requests get brokererr.ErrShutdown.
func (bt *Batcher) RunBatch(stop <-chan struct{}) {
	var next *Pending
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case first = <-bt.in:
			case <-stop:
				bt.drain()
				return
			}
		}
		var batch []*Pending
		var size int
		batch, size, next = collect(first, bt.in, bt.cfg.MaxBatchBytes)
		reqs := make([]*raftlog.Request, len(batch))
		for i, p := range batch {
			reqs[i] = &p.Req
		}
		ie := inflightEntry{f: bt.w.Produce(reqs, size, bt.cfg.WriteTimeout), batch: batch}
		bt.hooks.Batched(len(batch), ie.f.Bytes())
		select {
		case bt.inflight <- ie: // bounded: this blocks when MaxInflight entries are in raft
		case <-stop:
			bt.finish(ie)
			bt.drain()
			return
		}
	}
}

// collect starts a batch with first and adds the requests waiting in ch
// while the batch stays within maxBytes. It returns the batch, the bytes
// its requests encode to, and the request taken from ch that did not fit
// (nil if none), which starts the next batch. A request larger than
// maxBytes is a batch of its own.
func collect(first *Pending, ch <-chan *Pending, maxBytes int) (batch []*Pending, size int, next *Pending) {
	batch, size = []*Pending{first}, first.Size
	for size < maxBytes {
		select {
		case p := <-ch:
			if size+p.Size > maxBytes {
				return batch, size, p
			}
			batch = append(batch, p)
			size += p.Size
		default:
			return batch, size, nil
		}
	}
	return batch, size, nil
}

// RunComplete waits for entries in the order they were handed to raft
// (which is the order raft commits them) and answers their requests; once
// stop closes it answers the entries in flight and returns.
func (bt *Batcher) RunComplete(stop <-chan struct{}) {
	for {
		select {
		case ie := <-bt.inflight:
			bt.finish(ie)
		case <-stop:
			for {
				select {
				case ie := <-bt.inflight:
					bt.finish(ie)
				default:
					return
				}
			}
		}
	}
}

func (bt *Batcher) finish(ie inflightEntry) {
	results, err := ie.f.Wait()
	if err != nil {
		err = bt.hooks.ReplicaErr(err)
		for _, p := range ie.batch {
			p.deliver(Outcome{Err: err})
		}
		return
	}
	for i, p := range ie.batch {
		p.deliver(Outcome{Res: results[i]})
	}
}

func (bt *Batcher) drain() {
	for {
		select {
		case p := <-bt.in:
			p.deliver(Outcome{Err: brokererr.ErrShutdown})
		default:
			return
		}
	}
}

// Budget counts the bytes of produce requests a node holds, queued or with
// raft, and admits new ones within two bounds: Max bytes, and, when Target
// is set, the bytes the node answers in Target at the rate it answered
// them while requests queued (never below Floor). The time bound is what
// keeps an admitted request's wait short of its client's timeout: a
// request admitted behind more than its client waits for is answered too
// late, its retry is admitted on top, and raft writes both. A request
// larger than the bound goes through alone when nothing is held. Max must
// be set; the zero Budget admits nothing beside a held request.
type Budget struct {
	Max    int           // bytes held at most, and bytes waiting in Wait at most
	Target time.Duration // 0: bound by Max alone
	Floor  int           // the time bound never goes below this

	mu      sync.Mutex
	used    int
	waiting int             // bytes of the requests queued in Wait
	queue   []*budgetWaiter // in arrival order
	rate    float64         // bytes answered per second while loaded; 0: not measured yet
	since   time.Time       // start of the current measurement; zero: not loaded
	counted int             // bytes answered since then
}

// rateWindow is the least time one measurement of the answer rate spans.
const rateWindow = 100 * time.Millisecond

type budgetWaiter struct {
	n       int
	granted bool
	ready   chan struct{} // closed once granted
}

// Take admits n bytes while the total stays within the bound. It does not
// wait, and does not queue behind requests waiting in Wait.
func (bb *Budget) Take(n int) bool {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if !bb.fitsLocked(n) {
		return false
	}
	bb.used += n
	return true
}

// Hold counts n bytes in, whatever the bound; Give gives them back.
func (bb *Budget) Hold(n int) {
	bb.mu.Lock()
	bb.used += n
	bb.mu.Unlock()
}

// Full reports whether the bytes held have reached the bound.
func (bb *Budget) Full() bool {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return bb.used >= bb.limitLocked()
}

// Limit is the bytes the budget admits now: Max, or less while the answer
// rate says the node answers fewer in Target.
func (bb *Budget) Limit() int {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return bb.limitLocked()
}

func (bb *Budget) limitLocked() int {
	if bb.Target <= 0 || bb.rate == 0 {
		return bb.Max
	}
	return min(bb.Max, max(bb.Floor, int(bb.rate*bb.Target.Seconds())))
}

func (bb *Budget) fitsLocked(n int) bool { return bb.used == 0 || bb.used+n <= bb.limitLocked() }

// Wait admits n bytes as Take does when nobody is waiting; otherwise it
// waits, behind the requests already waiting, until n fits or ctx ends. It
// refuses at once, without waiting, when the bytes already waiting plus n
// would pass the bound (one request always may wait), so that what is held
// and waiting is at most what the node answers in about 2 x Target. It
// reports whether n was admitted; the caller then gives n back.
func (bb *Budget) Wait(ctx context.Context, n int) bool {
	bb.mu.Lock()
	if len(bb.queue) == 0 && bb.fitsLocked(n) {
		bb.used += n
		bb.mu.Unlock()
		return true
	}
	if bb.refusesLocked(n) {
		bb.mu.Unlock()
		return false
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	bb.queue = append(bb.queue, w)
	bb.waiting += n
	bb.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	}
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if w.granted { // as ctx ended
		return true
	}
	for i, q := range bb.queue {
		if q == w {
			bb.queue = append(bb.queue[:i], bb.queue[i+1:]...)
			break
		}
	}
	bb.waiting -= n
	bb.grantLocked() // the next in line may fit where this one did not
	return false
}

// Refuses reports whether Wait would refuse n bytes at once.
func (bb *Budget) Refuses(n int) bool {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return bb.refusesLocked(n)
}

func (bb *Budget) refusesLocked(n int) bool { return bb.waiting > 0 && bb.waiting+n > bb.limitLocked() }

// Give releases n bytes of a request the node has answered, and admits the
// waiting requests that now fit, in arrival order.
func (bb *Budget) Give(n int) {
	bb.GiveAt(n, time.Now())
}

// GiveAt is Give at now, the time the request was answered.
func (bb *Budget) GiveAt(n int, now time.Time) {
	bb.mu.Lock()
	bb.measureLocked(n, now)
	bb.used -= n
	bb.grantLocked()
	bb.mu.Unlock()
}

// measureLocked adds n bytes answered at now to the answer rate. Only
// while requests queue (some wait in Wait, or a quarter of the bound is
// held) does the rate measure what the node can answer rather than what
// it is sent; otherwise the measurement restarts.
func (bb *Budget) measureLocked(n int, now time.Time) {
	if bb.Target <= 0 {
		return
	}
	if len(bb.queue) == 0 && bb.used < bb.limitLocked()/4 {
		bb.since = time.Time{}
		return
	}
	if bb.since.IsZero() {
		bb.since, bb.counted = now, 0
		return
	}
	bb.counted += n
	d := now.Sub(bb.since)
	if d < rateWindow {
		return
	}
	r := float64(bb.counted) / d.Seconds()
	if bb.rate == 0 {
		bb.rate = r
	} else {
		bb.rate = (bb.rate + r) / 2
	}
	bb.since, bb.counted = now, 0
}

func (bb *Budget) grantLocked() {
	for len(bb.queue) > 0 {
		w := bb.queue[0]
		if !bb.fitsLocked(w.n) {
			return
		}
		bb.used += w.n
		bb.waiting -= w.n
		w.granted = true
		close(w.ready)
		bb.queue[0] = nil
		bb.queue = bb.queue[1:]
	}
}

// Held is the bytes held.
func (bb *Budget) Held() int {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return bb.used
}

// Waiting is the bytes of the requests waiting in Wait.
func (bb *Budget) Waiting() int {
	bb.mu.Lock()
	defer bb.mu.Unlock()
	return bb.waiting
}
