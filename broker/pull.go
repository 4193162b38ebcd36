package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/replica"
)

// PullStatus says what a pull found.
type PullStatus int

// Pull statuses.
const (
	PullFound          PullStatus = 1 // messages returned
	PullNoNew          PullStatus = 2 // nothing past the offset within the wait
	PullRetryElsewhere PullStatus = 3 // this node lacks the offset (yet): use the suggestion
	PullOffsetMoved    PullStatus = 4 // below the retained minimum: continue at NextOffset
)

// PullRequest reads one queue from an offset.
type PullRequest struct {
	Topic       string
	Queue       int32
	Offset      uint64
	MaxMessages int
	MaxBytes    int
	Wait        time.Duration
	ConsumerID  string
}

// Message is a stored message as a consumer sees it.
type Message struct {
	Topic      string
	Queue      int32
	Offset     uint64
	ID         string
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
	Timestamp  int64
}

// PullResult is the answer to a pull, with the suggestion for the next one.
type PullResult struct {
	Status         PullStatus
	Messages       []Message
	NextOffset     uint64
	MinOffset      uint64
	MaxOffset      uint64
	ServedBy       string
	ServedByLeader bool
	Suggestion     Suggestion
}

// Pull limits.
const (
	DefaultPullMessages = 256
	MaxPullMessages     = 8192
	DefaultPullBytes    = 4 << 20
	MaxPullBytes        = 64 << 20
	MaxPullWait         = 30 * time.Second
)

// Pull serves committed messages of one queue from this node's log. It never
// returns anything this node has not applied, so never uncommitted data.
func (b *Broker) Pull(ctx context.Context, req PullRequest) (PullResult, error) {
	if err := replica.ValidateName("topic", req.Topic); err != nil {
		return PullResult{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if req.MaxMessages <= 0 {
		req.MaxMessages = DefaultPullMessages
	}
	req.MaxMessages = min(req.MaxMessages, MaxPullMessages)
	if req.MaxBytes <= 0 {
		req.MaxBytes = DefaultPullBytes
	}
	req.MaxBytes = min(req.MaxBytes, MaxPullBytes)
	req.Wait = min(max(req.Wait, 0), MaxPullWait)
	if b.closed.Load() {
		return PullResult{}, ErrShutdown
	}
	isLeader := b.node.Role() == replica.Leader
	if isLeader && !b.node.Ready() {
		// A new leader has not applied its predecessors' entries yet: what
		// it would answer (an unknown topic, an offset past the end) may
		// be stale, and such answers are definite to a consumer.
		return PullResult{}, fmt.Errorf("%w: new leader is still applying earlier entries", ErrUnavailable)
	}
	var deadline <-chan time.Time
	if req.Wait > 0 {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		if d, ok := b.Damaged(); ok {
			return b.damagedPull(&req, isLeader, fmt.Sprintf("node %s is damaged at log index %d", b.cfg.NodeID, d.Index))
		}
		changed := b.fsm.Changed()
		res, err := b.pullOnce(&req, isLeader)
		if err != nil || res.Status != PullNoNew || req.Wait == 0 || res.Suggestion.NodeID != b.cfg.NodeID {
			if err == nil {
				b.account(&res)
			}
			return res, err
		}
		select {
		case <-changed:
		case <-deadline:
			b.account(&res)
			return res, nil
		case <-ctx.Done():
			b.account(&res)
			return res, nil
		case <-b.stop:
			return PullResult{}, ErrShutdown
		}
		isLeader = b.node.Role() == replica.Leader
	}
}

func (b *Broker) account(res *PullResult) {
	role := "follower"
	if res.ServedByLeader {
		role = "leader"
	}
	if n := len(res.Messages); n > 0 {
		b.m.pullMessages.WithLabelValues(role).Add(float64(n))
		b.load.addRead(n)
		total := 0
		for i := range res.Messages {
			total += len(res.Messages[i].Body)
		}
		avg := b.load.avgBytes.Load()
		b.load.avgBytes.Store((avg*7 + uint64(total/n)) / 8)
	}
	target := "self"
	switch {
	case res.Suggestion.NodeID == "" || res.Suggestion.NodeID == b.cfg.NodeID:
	case res.Suggestion.NodeID == b.node.LeaderID():
		target = "leader"
	default:
		target = "follower"
	}
	b.m.suggestions.WithLabelValues(target, res.Suggestion.Reason.String()).Inc()
}

func (b *Broker) pullOnce(req *PullRequest, isLeader bool) (PullResult, error) {
	res := PullResult{ServedBy: b.cfg.NodeID, ServedByLeader: isLeader, NextOffset: req.Offset}
	locs, rng, err := b.fsm.Locate(req.Topic, req.Queue, req.Offset, req.MaxMessages)
	if err != nil {
		if !isLeader && errors.Is(err, replica.ErrUnknownTopic) {
			// This node may just not have applied the topic yet.
			res.Status = PullRetryElsewhere
			res.Suggestion = b.route(req, isLeader, LocalNoTopic, replica.QueueRange{}, req.Offset, false)
			return res, nil
		}
		return PullResult{}, b.replicaErr(err)
	}
	res.MinOffset, res.MaxOffset = rng.Min, rng.Max
	switch {
	case req.Offset < rng.Min:
		res.Suggestion = b.route(req, isLeader, LocalBelowMin, rng, req.Offset, false)
		if !isLeader {
			res.Status = PullRetryElsewhere
			return res, nil
		}
		res.Status = PullOffsetMoved
		res.NextOffset = rng.Min
		return res, nil
	case req.Offset > rng.Max:
		if !isLeader {
			res.Status = PullRetryElsewhere
			res.Suggestion = b.route(req, isLeader, LocalPastEnd, rng, req.Offset, false)
			return res, nil
		}
		return PullResult{}, fmt.Errorf("%w: offset %d of %s/%d is past the end of the queue (next offset %d)", ErrOutOfRange, req.Offset, req.Topic, req.Queue, rng.Max)
	case req.Offset == rng.Max:
		res.Status = PullNoNew
		res.Suggestion = b.route(req, isLeader, LocalServed, rng, req.Offset, true)
		return res, nil
	}
	bytes := 0
	for _, loc := range locs {
		data, err := b.rlog.Read(loc.LogIndex)
		if err != nil {
			if len(res.Messages) > 0 {
				break
			}
			if errors.Is(err, raftlog.ErrBelowFloor) {
				// This node dropped the body (retention, or its log was
				// replaced by a snapshot): a node that holds it serves it.
				res.Status = PullRetryElsewhere
				res.Suggestion = b.route(req, isLeader, LocalNotHeld, rng, req.Offset, false)
				if isLeader && res.Suggestion.NodeID == b.cfg.NodeID {
					return PullResult{}, fmt.Errorf("%w: the message bodies at log index %d are not held by the leader nor by a reachable, caught-up follower", ErrUnavailable, loc.LogIndex)
				}
				return res, nil
			}
			if errors.Is(err, raftlog.ErrCorrupt) {
				// Damaged here (the log reported it, and the node is
				// marked damaged within a state period): never Internal,
				// the other nodes hold the entry.
				b.log.Error("damaged log entry", "index", loc.LogIndex, "error", err)
				return b.damagedPull(req, isLeader, fmt.Sprintf("log entry %d is damaged on node %s", loc.LogIndex, b.cfg.NodeID))
			}
			return PullResult{}, fmt.Errorf("read log entry %d: %w", loc.LogIndex, err)
		}
		full, err := collect(data, loc, req, &res, &bytes)
		if err != nil {
			b.log.Error("corrupt log entry", "index", loc.LogIndex, "error", err)
			if len(res.Messages) > 0 {
				break
			}
			return b.damagedPull(req, isLeader, fmt.Sprintf("log entry %d does not match this node's index on node %s", loc.LogIndex, b.cfg.NodeID))
		}
		if full {
			break
		}
	}
	res.Status = PullFound
	res.Suggestion = b.route(req, isLeader, LocalServed, rng, res.NextOffset, res.NextOffset >= rng.Max)
	return res, nil
}

// collect appends the messages of loc at or after res.NextOffset. It reports
// whether a limit was reached.
func collect(data []byte, loc replica.Location, req *PullRequest, res *PullResult, bytes *int) (bool, error) {
	batch, err := raftlog.ParseReadBatch(data)
	if err != nil {
		return false, err
	}
	skip := 0
	offset := loc.Base
	var ordinal uint32
	full := false
	err = batch.Each(func(i int, rv *raftlog.RequestView) bool {
		first := ordinal
		ordinal += uint32(rv.Count)
		if skip < len(loc.Skip) && loc.Skip[skip] == uint32(i) {
			skip++
			return true
		}
		if rv.Topic != req.Topic {
			return true
		}
		rv.Messages(func(j int, m *raftlog.MessageView) bool {
			if m.Queue != uint32(req.Queue) {
				return true
			}
			off := offset
			offset++
			if off < res.NextOffset {
				return true
			}
			if len(res.Messages) >= req.MaxMessages || (len(res.Messages) > 0 && *bytes+len(m.Body) > req.MaxBytes) {
				full = true
				return false
			}
			res.Messages = append(res.Messages, Message{
				Topic:      req.Topic,
				Queue:      req.Queue,
				Offset:     off,
				ID:         raftlog.MessageID(loc.LogIndex, first+uint32(j)),
				Key:        string(m.Key),
				Tag:        string(m.Tag),
				Properties: m.Properties(),
				Body:       m.Body,
				Timestamp:  m.Timestamp,
			})
			*bytes += len(m.Body)
			res.NextOffset = off + 1
			return true
		})
		return !full
	})
	if err == nil && offset != loc.Base+uint64(loc.Count) && !full {
		err = fmt.Errorf("entry %d holds %d messages of queue %d from offset %d, the index says %d", loc.LogIndex, offset-loc.Base, req.Queue, loc.Base, loc.Count)
	}
	return full, err
}
