package remoting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	rmq "github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

func (a *Adapter) queueArgs(req *rmq.Command) (string, int32, error) {
	q, err := req.ExtInt("queueId", -1)
	if err != nil {
		return "", 0, err
	}
	if q < 0 || q > 1<<20 {
		return "", 0, fmt.Errorf("queueId %d", q)
	}
	return req.Ext["topic"], int32(q), nil
}

// queueRange is a queue's range as this node has applied it.
func (a *Adapter) queueRange(topic string, q int32) (store.QueueRange, error) {
	ti, err := a.b.Topic(topic)
	if err != nil {
		return store.QueueRange{}, err
	}
	if int(q) >= len(ti.Queues) {
		return store.QueueRange{}, fmt.Errorf("%w: queue %d of topic %q with %d queues", broker.ErrInvalidArgument, q, topic, len(ti.Queues))
	}
	return ti.Queues[q], nil
}

// queryOffset answers QUERY_CONSUMER_OFFSET from the offsets this node
// has taken and not stored yet (committer.queued), else those committed
// through Raft. A group without one starts at 0 while the queue still
// holds its first message, and is told QUERY_NOT_FOUND otherwise, so that
// its consumeFromWhere decides (RocketMQ's ConsumerManageProcessor, trap 10).
func (a *Adapter) queryOffset(req *rmq.Command) *rmq.Command {
	topic, q, err := a.queueArgs(req)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	resp := rmq.Response(req, rmq.Success, "")
	if off, ok := a.commits.queued(req.Ext["consumerGroup"], topic, q); ok {
		resp.Ext["offset"] = strconv.FormatUint(off, 10)
		return resp
	}
	offs, err := a.b.FetchOffsets(req.Ext["consumerGroup"], topic)
	if err != nil {
		return rmq.Response(req, rmq.QueryNotFound, err.Error())
	}
	if off, ok := offs[q]; ok {
		resp.Ext["offset"] = strconv.FormatUint(off, 10)
		return resp
	}
	if rng, err := a.queueRange(topic, q); err == nil && rng.Min == 0 {
		resp.Ext["offset"] = "0"
		return resp
	}
	return rmq.Response(req, rmq.QueryNotFound, "no offset committed")
}

func (a *Adapter) updateOffset(ctx context.Context, req *rmq.Command) *rmq.Command {
	topic, q, err := a.queueArgs(req)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	off, err := req.ExtInt("commitOffset", -1)
	if err != nil || off < 0 {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("commitOffset %q", req.Ext["commitOffset"]))
	}
	done := a.commits.add(req.Ext["consumerGroup"], topic, q, uint64(off))
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return errResponse(req, err)
	}
	return rmq.Response(req, rmq.Success, "")
}

func (a *Adapter) queueEnd(req *rmq.Command) *rmq.Command {
	topic, q, err := a.queueArgs(req)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	rng, err := a.queueRange(topic, q)
	if err != nil {
		return errResponse(req, err)
	}
	resp := rmq.Response(req, rmq.Success, "")
	if req.Code == rmq.GetMaxOffset {
		resp.Ext["offset"] = strconv.FormatUint(rng.Max, 10)
	} else {
		resp.Ext["offset"] = strconv.FormatUint(rng.Min, 10)
	}
	return resp
}

// earliestStoreTime answers GET_EARLIEST_MSG_STORETIME: the store time of
// the first message the queue still holds, read as a pull reads it (the
// time pulls and SEARCH_OFFSET_BY_TIMESTAMP use), or -1 for an empty
// queue, as RocketMQ's getEarliestMessageTime answers. Retention may drop
// the first message between reading the range and reading the message;
// the range is read again then.
func (a *Adapter) earliestStoreTime(ctx context.Context, req *rmq.Command) *rmq.Command {
	topic, q, err := a.queueArgs(req)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	for attempt := 0; ; attempt++ {
		rng, err := a.queueRange(topic, q)
		if err != nil {
			return errResponse(req, err)
		}
		resp := rmq.Response(req, rmq.Success, "")
		if rng.Min >= rng.Max {
			resp.Ext["timestamp"] = "-1"
			return resp
		}
		res, err := a.b.Pull(ctx, broker.PullRequest{Topic: topic, Queue: q, Offset: rng.Min, MaxMessages: 1})
		switch {
		case err == nil && res.Status == broker.PullFound && len(res.Messages) > 0:
			resp.Ext["timestamp"] = strconv.FormatInt(res.Messages[0].Timestamp, 10)
			return resp
		case attempt < 3 && (errors.Is(err, broker.ErrOutOfRange) || err == nil && res.Status == broker.PullOffsetMoved):
			continue // retention moved the queue's start
		case err != nil:
			return callErrResponse(req, err)
		}
		return rmq.Response(req, rmq.ServiceNotAvailable, fmt.Sprintf("earliest store time of %s/%d: offset %d is not readable on this node", topic, q, rng.Min))
	}
}

// searchOffset answers SEARCH_OFFSET_BY_TIMESTAMP: the first offset whose
// message was stored at or after the timestamp (broker.SearchOffsets).
func (a *Adapter) searchOffset(ctx context.Context, req *rmq.Command) *rmq.Command {
	topic, q, err := a.queueArgs(req)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	ts, err := req.ExtInt("timestamp", 0)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	offs, err := a.b.SearchOffsets(ctx, topic, ts, []int32{q})
	if err != nil {
		return errResponse(req, err)
	}
	resp := rmq.Response(req, rmq.Success, "")
	resp.Ext["offset"] = strconv.FormatUint(offs[0].Offset, 10)
	return resp
}

// committer batches consumer offset commits into one Raft entry per group.
// An UPDATE_CONSUMER_OFFSET is flushed within commitPeriod and answered
// once stored; offsets piggybacked on pulls (which RocketMQ's broker keeps
// in memory) are flushed with it or every lazyPeriod, and only when they
// moved: a push consumer pulls many times a second, and each commit would
// be a Raft entry.
type committer struct {
	a       *Adapter
	mu      sync.Mutex
	pending map[string]map[commitKey]*commitVal
	// inflight is the batch being stored (flush): with pending, what a
	// QUERY_CONSUMER_OFFSET on this node answers before the log has it.
	inflight map[string]map[commitKey]*commitVal
	last     map[string]map[commitKey]uint64 // what was stored, per group
	urgent   bool
	kick     chan struct{}
}

type commitKey struct {
	topic string
	queue int32
}

type commitVal struct {
	offset  uint64
	waiters []chan error
}

const (
	commitPeriod = 20 * time.Millisecond
	lazyPeriod   = time.Second
)

func newCommitter(a *Adapter) *committer {
	return &committer{a: a, pending: map[string]map[commitKey]*commitVal{}, last: map[string]map[commitKey]uint64{}, kick: make(chan struct{}, 1)}
}

// add queues a commit; the channel gets its outcome.
func (c *committer) add(group, topic string, q int32, off uint64) <-chan error {
	return c.put(group, topic, q, off, true)
}

// lazy queues a piggybacked commit, flushed without hurry and not waited for.
func (c *committer) lazy(group, topic string, q int32, off uint64) {
	c.put(group, topic, q, off, false)
}

func (c *committer) put(group, topic string, q int32, off uint64, urgent bool) <-chan error {
	ch := make(chan error, 1)
	k := commitKey{topic, q}
	c.mu.Lock()
	if !urgent {
		if stored, ok := c.last[group][k]; ok && stored == off {
			c.mu.Unlock()
			ch <- nil
			return ch
		}
	}
	g := c.pending[group]
	if g == nil {
		g = map[commitKey]*commitVal{}
		c.pending[group] = g
	}
	v := g[k]
	if v == nil {
		v = &commitVal{}
		g[k] = v
	}
	v.offset = off
	if urgent {
		v.waiters = append(v.waiters, ch)
		c.urgent = true
	} else {
		ch <- nil
	}
	c.mu.Unlock()
	if urgent {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return ch
}

// queued returns the offset of group's queue that this node has taken
// and not stored yet (the latest), if any: a client that commits an offset
// and asks for it at once (RocketMQ's Go client does, re-adding a queue
// after a reset) gets what it committed, as from RocketMQ's in-memory
// offset table.
func (c *committer) queued(group, topic string, q int32) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := commitKey{topic, q}
	if v, ok := c.pending[group][k]; ok {
		return v.offset, true
	}
	if v, ok := c.inflight[group][k]; ok {
		return v.offset, true
	}
	return 0, false
}

func (c *committer) loop() {
	lazy := time.NewTicker(lazyPeriod)
	defer lazy.Stop()
	for {
		select {
		case <-c.a.stop:
			c.flush(errors.New("node is shutting down"))
			return
		case <-lazy.C:
		case <-c.kick:
			select {
			case <-time.After(commitPeriod):
			case <-c.a.stop:
			}
		}
		c.flush(nil)
	}
}

func (c *committer) flush(fail error) {
	c.mu.Lock()
	batch := c.pending
	c.pending = map[string]map[commitKey]*commitVal{}
	c.inflight = batch
	c.urgent = false
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inflight = nil
		c.mu.Unlock()
	}()
	for group, g := range batch {
		err := fail
		if err == nil {
			entries := make([]store.OffsetEntry, 0, len(g))
			for k, v := range g {
				entries = append(entries, store.OffsetEntry{Topic: k.topic, Queue: k.queue, Offset: v.offset})
			}
			if err = c.commit(group, entries); err != nil {
				c.a.log.Debug("offset commit", "group", group, "error", err)
			} else {
				c.mu.Lock()
				if c.last[group] == nil {
					c.last[group] = map[commitKey]uint64{}
				}
				for k, v := range g {
					c.last[group][k] = v.offset
				}
				c.mu.Unlock()
			}
		}
		for _, v := range g {
			for _, w := range v.waiters {
				w <- err
			}
		}
	}
}

func (c *committer) commit(group string, entries []store.OffsetEntry) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.a.b.CommitOffsets(ctx, group, entries)
	return c.a.forward(ctx, err, func(ctx context.Context, addr string) error {
		cc, err := c.a.peers.Conn(addr)
		if err != nil {
			return err
		}
		req := &api.CommitOffsetsRequest{Group: group}
		for _, e := range entries {
			req.Offsets = append(req.Offsets, &api.QueueOffset{Topic: e.Topic, Queue: e.Queue, Offset: e.Offset})
		}
		_, err = api.NewBrokerClient(cc).CommitOffsets(ctx, req)
		return err
	})
}
