package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/api"
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	Topic string
	// Group is the consumer group; its committed offsets say where to resume.
	// Empty makes a reader that belongs to no group: it reads every queue
	// (or Queues) from Start or From and commits nothing, so two readers,
	// or the same one run twice, each see everything.
	Group string
	// From is where a queue starts that has no committed offset (a reader's:
	// that Start does not name): "earliest" (default) or "latest".
	From string
	// Start, for a reader (no Group), is the offset each named queue starts
	// at, kept within what the queue holds.
	Start map[int32]uint64
	// Queues, when set, pins the consumer to these queues instead of taking
	// part in the group's queue assignment.
	Queues []int32
	// FollowerReads lets the consumer pull from the node each response
	// suggests (default true via DefaultConsumerConfig). When false every
	// pull goes to the leader.
	FollowerReads bool
	// MemberID names this consumer in its group; random when empty.
	MemberID string
	// MaxMessages and MaxBytes bound one pull of one queue.
	MaxMessages uint32
	MaxBytes    uint32
	// Wait is how long a pull may wait on the broker for new messages.
	Wait time.Duration
	// CommitInterval is how often processed offsets are committed; 0 commits
	// only on Commit and Close.
	CommitInterval time.Duration
	// OnSkipped, when set, is called from Poll when the group's retention
	// deleted offsets [from, to) of a queue before this consumer read them;
	// the consumer continues at to.
	OnSkipped func(queue int32, from, to uint64)
	// Tags ("TagA || TagB"; "" or "*": all) or SQL (RocketMQ's SQL92 over
	// properties, the tag as TAGS), at most one: the broker serves only
	// matching messages and the committed offsets move past the others.
	Tags string
	SQL  string
	// Broadcast makes this consumer a broadcasting member (RocketMQ's
	// BROADCASTING): it reads every queue of the topic, whatever the other
	// members do, and commits its own offsets under its MemberID, so a
	// restart with the same MemberID resumes where it left off.
	Broadcast bool
}

// DefaultConsumerConfig returns the defaults for a topic and group.
func DefaultConsumerConfig(topic, group string) ConsumerConfig {
	return ConsumerConfig{Topic: topic, Group: group, From: "earliest", FollowerReads: true,
		MaxMessages: 512, MaxBytes: 4 << 20, Wait: time.Second, CommitInterval: time.Second}
}

// Record is a consumed message, the node that served it and why the
// consumer's next pull of its queue goes where it goes.
type Record struct {
	*api.Message
	ServedBy       string
	ServedByLeader bool
	// Next is the node the response suggested for the next pull ("" when
	// it named none) and Reason why, as ReasonName gives it.
	Next   string
	Reason string
}

// ReasonName is a suggestion reason's stable name, as in /metrics
// (raftmq_pull_suggestions_total{reason}): "leader_loaded", "follower_serves", ...
func ReasonName(r api.SuggestionReason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "SUGGESTION_REASON_"))
}

type queueState struct {
	next      uint64
	delivered uint64 // next offset after the last message handed to the app
	processed uint64 // delivered as of the previous Poll: safe to commit
	committed uint64
	hasCommit bool
	node      string // client address to pull from; "" = leader
	maxSeen   uint64 // max_offset from the last pull
}

// Consumer reads a topic at least once. Offsets of the messages returned by
// one Poll count as processed when the next Poll (or Commit, or Close)
// starts; only processed offsets are committed.
type Consumer struct {
	c   *Client
	cfg ConsumerConfig

	mu          sync.Mutex
	queues      map[int32]*queueState
	generation  uint64
	nextJoin    time.Time
	lastCommit  time.Time
	heartbeat   time.Duration
	order       []int32
	closed      bool
	servedStats map[string]int
	reasonStats map[string]int
	filtered    int
}

// NewConsumer creates a consumer; it joins the group (unless Queues pins
// it) on the first Poll.
func (c *Client) NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	d := DefaultConsumerConfig(cfg.Topic, cfg.Group)
	if cfg.Topic == "" {
		return nil, errors.New("consumer: topic is required")
	}
	if cfg.Group == "" && cfg.Broadcast {
		return nil, errors.New("consumer: a broadcasting consumer needs a group (its member's offsets are kept under it)")
	}
	if cfg.Group != "" && len(cfg.Start) > 0 {
		return nil, errors.New("consumer: Start positions a reader (no group); a group resumes at its committed offsets (ResetGroup moves them)")
	}
	if cfg.From == "" {
		cfg.From = d.From
	}
	if cfg.From != "earliest" && cfg.From != "latest" {
		return nil, fmt.Errorf("consumer: from %q: want earliest or latest", cfg.From)
	}
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = d.MaxMessages
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = d.MaxBytes
	}
	if cfg.Wait <= 0 {
		cfg.Wait = d.Wait
	}
	if cfg.MemberID == "" {
		cfg.MemberID = randomID("c-")
	}
	if cfg.Tags != "" && cfg.SQL != "" {
		return nil, errors.New("consumer: a tag expression and a SQL92 filter cannot both be set")
	}
	heartbeat := time.Second
	if cfg.Group == "" {
		heartbeat = 10 * time.Second // a reader only rereads the topic's queues
	}
	return &Consumer{c: c, cfg: cfg, queues: map[int32]*queueState{}, heartbeat: heartbeat, servedStats: map[string]int{}, reasonStats: map[string]int{}}, nil
}

// MemberID is this consumer's id in its group.
func (cn *Consumer) MemberID() string { return cn.cfg.MemberID }

// Assigned returns the queues this consumer currently reads, sorted.
func (cn *Consumer) Assigned() []int32 {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return append([]int32{}, cn.order...)
}

// Positions returns the next offset to read of every assigned queue.
func (cn *Consumer) Positions() map[int32]uint64 {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	out := map[int32]uint64{}
	for q, s := range cn.queues {
		out[q] = s.next
	}
	return out
}

// ServedBy counts the messages delivered so far by serving node id.
func (cn *Consumer) ServedBy() map[string]int {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	out := map[string]int{}
	for k, v := range cn.servedStats {
		out[k] = v
	}
	return out
}

// Reasons counts the messages delivered so far by the reason of the
// suggestion that came with them (ReasonName).
func (cn *Consumer) Reasons() map[string]int {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	out := map[string]int{}
	for k, v := range cn.reasonStats {
		out[k] = v
	}
	return out
}

// join refreshes group membership (or pins the configured queues) and
// (re)loads start offsets of newly assigned queues.
func (cn *Consumer) join(ctx context.Context) error {
	var assigned []int32
	if len(cn.cfg.Queues) > 0 {
		assigned = cn.cfg.Queues
	} else if cn.cfg.Group == "" {
		ti, err := cn.c.DescribeTopic(ctx, cn.cfg.Topic)
		if err != nil {
			return fmt.Errorf("describe topic: %w", err)
		}
		for _, q := range ti.QueueInfo {
			assigned = append(assigned, q.Queue)
		}
	} else {
		r, err := call(ctx, cn.c, func(ctx context.Context, cl api.BrokerClient) (*api.JoinGroupResponse, error) {
			return cl.JoinGroup(ctx, &api.JoinGroupRequest{Group: cn.cfg.Group, MemberId: cn.cfg.MemberID, Topics: []string{cn.cfg.Topic}, Broadcast: cn.cfg.Broadcast})
		})
		if err != nil {
			return fmt.Errorf("join group %s: %w", cn.cfg.Group, err)
		}
		if r.HeartbeatIntervalMs > 0 {
			cn.heartbeat = time.Duration(r.HeartbeatIntervalMs) * time.Millisecond
		}
		for _, a := range r.Assignments {
			if a.Topic == cn.cfg.Topic {
				assigned = append(assigned, a.Queues...)
			}
		}
		cn.generation = r.Generation
	}
	want := map[int32]bool{}
	for _, q := range assigned {
		want[q] = true
	}
	cn.mu.Lock()
	var lost []*api.QueueOffset
	for q, s := range cn.queues {
		if !want[q] {
			if s.processed > s.committed || !s.hasCommit {
				lost = append(lost, &api.QueueOffset{Topic: cn.cfg.Topic, Queue: q, Offset: s.processed})
			}
			delete(cn.queues, q)
		}
	}
	var added []int32
	for q := range want {
		if cn.queues[q] == nil {
			added = append(added, q)
		}
	}
	cn.mu.Unlock()
	if len(lost) > 0 {
		// Hand over cleanly: commit what was processed of queues that moved.
		if err := cn.commitOffsets(ctx, lost); err != nil {
			return fmt.Errorf("commit offsets of revoked queues: %w", err)
		}
	}
	if len(added) > 0 {
		committed, err := cn.fetchOffsets(ctx)
		if err != nil {
			return fmt.Errorf("fetch offsets: %w", err)
		}
		var ti *api.TopicInfo
		for _, q := range added {
			s := &queueState{}
			if o, ok := committed[q]; ok {
				s.next, s.committed, s.hasCommit = o, o, true
			} else {
				if ti == nil {
					if ti, err = cn.c.DescribeTopic(ctx, cn.cfg.Topic); err != nil {
						return fmt.Errorf("describe topic: %w", err)
					}
				}
				if q < 0 || int(q) >= len(ti.QueueInfo) {
					return fmt.Errorf("queue %d: topic %s has %d queues", q, cn.cfg.Topic, len(ti.QueueInfo))
				}
				qi := ti.QueueInfo[q]
				s.next = qi.MinOffset
				if start, ok := cn.cfg.Start[q]; ok {
					s.next = min(max(start, qi.MinOffset), qi.MaxOffset)
				} else if cn.cfg.From == "latest" {
					s.next = qi.MaxOffset
				}
			}
			s.delivered, s.processed = s.next, s.next
			cn.mu.Lock()
			cn.queues[q] = s
			cn.mu.Unlock()
		}
	}
	cn.mu.Lock()
	cn.order = cn.order[:0]
	for q := range cn.queues {
		cn.order = append(cn.order, q)
	}
	sort.Slice(cn.order, func(i, j int) bool { return cn.order[i] < cn.order[j] })
	cn.nextJoin = time.Now().Add(cn.heartbeat)
	cn.mu.Unlock()
	return nil
}

// Poll returns the next messages of the assigned queues, waiting up to the
// configured Wait when there are none. Calling Poll marks everything returned
// by the previous Poll as processed.
func (cn *Consumer) Poll(ctx context.Context) ([]Record, error) {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return nil, errors.New("consumer is closed")
	}
	for _, s := range cn.queues {
		s.processed = s.delivered
	}
	needJoin := time.Now().After(cn.nextJoin)
	cn.mu.Unlock()
	if needJoin {
		if err := cn.join(ctx); err != nil {
			return nil, err
		}
	}
	if cn.cfg.CommitInterval > 0 && time.Since(cn.lastCommit) >= cn.cfg.CommitInterval {
		if err := cn.Commit(ctx); err != nil {
			return nil, err
		}
	}
	queues := cn.Assigned()
	if len(queues) == 0 {
		select {
		case <-time.After(min(cn.cfg.Wait, cn.heartbeat)):
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	}
	// One pull per queue, all at once; each may long-poll on its node.
	type result struct {
		q    int32
		recs []Record
		err  error
	}
	// Once one queue has delivered, the long polls of the others are cut
	// short: an idle queue must not hold back a busy one. A cut-short pull
	// changes no position, so nothing is skipped.
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make(chan result, len(queues))
	for _, q := range queues {
		go func(q int32) {
			recs, err := cn.pullQueue(pctx, q)
			out <- result{q, recs, err}
		}(q)
	}
	var recs []Record
	var firstErr error
	for range queues {
		r := <-out
		recs = append(recs, r.recs...)
		if len(r.recs) > 0 {
			cancel()
		}
		if r.err != nil && firstErr == nil && pctx.Err() == nil {
			firstErr = r.err
		}
	}
	if len(recs) > 0 {
		return recs, nil
	}
	return nil, firstErr
}

func (cn *Consumer) pullQueue(ctx context.Context, q int32) ([]Record, error) {
	cn.mu.Lock()
	s := cn.queues[q]
	if s == nil {
		cn.mu.Unlock()
		return nil, nil
	}
	offset, node := s.next, s.node
	cn.mu.Unlock()
	if !cn.cfg.FollowerReads {
		node = ""
	}
	req := &api.PullRequest{Topic: cn.cfg.Topic, Queue: q, Offset: offset, MaxMessages: cn.cfg.MaxMessages,
		MaxBytes: cn.cfg.MaxBytes, WaitMs: uint32(cn.cfg.Wait.Milliseconds()), ConsumerId: cn.cfg.MemberID}
	req.FilterType, req.Filter = cn.filter()
	var r *api.PullResponse
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		r, err = cn.pullAt(ctx, node, req)
		if err == nil {
			break
		}
		if !Retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		node = "" // any error: fall back to the leader
	}
	if err != nil {
		return nil, err
	}
	var skippedTo uint64
	defer func() { // after the unlock below
		if skippedTo > offset && cn.cfg.OnSkipped != nil {
			cn.cfg.OnSkipped(q, offset, skippedTo)
		}
	}()
	cn.mu.Lock()
	defer cn.mu.Unlock()
	s = cn.queues[q]
	if s == nil || s.next != offset { // revoked or moved meanwhile
		return nil, nil
	}
	s.node = ""
	if sg := r.Suggestion; sg != nil && sg.Address != "" && cn.cfg.FollowerReads {
		s.node = sg.Address
	}
	s.maxSeen = r.MaxOffset
	switch r.Status {
	case api.PullStatus_PULL_STATUS_OFFSET_MOVED:
		s.next, s.delivered, skippedTo = r.NextOffset, r.NextOffset, r.NextOffset
		return nil, nil
	case api.PullStatus_PULL_STATUS_FOUND:
		recs := make([]Record, len(r.Messages))
		next, reason := r.GetSuggestion().GetNodeId(), ReasonName(r.GetSuggestion().GetCode())
		for i, m := range r.Messages {
			recs[i] = Record{Message: m, ServedBy: r.ServedBy, ServedByLeader: r.ServedByLeader, Next: next, Reason: reason}
		}
		cn.filtered += int(r.Filtered)
		cn.servedStats[r.ServedBy] += len(recs)
		cn.reasonStats[reason] += len(recs)
		s.next, s.delivered = r.NextOffset, r.NextOffset
		return recs, nil
	}
	return nil, nil
}

func (cn *Consumer) pullAt(ctx context.Context, node string, req *api.PullRequest) (*api.PullResponse, error) {
	if node == "" {
		var r *api.PullResponse
		err := cn.c.doSized(ctx, 0, cn.cfg.Wait, func(ctx context.Context, cl api.BrokerClient) error {
			var err error
			r, err = cl.Pull(ctx, req)
			return err
		})
		return r, err
	}
	cl, err := cn.c.conn(node)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, cn.c.attemptTimeout(0, cn.cfg.Wait))
	defer cancel()
	return cl.Pull(actx, req)
}

// Commit commits the processed offsets (those returned before the last Poll).
func (cn *Consumer) Commit(ctx context.Context) error {
	return cn.commit(ctx, false)
}

func (cn *Consumer) commit(ctx context.Context, all bool) error {
	cn.mu.Lock()
	var offs []*api.QueueOffset
	for q, s := range cn.queues {
		if all {
			s.processed = s.delivered
		}
		if s.processed > s.committed || (!s.hasCommit && s.processed > 0) {
			offs = append(offs, &api.QueueOffset{Topic: cn.cfg.Topic, Queue: q, Offset: s.processed})
		}
	}
	cn.lastCommit = time.Now()
	cn.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	if err := cn.commitOffsets(ctx, offs); err != nil {
		return fmt.Errorf("commit offsets: %w", err)
	}
	cn.mu.Lock()
	for _, o := range offs {
		if s := cn.queues[o.Queue]; s != nil && o.Offset > s.committed {
			s.committed, s.hasCommit = o.Offset, true
		}
	}
	cn.mu.Unlock()
	return nil
}

// Seek moves a queue back (or forward) to offset: messages from offset on
// count as not delivered and will be pulled again. A queue this consumer does
// not hold is ignored.
func (cn *Consumer) Seek(q int32, offset uint64) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	s := cn.queues[q]
	if s == nil {
		return
	}
	s.next = offset
	s.delivered = min(s.delivered, offset)
	s.processed = min(s.processed, offset)
}

// CaughtUp reports whether every assigned queue has been read up to the
// given end offsets (queue -> offset, e.g. from DescribeTopic).
func (cn *Consumer) CaughtUp(end map[int32]uint64) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if len(cn.queues) == 0 {
		return false
	}
	for q, s := range cn.queues {
		if s.next < end[q] {
			return false
		}
	}
	return true
}

// Close commits everything delivered (the caller has processed what it got)
// and leaves the group so its queues move at once.
func (cn *Consumer) Close(ctx context.Context) error {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return nil
	}
	cn.closed = true
	cn.mu.Unlock()
	err := cn.commit(ctx, true)
	if len(cn.cfg.Queues) == 0 && cn.cfg.Group != "" {
		_, lerr := call(ctx, cn.c, func(ctx context.Context, cl api.BrokerClient) (*api.LeaveGroupResponse, error) {
			return cl.LeaveGroup(ctx, &api.LeaveGroupRequest{Group: cn.cfg.Group, MemberId: cn.cfg.MemberID})
		})
		if err == nil {
			err = lerr
		}
	}
	return err
}
