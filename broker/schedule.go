package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/raftmq/raftmq/broker/batch"
	"github.com/raftmq/raftmq/broker/delay"
	"github.com/raftmq/raftmq/broker/route"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// The scheduler (package delay) runs on the ready leader only: the facade
// starts it on each term's Ready event, stops it on any other role, and
// gives it the batcher, the pull reader and leadership hand-over.

// scheduler is the running scheduler's stop channel (nil when stopped).
type scheduler struct {
	mu   sync.Mutex
	stop chan struct{}
}

// newScheduler builds the delay scheduler and adds its figures to /metrics.
func (b *Broker) newScheduler() *delay.Scheduler {
	var cursors delay.Cursors
	if b.sched != nil {
		cursors = b.sched
	}
	s := delay.New(b.log, b.fsm, cursors, b.rlog, b.cfg.MaxPendingBytes/4, delay.Hooks{
		Ready:      b.node.Ready,
		Busy:       func() bool { return b.pending.Held() > b.pending.Limit()/2 },
		Read:       b.readQueue,
		Submit:     b.submit,
		ReplicaErr: b.replicaErr,
	})
	b.m.reg.MustRegister(s.Collectors()...)
	return s
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
		b.goFunc(func() { b.delay.Run(stop, b.stop) })
	}
}

// submit hands one delivery to the batcher, the path every stored message
// takes. It counts in the pending bytes until its outcome is delivered but
// is never refused by them. wait returns ErrUnknownOutcome when stop
// closes or the broker closes first: the delivery may still commit. A
// request queued just as the broker closed is answered by no one (the
// batcher has stopped), so wait must not count on an answer.
func (b *Broker) submit(stop <-chan struct{}, req raftlog.Request) (int, func() (refused, err error), error) {
	p := batch.NewPending(req)
	b.pending.Hold(p.Size)
	p.HeldIn(&b.pending)
	select {
	case b.batch.In() <- p:
		return p.Size, func() (error, error) {
			select {
			case out := <-p.Done():
				return out.Res.Err, out.Err
			case <-stop:
			case <-b.stop:
			}
			return nil, fmt.Errorf("%w: stopped waiting for the delivery's entry", ErrUnknownOutcome)
		}, nil
	case <-stop:
	case <-b.stop:
	}
	b.pending.Give(p.Size)
	return 0, nil, ErrShutdown
}

// readQueue reads the messages of queue q of topic from offset out of locs
// with pull's reader, for the scheduler, the transaction check-back and
// staged lookups. It stops early, serving what it has, at an entry it
// cannot read; when that is the first, the error is a *delay.NotServedError,
// and a leader that no longer holds the entry hands leadership to a node
// that does (handOverFor).
func (b *Broker) readQueue(topic string, q int32, offset uint64, locs []store.Location, maxMessages, maxBytes int) ([]Message, uint64, error) {
	pr := PullRequest{Topic: topic, Queue: q, Offset: offset, MaxMessages: maxMessages, MaxBytes: maxBytes}
	res := PullResult{NextOffset: offset}
	local, why, err := b.read(locs, &pr, &res)
	if err != nil {
		return nil, 0, err
	}
	if local != route.LocalServed {
		ns := &delay.NotServedError{Why: why}
		if local == route.LocalNotHeld && len(locs) > 0 {
			ns.NotHeld, ns.Index = true, locs[0].LogIndex
			b.handOverFor(ns.Index)
		}
		return nil, 0, ns
	}
	return res.Messages, res.NextOffset, nil
}

// StagedLookup is what a lookup by id of a delayed message finds.
type StagedLookup = delay.Lookup

// LookupStaged looks up a message by the id its produce ack named, when
// that is a delayed message: ok is false when id names a message of another
// topic (an ordinary lookup answers it). It answers from this node's
// applied state; the leader's is the freshest (delay.Scheduler.Staged).
func (b *Broker) LookupStaged(id string) (StagedLookup, bool, error) {
	if b.sched == nil {
		return StagedLookup{}, false, nil
	}
	index, ordinal, err := ParseMessageID(id)
	if err != nil {
		return StagedLookup{}, false, err
	}
	m, err := b.readMessage(id, index, ordinal)
	if errors.Is(err, errNotHere) {
		err = fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return StagedLookup{}, false, err
	}
	return b.delay.Staged(id, index, m)
}
