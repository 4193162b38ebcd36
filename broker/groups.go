package broker

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/broker/groups"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// Consumer group membership is soft state on the leader (package groups):
// members heartbeat with JoinGroup, the leader assigns each queue of a
// topic to exactly one member, and a member silent for SessionTimeout is
// dropped. Committed offsets are not soft: they go through Raft.

// Assignment is the queues of one topic given to one member (package
// groups keeps the members and assigns the queues).
type Assignment = groups.Assignment

// JoinResult is a member's current assignment.
type JoinResult struct {
	Generation        uint64
	Assignments       []Assignment
	HeartbeatInterval time.Duration
	SessionTimeout    time.Duration
}

// JoinGroup registers or refreshes a member and returns its assignment
// (leader only).
func (b *Broker) JoinGroup(ctx context.Context, group, memberID string, topics []string) (JoinResult, error) {
	return b.joinGroup(ctx, group, memberID, topics, false)
}

func (b *Broker) joinGroup(ctx context.Context, group, memberID string, topics []string, broadcast bool) (JoinResult, error) {
	if err := store.ValidateName("group", group); err != nil {
		return JoinResult{}, storeErr(err)
	}
	if memberID == "" || len(memberID) > 255 {
		return JoinResult{}, invalid("member id must be 1..255 bytes")
	}
	if len(topics) == 0 {
		return JoinResult{}, invalid("join group %q: no topics", group)
	}
	for _, t := range topics {
		if err := store.ValidateName("topic", t); err != nil {
			return JoinResult{}, storeErr(err)
		}
		if b.fsm.QueueCount(t) == 0 && t != mq.RetryTopic(group) {
			return JoinResult{}, fmt.Errorf("%w: topic %q", ErrNotFound, t)
		}
	}
	if err := b.awaitLeader(ctx); err != nil {
		return JoinResult{}, err
	}
	if err := b.ensureRetryTopic(ctx, group, topics); err != nil {
		return JoinResult{}, err
	}
	gen, assigned, err := b.groups.Join(group, memberID, topics, broadcast, time.Now())
	if err != nil {
		return JoinResult{}, err
	}
	return JoinResult{
		Generation:        gen,
		Assignments:       assigned,
		HeartbeatInterval: b.cfg.HeartbeatInterval,
		SessionTimeout:    b.cfg.SessionTimeout,
	}, nil
}

// LeaveGroup removes a member at once (leader only).
func (b *Broker) LeaveGroup(ctx context.Context, group, memberID string) error {
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	b.groups.Leave(group, memberID)
	return nil
}

// GroupQueue is one queue's state in a group.
type GroupQueue struct {
	Topic     string
	Queue     int32
	Committed int64 // -1 when nothing is committed
	MaxOffset uint64
	Lag       uint64
	Member    string
}

// GroupMember is one live member.
type GroupMember struct {
	ID          string
	Assignments []Assignment
	LastSeen    time.Time
}

// GroupInfo describes a consumer group.
type GroupInfo struct {
	Group      string
	Generation uint64
	Members    []GroupMember
	Queues     []GroupQueue

	// Broadcast: every member reads every queue; Queues then has one row per
	// member and queue, with that member's own offset.
	Broadcast bool
	Settings  GroupSettings
}

// ListGroups lists groups known by committed offsets, settings or live members
// (leader only: it holds the live members).
func (b *Broker) ListGroups(ctx context.Context) ([]string, error) {
	if err := b.awaitLeader(ctx); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, g := range b.fsm.Groups() {
		g, _, _ = store.SplitMemberKey(g) // a broadcasting member's offsets
		set[g] = true
	}
	for _, g := range b.fsm.SettingsGroups() {
		set[g] = true
	}
	for _, g := range b.groups.Names() {
		set[g] = true
	}
	out := make([]string, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out, nil
}

// DescribeGroup returns members (as the leader knows them), committed offsets
// and lag per queue (leader only).
func (b *Broker) DescribeGroup(ctx context.Context, group string) (GroupInfo, error) {
	if err := b.awaitLeader(ctx); err != nil {
		return GroupInfo{}, err
	}
	if err := store.ValidateName("group", group); err != nil {
		return GroupInfo{}, storeErr(err)
	}
	info := GroupInfo{Group: group, Settings: b.GroupSettings(group)}
	owner := map[string]string{} // topic/queue -> member
	topics := map[string]bool{}
	for _, t := range b.fsm.GroupTopics(group) {
		topics[t] = true
	}
	if v, ok := b.groups.Describe(group, time.Now()); ok {
		info.Generation = v.Generation
		info.Broadcast = v.Broadcast
		for _, m := range v.Members {
			info.Members = append(info.Members, GroupMember{ID: m.ID, Assignments: m.Assignments, LastSeen: m.LastSeen})
			for _, t := range m.Topics {
				topics[t] = true
			}
			for _, a := range m.Assignments {
				for _, q := range a.Queues {
					owner[a.Topic+"/"+strconv.Itoa(int(q))] = m.ID
				}
			}
		}
	}
	if info.Broadcast || len(info.Members) == 0 && len(b.fsm.GroupTopics(group)) == 0 && b.hasMemberOffsets(group) {
		return b.describeBroadcast(info), nil
	}
	if _, set := b.fsm.MaxReconsumeTimes(group); len(topics) == 0 && !set {
		return GroupInfo{}, fmt.Errorf("%w: consumer group %q has no members and no committed offsets", ErrNotFound, group)
	}
	sort.Slice(info.Members, func(i, j int) bool { return info.Members[i].ID < info.Members[j].ID })
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		ti, err := b.fsm.Topic(t)
		if err != nil {
			continue
		}
		offs := b.fsm.Offsets(group, t)
		for q, rng := range ti.Queues {
			gq := GroupQueue{Topic: t, Queue: int32(q), Committed: -1, MaxOffset: rng.Max, Member: owner[t+"/"+strconv.Itoa(q)]}
			start := rng.Min
			if o, ok := offs[int32(q)]; ok {
				gq.Committed = int64(o)
				start = o
			}
			if rng.Max > start {
				gq.Lag = rng.Max - start
			}
			info.Queues = append(info.Queues, gq)
		}
	}
	return info, nil
}

// CommitOffsets stores a group's offsets through Raft (leader only).
func (b *Broker) CommitOffsets(ctx context.Context, group string, offsets []store.OffsetEntry) error {
	if err := store.ValidateName("group", group); err != nil {
		return storeErr(err)
	}
	return b.commitOffsets(ctx, group, offsets)
}

// commitOffsets stores the offsets of key: a group, or a broadcasting
// member (store.MemberKey).
func (b *Broker) commitOffsets(ctx context.Context, group string, offsets []store.OffsetEntry) error {
	if len(offsets) == 0 {
		return nil
	}
	// Checked first: the list is the Raft entry, and validating a huge one
	// would cost more than encoding it.
	if n := len(store.EncodeCommitOffsets(group, offsets)); n > b.cfg.MaxRequestBytes {
		return fmt.Errorf("%w: a commit of %d offsets encodes to %d bytes, the limit (--max-request-bytes) is %d; commit fewer offsets per call",
			ErrTooLarge, len(offsets), n, b.cfg.MaxRequestBytes)
	}
	for _, o := range offsets {
		ti, err := b.fsm.Topic(o.Topic)
		if err != nil {
			return b.replicaErr(err)
		}
		if o.Queue < 0 || int(o.Queue) >= len(ti.Queues) {
			return invalid("queue %d of topic %q with %d queues", o.Queue, o.Topic, len(ti.Queues))
		}
		if o.Offset > ti.Queues[o.Queue].Max {
			return fmt.Errorf("%w: commit %d for %s/%d, whose next offset is %d", ErrOutOfRange, o.Offset, o.Topic, o.Queue, ti.Queues[o.Queue].Max)
		}
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	return b.replicaErr(b.w.CommitOffsets(ctx, group, offsets))
}

// FetchOffsets returns a group's committed offsets for a topic from this
// node's state.
func (b *Broker) FetchOffsets(group, topic string) (map[int32]uint64, error) {
	if err := store.ValidateName("group", group); err != nil {
		return nil, storeErr(err)
	}
	if b.fsm.QueueCount(topic) == 0 {
		return nil, fmt.Errorf("%w: topic %q", ErrNotFound, topic)
	}
	return b.fsm.Offsets(group, topic), nil
}

// ResetRequest moves a group's offsets for a topic.
type ResetRequest struct {
	Group, Topic string
	// To is "earliest", "latest", a decimal offset (kept within each
	// queue) or "@" and a unix time in milliseconds (SearchOffsets).
	To     string
	Queues []int32 // only these (none: every queue)
	DryRun bool    // answer the offsets, change nothing
}

// ResetGroup moves a group's offsets as req says, only while the group has
// no live members (leader only), and returns them.
func (b *Broker) ResetGroup(ctx context.Context, req ResetRequest) ([]store.OffsetEntry, error) {
	group, topic, to := req.Group, req.Topic, req.To
	if err := store.ValidateName("group", group); err != nil {
		return nil, storeErr(err)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return nil, err
	}
	ti, err := b.fsm.Topic(topic)
	if err != nil {
		return nil, b.replicaErr(err)
	}
	live := b.groups.Live(group, time.Now())
	if live > 0 {
		return nil, fmt.Errorf("%w: group %q has %d live member(s); stop them first", ErrFailedPrecondition, group, live)
	}
	queues, err := pickQueues(ti, req.Queues)
	if err != nil {
		return nil, err
	}
	var offsets []store.OffsetEntry
	if ms, ok := strings.CutPrefix(to, "@"); ok {
		ts, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return nil, invalid("reset to %q: want @ and a unix time in milliseconds", to)
		}
		if offsets, err = b.SearchOffsets(ctx, topic, ts, queues); err != nil {
			return nil, err
		}
	} else {
		for _, q := range queues {
			rng := ti.Queues[q]
			var o uint64
			switch to {
			case "earliest":
				o = rng.Min
			case "latest":
				o = rng.Max
			default:
				n, err := strconv.ParseUint(to, 10, 64)
				if err != nil {
					return nil, invalid("reset to %q: want earliest, latest, an offset or @ and a unix time in ms", to)
				}
				o = min(max(n, rng.Min), rng.Max)
			}
			offsets = append(offsets, store.OffsetEntry{Topic: topic, Queue: q, Offset: o})
		}
	}
	if req.DryRun {
		return offsets, nil
	}
	if err := b.replicaErr(b.w.CommitOffsets(ctx, group, offsets)); err != nil {
		return nil, err
	}
	return offsets, nil
}

// TopicGroups lists the consumer groups with a committed offset of topic,
// as this node has applied them (a broadcasting member's offsets count
// for its group), sorted.
func (b *Broker) TopicGroups(topic string) []string {
	set := map[string]bool{}
	for _, k := range b.fsm.Groups() {
		if len(b.fsm.Offsets(k, topic)) == 0 {
			continue
		}
		g, _, _ := store.SplitMemberKey(k)
		set[g] = true
	}
	out := make([]string, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
