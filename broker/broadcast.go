package broker

import (
	"context"
	"fmt"
	"sort"

	"github.com/raftmq/raftmq/store"
)

// Broadcasting consumer groups (RocketMQ's BROADCASTING model, package
// groups): every member is assigned every queue of its topics, and each
// member keeps its own committed offsets, replicated like a group's under
// store.MemberKey(group, member).

// JoinBroadcastGroup registers or refreshes a broadcasting member and
// returns its assignment: every queue of its topics (leader only).
func (b *Broker) JoinBroadcastGroup(ctx context.Context, group, memberID string, topics []string) (JoinResult, error) {
	return b.joinGroup(ctx, group, memberID, topics, true)
}

func validMember(group, member string) error {
	if err := store.ValidateName("group", group); err != nil {
		return storeErr(err)
	}
	if err := store.ValidateMember(member); err != nil {
		return storeErr(err)
	}
	return nil
}

// CommitMemberOffsets stores a broadcasting member's own offsets through
// Raft (leader only).
func (b *Broker) CommitMemberOffsets(ctx context.Context, group, member string, offsets []store.OffsetEntry) error {
	if err := validMember(group, member); err != nil {
		return err
	}
	return b.commitOffsets(ctx, store.MemberKey(group, member), offsets)
}

// FetchMemberOffsets returns a broadcasting member's own committed offsets
// for a topic from this node's state.
func (b *Broker) FetchMemberOffsets(group, member, topic string) (map[int32]uint64, error) {
	if err := validMember(group, member); err != nil {
		return nil, err
	}
	if b.fsm.QueueCount(topic) == 0 {
		return nil, fmt.Errorf("%w: topic %q", ErrNotFound, topic)
	}
	return b.fsm.Offsets(store.MemberKey(group, member), topic), nil
}

// memberKeys lists the broadcasting members of group with committed
// offsets, as offsets keys.
func (b *Broker) memberKeys(group string) []string {
	var out []string
	for _, k := range b.fsm.Groups() {
		if g, _, ok := store.SplitMemberKey(k); ok && g == group {
			out = append(out, k)
		}
	}
	return out
}

func (b *Broker) hasMemberOffsets(group string) bool { return len(b.memberKeys(group)) > 0 }

// describeBroadcast fills info's queues for a broadcasting group: one row
// per member (live, or with committed offsets) and queue of the topics the
// member reads or committed.
func (b *Broker) describeBroadcast(info GroupInfo) GroupInfo {
	info.Broadcast = true
	sort.Slice(info.Members, func(i, j int) bool { return info.Members[i].ID < info.Members[j].ID })
	topicsOf := map[string]map[string]bool{} // member -> topics
	for _, m := range info.Members {
		topicsOf[m.ID] = map[string]bool{}
		for _, a := range m.Assignments {
			topicsOf[m.ID][a.Topic] = true
		}
	}
	for _, k := range b.memberKeys(info.Group) {
		_, id, _ := store.SplitMemberKey(k)
		if topicsOf[id] == nil {
			topicsOf[id] = map[string]bool{}
		}
		for _, t := range b.fsm.GroupTopics(k) {
			topicsOf[id][t] = true
		}
	}
	ids := make([]string, 0, len(topicsOf))
	for id := range topicsOf {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		names := make([]string, 0, len(topicsOf[id]))
		for t := range topicsOf[id] {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			ti, err := b.fsm.Topic(t)
			if err != nil {
				continue
			}
			offs := b.fsm.Offsets(store.MemberKey(info.Group, id), t)
			for q, rng := range ti.Queues {
				gq := GroupQueue{Topic: t, Queue: int32(q), Committed: -1, MaxOffset: rng.Max, Member: id}
				start := rng.Min
				if o, ok := offs[int32(q)]; ok {
					gq.Committed, start = int64(o), o
				}
				if rng.Max > start {
					gq.Lag = rng.Max - start
				}
				info.Queues = append(info.Queues, gq)
			}
		}
	}
	return info
}
