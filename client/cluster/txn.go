package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// TxnResult is what SendInTransaction did: the half message's ack (its
// group, the queue it goes to and its id) and the local transaction's
// answer.
type TxnResult struct {
	Ack   Ack
	State client.TxnState
}

// TransactionProducer sends messages in transactions to the groups of a
// topic. Each half message goes to one group, picked as Producer.Send
// picks an unpinned or pinned message's (a Group or a Key pins it), and is
// decided in that group. It keeps one client.TransactionProducer per group
// it has sent to or that holds one of cfg.Topics: each runs its group's
// check-back, so an undecided half message is asked about in the group
// that holds it. It is safe for concurrent use; Close stops every
// check-back.
type TransactionProducer struct {
	p   *Producer // picks groups and keeps their faults
	cfg client.TransactionConfig

	mu     sync.Mutex
	byGrp  map[string]*client.TransactionProducer
	closed bool
}

// NewTransactionProducer returns a transaction producer of cfg.Group
// (client.TransactionConfig, which every group's producer gets, with Topics
// cut to the topics that group holds). It starts the check-back in every
// group that holds one of cfg.Topics, so ctx bounds looking their routes
// up; a topic no group holds is an error.
func (c *Cluster) NewTransactionProducer(ctx context.Context, cfg client.TransactionConfig) (*TransactionProducer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tp := &TransactionProducer{p: c.NewProducer(cfg.Producer), cfg: cfg, byGrp: map[string]*client.TransactionProducer{}}
	for _, topic := range cfg.Topics {
		r, err := c.Route(ctx, topic)
		if err != nil {
			tp.Close()
			return nil, fmt.Errorf("transaction producer: topic %s to check: %w", topic, err)
		}
		for _, g := range sortedNames(r.Groups) {
			if _, err := tp.group(ctx, g, topic); err != nil {
				tp.Close()
				return nil, fmt.Errorf("transaction producer: group %s: %w", g, err)
			}
		}
	}
	return tp, nil
}

// group returns group's transaction producer, made on first use, and has it
// check topic.
func (tp *TransactionProducer) group(ctx context.Context, group, topic string) (*client.TransactionProducer, error) {
	tp.mu.Lock()
	gtp := tp.byGrp[group]
	tp.mu.Unlock()
	if gtp != nil {
		gtp.CheckTopic(topic)
		return gtp, nil
	}
	cl, err := tp.p.c.Client(ctx, group)
	if err != nil {
		return nil, err
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if tp.closed {
		return nil, fmt.Errorf("%w: transaction producer closed", client.ErrNotSent)
	}
	if gtp = tp.byGrp[group]; gtp == nil {
		cfg := tp.cfg
		cfg.Topics = nil
		if gtp, err = cl.NewTransactionProducer(cfg); err != nil {
			return nil, err
		}
		tp.byGrp[group] = gtp
	}
	gtp.CheckTopic(topic)
	return gtp, nil
}

// SendInTransaction sends msg as a half message to a group of topic, runs
// local once that group has stored it, and decides it there with local's
// answer (client.TransactionProducer.SendInTransaction, whose errors mean
// the same). An unpinned message that a group provably did not store is
// sent to the next group not tried; an error before the ack is a
// *SendError naming the last group tried.
func (tp *TransactionProducer) SendInTransaction(ctx context.Context, topic string, msg Message, local func(ctx context.Context, ack Ack) client.TxnState) (TxnResult, error) {
	r, err := tp.p.c.Route(ctx, topic)
	if err != nil {
		return TxnResult{}, fmt.Errorf("%w: %w", client.ErrNotSent, err)
	}
	q, isPinned, err := pinned(r, &msg)
	if err != nil {
		return TxnResult{}, fmt.Errorf("%w: %w", client.ErrNotSent, err)
	}
	if isPinned && r.ReadOnly[q.Group] {
		return TxnResult{}, fmt.Errorf("%w: group %s refuses writes to %s", client.ErrNotSent, q.Group, topic)
	}
	tried := map[string]bool{}
	var last error
	for {
		if !isPinned {
			var ok bool
			if q, ok = tp.p.pick(r, tried); !ok {
				if last != nil {
					return TxnResult{}, last
				}
				return TxnResult{}, fmt.Errorf("%w: topic %s: %w", client.ErrNotSent, topic, ErrNoWritableGroup)
			}
		}
		res, err := tp.sendTo(ctx, topic, q, msg.Message, local)
		var se *SendError
		if err == nil || isPinned || res.Ack.Ack != nil || !errors.As(err, &se) || se.Outcome != client.Failed || ctx.Err() != nil {
			return res, err
		}
		tried[q.Group], last = true, err // not stored there: try another group
	}
}

// sendTo is SendInTransaction's attempt in q's group.
func (tp *TransactionProducer) sendTo(ctx context.Context, topic string, q Queue, m client.Message, local func(context.Context, Ack) client.TxnState) (TxnResult, error) {
	gtp, err := tp.group(ctx, q.Group, topic)
	if err != nil {
		return TxnResult{}, &SendError{Group: q.Group, Outcome: client.Failed, Err: err}
	}
	if q.Queue >= 0 {
		qq := q.Queue
		m.Queue = &qq
	}
	acked := false
	res, err := gtp.SendInTransaction(ctx, topic, m, func(ctx context.Context, a *api.Ack) client.TxnState {
		acked = true
		return local(ctx, Ack{Group: q.Group, Ack: a})
	})
	out := TxnResult{State: res.State}
	if res.Ack != nil {
		out.Ack = Ack{Group: q.Group, Ack: res.Ack}
	}
	if err != nil && !acked {
		tp.p.markFaulty(q.Group, true)
		return out, &SendError{Group: q.Group, Outcome: client.Classify(err), Err: err}
	}
	tp.p.clearFault(q.Group)
	return out, err
}

// Groups lists the groups whose check-back this producer runs.
func (tp *TransactionProducer) Groups() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return sortedNames(tp.byGrp)
}

// CheckNow runs one check-back round in every group now and returns how
// many half messages it decided.
func (tp *TransactionProducer) CheckNow() int {
	tp.mu.Lock()
	gtps := slices.Collect(maps.Values(tp.byGrp))
	tp.mu.Unlock()
	n := 0
	for _, gtp := range gtps {
		n += gtp.CheckNow()
	}
	return n
}

// Close stops every group's check-back and waits for them. It is
// idempotent.
func (tp *TransactionProducer) Close() error {
	tp.mu.Lock()
	tp.closed = true
	gtps := slices.Collect(maps.Values(tp.byGrp))
	tp.mu.Unlock()
	for _, gtp := range gtps {
		gtp.Close()
	}
	return tp.p.Close()
}
