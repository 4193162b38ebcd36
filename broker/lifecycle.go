package broker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/broker/groups"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// Topic and group lifecycle, and the checks on what clients may do with a
// topic:
//
//   - System topics (api.IsSystemTopic: %RETRY%, %DLQ%, the schedule topic)
//     belong to the broker: clients may not create, delete or produce to
//     them (ClientCreateTopic, ClientProduce, DeleteTopic); the broker's own
//     paths (retry, dead letters, delays, the remoting adapter's retry
//     topics) call CreateTopic and Produce, which do not check.
//   - A topic's permission (RocketMQ's PermName: 4 read, 2 write) is
//     checked on client produce (ClientProduce) and on every pull.
//   - Deleting a topic or a group is a replicated command, refused while
//     consumer group members that use it are connected (as the leader knows
//     them) unless forced.

// ClientProduce is Produce for a request from a client: it refuses system
// topics and topics the leader holds without write permission.
func (b *Broker) ClientProduce(ctx context.Context, req ProduceRequest) (ProduceResult, error) {
	if mq.IsSystemTopic(req.Topic) {
		return ProduceResult{}, fmt.Errorf("%w: topic %q is a system topic: only the broker writes to it", ErrFailedPrecondition, req.Topic)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return ProduceResult{}, err
	}
	if ti, err := b.fsm.Topic(req.Topic); err == nil && !ti.Writable() {
		return ProduceResult{}, fmt.Errorf("%w: topic %q is not writable (perm %d); `raftmq topic update %s --perm 6` makes it writable",
			ErrFailedPrecondition, req.Topic, ti.Perm, req.Topic)
	}
	return b.Produce(ctx, req)
}

// ClientCreateTopic is CreateTopic for a client: system topics are the
// broker's to create.
func (b *Broker) ClientCreateTopic(ctx context.Context, name string, queues int32, ifNotExists bool) (store.TopicInfo, error) {
	if mq.IsSystemTopic(name) {
		return store.TopicInfo{}, fmt.Errorf("%w: topic %q is a system topic: the broker creates it when it is needed", ErrInvalidArgument, name)
	}
	return b.CreateTopic(ctx, name, queues, ifNotExists)
}

// checkReadable refuses a pull of a topic this node holds without read
// permission (an unknown topic is the pull's own answer).
func (b *Broker) checkReadable(topic string) error {
	if ti, err := b.fsm.Topic(topic); err == nil && !ti.Readable() {
		return fmt.Errorf("%w: topic %q is not readable (perm %d); `raftmq topic update %s --perm 6` makes it readable",
			ErrFailedPrecondition, topic, ti.Perm, topic)
	}
	return nil
}

// UpdateTopic sets a topic's permission (nil: unchanged) and returns the
// topic (leader only).
func (b *Broker) UpdateTopic(ctx context.Context, name string, perm *uint32) (store.TopicInfo, error) {
	if err := store.ValidateName("topic", name); err != nil {
		return store.TopicInfo{}, storeErr(err)
	}
	if perm != nil {
		if err := store.ValidatePerm(*perm); err != nil {
			return store.TopicInfo{}, storeErr(err)
		}
	}
	if err := b.awaitLeader(ctx); err != nil {
		return store.TopicInfo{}, err
	}
	ti, err := b.fsm.Topic(name)
	if err != nil || perm == nil || *perm == ti.Perm {
		return ti, b.replicaErr(err)
	}
	ti, err = b.w.UpdateTopic(ctx, name, *perm)
	if err != nil {
		return store.TopicInfo{}, b.replicaErr(err)
	}
	b.log.Info("topic permission changed", "topic", name, "perm", ti.Perm)
	return ti, nil
}

// DeleteTopic deletes a topic (leader only): its messages are no longer
// served, its index and every group's offsets of it are dropped, and
// retention deletes its log segments as it does any other (a deleted topic
// pins nothing). A topic created again under the name starts empty. Refused
// for system topics, and while members of consumer groups that subscribe to
// it are connected, unless force.
func (b *Broker) DeleteTopic(ctx context.Context, name string, force bool) error {
	if err := store.ValidateName("topic", name); err != nil {
		return storeErr(err)
	}
	if mq.IsSystemTopic(name) {
		return fmt.Errorf("%w: topic %q is a system topic: the broker owns it (`raftmq group delete` removes a group's retry and dead-letter topics)",
			ErrFailedPrecondition, name)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	if _, err := b.fsm.Topic(name); err != nil {
		return b.replicaErr(err)
	}
	if live := b.groups.LiveMembers(time.Now(), func(m groups.Member) bool { return slices.Contains(m.Topics, name) }); len(live) > 0 && !force {
		return fmt.Errorf("%w: topic %q has connected consumers: %s; stop them first, or delete anyway with --force",
			ErrFailedPrecondition, name, describeLive(live))
	}
	if err := b.w.DeleteTopic(ctx, name); err != nil {
		return b.replicaErr(err)
	}
	b.log.Info("topic deleted", "topic", name, "force", force)
	return nil
}

// DeleteGroup deletes a consumer group (leader only): its committed offsets,
// its broadcasting members' offsets and its retry and dead-letter topics.
// Refused while it has connected members, unless force; forced, its live
// members are forgotten (they join again with their next heartbeat, from
// their group's start position).
func (b *Broker) DeleteGroup(ctx context.Context, group string, force bool) error {
	if err := store.ValidateName("group", group); err != nil {
		return storeErr(err)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	live := b.groups.LiveMembers(time.Now(), func(groups.Member) bool { return true })[group]
	known := live > 0
	for _, k := range b.fsm.Groups() {
		if g, _, _ := store.SplitMemberKey(k); g == group {
			known = true
		}
	}
	var topics []string
	for _, t := range []string{mq.RetryTopic(group), mq.DeadLetterTopic(group)} {
		if b.fsm.QueueCount(t) > 0 {
			topics, known = append(topics, t), true
		}
	}
	if _, set := b.fsm.MaxReconsumeTimes(group); set {
		known = true // a group known only by its settings (retry.go)
	}
	if !known {
		return fmt.Errorf("%w: consumer group %q has no committed offsets, no members and no retry or dead-letter topic", ErrNotFound, group)
	}
	if live > 0 && !force {
		return fmt.Errorf("%w: consumer group %q has %d connected member(s); stop them first, or delete anyway with --force", ErrFailedPrecondition, group, live)
	}
	if err := b.w.DeleteGroup(ctx, group, topics); err != nil {
		return b.replicaErr(err)
	}
	b.groups.Forget(group)
	b.log.Info("consumer group deleted", "group", group, "topics", topics, "force", force)
	return nil
}

func describeLive(live map[string]int) string {
	names := make([]string, 0, len(live))
	for g := range live {
		names = append(names, g)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, g := range names {
		parts[i] = fmt.Sprintf("group %s (%d member(s))", g, live[g])
	}
	return strings.Join(parts, ", ")
}
