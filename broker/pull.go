package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/procfs"

	"github.com/raftmq/raftmq/broker/delay"
	"github.com/raftmq/raftmq/broker/entry"
	"github.com/raftmq/raftmq/broker/filter"
	"github.com/raftmq/raftmq/broker/route"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
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
	// FilterType ("TAG", the default, or "SQL92") and Filter select the
	// messages served (package filter); the others are skipped here and
	// NextOffset moves past them.
	FilterType string
	Filter     string
	// ReadsOnFollowers: the consumer reads from a follower whenever one
	// has the data, at the tail and behind it (route.Input.ReadsOnFollowers;
	// the RocketMQ adapter's pulls).
	ReadsOnFollowers bool

	flt     *filter.Filter // compiled by Pull
	scanned int            // body bytes of the messages filtered out so far
}

// Message is a stored message as a consumer sees it (package entry reads
// it out of the log).
type Message = entry.Message

// PullResult is the answer to a pull, with the suggestion for the next one.
type PullResult struct {
	Status         PullStatus
	Messages       []Message
	NextOffset     uint64
	MinOffset      uint64
	MaxOffset      uint64
	ServedBy       string
	ServedByLeader bool
	Suggestion     route.Suggestion
	// Filtered counts the messages skipped because they did not match the
	// request's filter. A pull whose window held only such messages is
	// PullFound with no messages and NextOffset past them.
	Filtered int
}

// Pull limits.
const (
	DefaultPullMessages = 256
	MaxPullMessages     = 8192
	DefaultPullBytes    = 4 << 20
	MaxPullBytes        = 64 << 20
	MaxPullWait         = 30 * time.Second
	// maxScanFactor bounds the bodies a filtered pull skips, as a multiple
	// of its byte limit; the next pull continues past them.
	maxScanFactor = 4
)

// Pull serves committed messages of one queue from this node's log. It never
// returns anything this node has not applied, so never uncommitted data.
func (b *Broker) Pull(ctx context.Context, req PullRequest) (PullResult, error) {
	b.pace.busy()
	if err := store.ValidateName("topic", req.Topic); err != nil {
		return PullResult{}, storeErr(err)
	}
	if err := delay.RefuseTopic(req.Topic); err != nil {
		return PullResult{}, err
	}
	if err := refuseHalfTopic(req.Topic); err != nil {
		return PullResult{}, err
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
	flt, err := filter.Compile(req.FilterType, req.Filter)
	if err != nil {
		return PullResult{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	req.flt = flt
	if err := b.checkReadable(req.Topic); err != nil {
		return PullResult{}, err
	}
	if b.closed.Load() {
		return PullResult{}, ErrShutdown
	}
	isLeader := b.node.Role() == election.Leader
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
		isLeader = b.node.Role() == election.Leader
	}
}

func (b *Broker) account(res *PullResult) {
	role, served := "follower", &b.served.follower
	if res.ServedByLeader {
		role, served = "leader", &b.served.leader
	}
	if n := len(res.Messages); n > 0 {
		b.m.pullMessages.WithLabelValues(role).Add(float64(n))
		served.Add(uint64(n))
		b.m.ops.served(res.Messages)
		total := 0
		for i := range res.Messages {
			total += len(res.Messages[i].Body)
		}
		b.load.ObservePull(n, total)
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

// pullOnce looks the offset up in the index once, reads what this node
// holds, gathers the routing facts (routeInput) and lets the policy
// (Suggest) decide the answer and the suggestion.
func (b *Broker) pullOnce(req *PullRequest, isLeader bool) (PullResult, error) {
	res := PullResult{ServedBy: b.cfg.NodeID, ServedByLeader: isLeader, NextOffset: req.Offset}
	local, why := route.LocalServed, ""
	var locs []store.Location
	var rng store.QueueRange
	var lerr error
	// Damage the log or state machine found since the last state round
	// counts at once: raft may just have replaced entries this node
	// applied, which its index still names.
	b.checkDamage()
	if d, ok := b.Damaged(); ok {
		local, why = route.LocalDamaged, damagedWhy(fmt.Sprintf("node %s is damaged at log index %d", b.cfg.NodeID, d.Index))
	} else {
		// One entry more than messages asked for: each entry holds at least
		// one message of the queue, so the entry of the consumer's next
		// offset is among them whenever the queue has it.
		locs, rng, lerr = b.fsm.Locate(req.Topic, req.Queue, req.Offset, req.MaxMessages+1)
		switch {
		case errors.Is(lerr, store.ErrUnknownTopic):
			local = route.LocalNoTopic
		case errors.Is(lerr, store.ErrIndexDamaged):
			if errors.Is(lerr, store.ErrIndexRebuilding) { // the store logged it once
				b.log.Debug("queue index being rebuilt", "topic", req.Topic, "queue", req.Queue, "offset", req.Offset)
			} else {
				b.log.Error("queue index damaged", "topic", req.Topic, "queue", req.Queue, "offset", req.Offset, "error", lerr)
			}
			local, why = route.LocalDamaged, lerr.Error()+"; retry on another node"
		case lerr != nil:
			return PullResult{}, b.replicaErr(lerr)
		case req.Offset < rng.Min:
			local = route.LocalBelowMin
		case req.Offset < rng.Held:
			// Indexed on the nodes that applied it, not here (this node
			// installed a snapshot): one of them serves it.
			local, why = route.LocalNotHeld, fmt.Sprintf("offset %d of %s/%d is held by no reachable, caught-up node (node %s indexes it from %d on)", req.Offset, req.Topic, req.Queue, b.cfg.NodeID, rng.Held)
		case req.Offset > rng.Max:
			local = route.LocalPastEnd
		case req.Offset < rng.Max:
			var err error
			if local, why, err = b.read(locs, req, &res); err != nil {
				return PullResult{}, err
			}
		}
	}
	d := route.Suggest(b.routeInput(req, isLeader, local, rng, res.NextOffset, locs))
	res.Suggestion = d.Suggestion
	if local != route.LocalDamaged {
		res.MinOffset, res.MaxOffset = rng.Min, rng.Max
	}
	switch d.Answer {
	case route.AnswerServe:
		res.Status = PullFound
		if req.Offset == rng.Max {
			res.Status = PullNoNew
		}
	case route.AnswerRetryElsewhere:
		res.Status = PullRetryElsewhere
	case route.AnswerOffsetMoved:
		res.Status, res.NextOffset = PullOffsetMoved, rng.Min
	case route.AnswerNotFound:
		return PullResult{}, b.replicaErr(lerr)
	case route.AnswerOutOfRange:
		return PullResult{}, fmt.Errorf("%w: offset %d of %s/%d is past the end of the queue (next offset %d)", ErrOutOfRange, req.Offset, req.Topic, req.Queue, rng.Max)
	default:
		return PullResult{}, fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	return res, nil
}

// read collects the messages of locs into res. It stops early, serving what
// it has, at an entry it cannot read; when that is the first, it reports
// what it found (the body is not held here, or damaged) and why.
func (b *Broker) read(locs []store.Location, req *PullRequest, res *PullResult) (route.Local, string, error) {
	bytes := 0
	for _, loc := range locs {
		e, err := b.rlog.Read(loc.LogIndex)
		if err != nil {
			if res.NextOffset > req.Offset { // delivered or filtered some: serve that
				break
			}
			if errors.Is(err, raftlog.ErrBelowFloor) {
				// This node dropped the body (retention, or its log was
				// replaced by a snapshot): a node that holds it serves it.
				return route.LocalNotHeld, fmt.Sprintf("the message bodies at log index %d are not held by the leader nor by a reachable, caught-up follower", loc.LogIndex), nil
			}
			if errors.Is(err, raftlog.ErrCorrupt) {
				// Damaged here (the log reported it, and the node is
				// marked damaged within a state period): never Internal,
				// the other nodes hold the entry.
				b.log.Error("damaged log entry", "index", loc.LogIndex, "error", err)
				return route.LocalDamaged, damagedWhy(fmt.Sprintf("log entry %d is damaged on node %s", loc.LogIndex, b.cfg.NodeID)), nil
			}
			return route.LocalServed, "", fmt.Errorf("read log entry %d: %w", loc.LogIndex, err)
		}
		full, err := collect(e, loc, req, res, &bytes)
		if err != nil {
			b.log.Error("corrupt log entry", "index", loc.LogIndex, "error", err)
			if res.NextOffset > req.Offset {
				break
			}
			return route.LocalDamaged, damagedWhy(fmt.Sprintf("log entry %d does not match this node's index on node %s", loc.LogIndex, b.cfg.NodeID)), nil
		}
		if full {
			break
		}
	}
	return route.LocalServed, "", nil
}

// damagedWhy is the error a damaged node answers when it names no other
// node (the leader: it hands leadership over); the SDK retries it.
func damagedWhy(what string) string {
	return what + "; retry on a healthy node (this leader hands leadership to one)"
}

// routeInput gathers the facts Suggest decides from. local is what this
// node found; rng the queue's range here (zero when the topic is unknown);
// next the consumer's next offset; locs the entries the pull looked up, the
// one holding next among them (pullOnce).
func (b *Broker) routeInput(req *PullRequest, isLeader bool, local route.Local, rng store.QueueRange, next uint64, locs []store.Location) route.Input {
	in := route.Input{
		SelfIsLeader:     isLeader,
		Self:             b.peerView(b.cfg.NodeID),
		Local:            local,
		AtTail:           local == route.LocalServed && next >= rng.Max,
		ColdBytes:        b.cfg.ColdReadBytes,
		MaxLag:           b.cfg.MaxFollowerLag,
		ReadsOnFollowers: req.ReadsOnFollowers,
		Topic:            req.Topic,
		Queue:            req.Queue,
	}
	if (local == route.LocalServed || local == route.LocalNotHeld) && next < rng.Max {
		if local == route.LocalServed {
			in.BehindBytes = (rng.Max - next) * b.load.AvgMessageBytes()
		}
		for _, l := range locs {
			if next >= l.Base && next < l.Base+uint64(l.Count) {
				in.NeedIndex = l.LogIndex
				break
			}
		}
	}
	if isLeader {
		if in.NeedIndex == 0 {
			in.NeedIndex = in.Self.Applied
		}
		servers, _ := b.node.Servers()
		for _, s := range servers {
			if s.ID != b.cfg.NodeID {
				in.Followers = append(in.Followers, b.peerView(s.ID))
			}
		}
		return in
	}
	if id := b.node.LeaderID(); id != "" {
		in.Leader = b.peerView(id)
		if p, ok := b.view.Get(id); ok && p.State.Damaged {
			in.Leader = route.NodeView{} // a damaged leader is handing over: no one to send readers to
		} else if ok {
			if p.State.Applied > in.Self.Applied {
				in.SelfLag = p.State.Applied - in.Self.Applied
			}
			if in.NeedIndex == 0 {
				in.NeedIndex = p.State.Applied
			}
		}
	}
	return in
}

// collect appends the messages of loc in e at or after res.NextOffset. It reports
// whether a limit was reached.
func collect(e raftlog.Entry, loc store.Location, req *PullRequest, res *PullResult, bytes *int) (bool, error) {
	full := false
	err := entry.Read(e, req.Topic, req.Queue, loc, func(s entry.Stored) bool {
		m := s.View
		if s.Offset < res.NextOffset {
			return true
		}
		var props map[string]string
		if req.flt.NeedsProperties() {
			props = m.Properties()
		}
		if !req.flt.Match(string(m.Tag), props) {
			res.Filtered++
			res.NextOffset = s.Offset + 1
			// Skipping costs reading: a pull reads at most
			// maxScanFactor times its byte limit of skipped bodies.
			req.scanned += len(m.Body)
			if req.scanned > maxScanFactor*req.MaxBytes {
				full = true
				return false
			}
			return true
		}
		if props == nil {
			props = m.Properties()
		}
		if len(res.Messages) >= req.MaxMessages || (len(res.Messages) > 0 && *bytes+len(m.Body) > req.MaxBytes) {
			full = true
			return false
		}
		res.Messages = append(res.Messages, Message{
			Topic:      req.Topic,
			Queue:      req.Queue,
			Offset:     s.Offset,
			ID:         raftlog.MessageID(loc.LogIndex, s.Ordinal),
			Key:        string(m.Key),
			Tag:        string(m.Tag),
			Properties: props,
			Body:       m.Body,
			Timestamp:  m.Timestamp,
		})
		*bytes += len(m.Body)
		res.NextOffset = s.Offset + 1
		return true
	})
	return full, err
}

// defaultColdReadBytes is 40% of physical memory, as RocketMQ's
// accessMessageInMemoryMaxRatio, or 1 GiB when memory cannot be read.
func defaultColdReadBytes() uint64 {
	if mi, err := procfs.NewDefaultFS(); err == nil {
		if m, err := mi.Meminfo(); err == nil && m.MemTotalBytes != nil {
			return *m.MemTotalBytes * 40 / 100
		}
	}
	return 1 << 30
}
