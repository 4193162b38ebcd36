package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/store/queueindex"
)

// Topic permissions, RocketMQ's PermName bits.
const (
	PermWrite     uint32 = 2
	PermRead      uint32 = 4
	PermReadWrite        = PermRead | PermWrite
)

// Lifecycle commands.
const (
	opUpdateTopic = "update_topic"
	opDeleteTopic = "delete_topic"
	opDeleteGroup = "delete_group"
)

// ValidatePerm checks a topic permission.
func ValidatePerm(perm uint32) error {
	switch perm {
	case PermWrite, PermRead, PermReadWrite:
		return nil
	}
	return fmt.Errorf("%w: perm %d: want 2 (write only), 4 (read only) or 6 (read and write)", ErrInvalidPerm, perm)
}

// Readable reports whether consumers may pull the topic.
func (t TopicInfo) Readable() bool { return t.perm()&PermRead != 0 }

// Writable reports whether producers may write the topic.
func (t TopicInfo) Writable() bool { return t.perm()&PermWrite != 0 }

// perm is Perm, read and write when unset.
func (t TopicInfo) perm() uint32 {
	if t.Perm == 0 {
		return PermReadWrite
	}
	return t.Perm
}

// EncodeUpdateTopic encodes a command that sets a topic's permission.
func EncodeUpdateTopic(name string, perm uint32) []byte {
	return encodeMeta(&metaCmd{Op: opUpdateTopic, Topic: name, Perm: perm})
}

// EncodeDeleteTopic encodes a command that deletes a topic: its index and
// every group's offsets of it. Its messages stay in the log until retention
// deletes their segments, but nothing serves them any more.
func EncodeDeleteTopic(name string) []byte {
	return encodeMeta(&metaCmd{Op: opDeleteTopic, Topic: name})
}

// EncodeDeleteGroup encodes a command that deletes a consumer group's
// offsets, those of its broadcasting members, and the topics named (the
// group's retry and dead-letter topics).
func EncodeDeleteGroup(group string, topics []string) []byte {
	return encodeMeta(&metaCmd{Op: opDeleteGroup, Group: group, Topics: topics})
}

// applyLifecycleLocked applies the lifecycle commands; ok is false for any
// other op.
func (f *FSM) applyLifecycleLocked(c *metaCmd) (res interface{}, ok bool) {
	switch c.Op {
	case opUpdateTopic:
		t := f.topics[c.Topic]
		if t == nil {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic), true
		}
		if err := ValidatePerm(c.Perm); err != nil {
			return err, true
		}
		t.perm = c.Perm
		return nil, true
	case opDeleteTopic:
		if f.topics[c.Topic] == nil {
			return fmt.Errorf("%w: %q", ErrUnknownTopic, c.Topic), true
		}
		f.deleteTopicLocked(c.Topic)
		return nil, true
	case opDeleteGroup:
		if err := ValidateName("group", c.Group); err != nil {
			return err, true
		}
		for key := range f.offsets {
			if g, _, _ := SplitMemberKey(key); g == c.Group {
				delete(f.offsets, key)
			}
		}
		for _, t := range c.Topics {
			if f.topics[t] != nil {
				f.deleteTopicLocked(t)
			}
		}
		delete(f.maxReconsume, c.Group) // groupsettings.go
		delete(f.locks, c.Group)        // locks.go
		return nil, true
	}
	return nil, false
}

// deleteTopicLocked drops a topic, its index records (so it pins nothing
// in memory or in the log) and every committed offset of it; an owner of
// offsets left with none is dropped too.
func (f *FSM) deleteTopicLocked(name string) {
	t := f.topics[name]
	delete(f.topics, name)
	qs := make([]*queueindex.Queue, len(t.queues))
	for i, q := range t.queues {
		qs[i] = q.ix
	}
	if err := f.idx.RemoveTopic(t.key(), qs); err != nil {
		// Left-over files are removed at the next snapshot restore.
		f.log.Warn("removing a deleted topic's queue index failed", "topic", name, "error", err)
	}
	for key, ts := range f.offsets {
		delete(ts, name)
		if len(ts) == 0 {
			delete(f.offsets, key)
		}
	}
	f.dropTopicLocksLocked(name)
}

// UpdateTopic sets a topic's permission and returns the topic as this node
// applied it.
func (s *Store) UpdateTopic(ctx context.Context, name string, perm uint32) (TopicInfo, error) {
	if err := s.applyMeta(ctx, EncodeUpdateTopic(name, perm)); err != nil {
		return TopicInfo{}, fmt.Errorf("update topic %q: %w", name, err)
	}
	return s.fsm.Topic(name)
}

// DeleteTopic deletes a topic (EncodeDeleteTopic).
func (s *Store) DeleteTopic(ctx context.Context, name string) error {
	if err := s.applyMeta(ctx, EncodeDeleteTopic(name)); err != nil {
		return fmt.Errorf("delete topic %q: %w", name, err)
	}
	return nil
}

// DeleteGroup deletes a consumer group's offsets, its broadcasting members'
// and the topics named (EncodeDeleteGroup).
func (s *Store) DeleteGroup(ctx context.Context, group string, topics []string) error {
	if err := s.applyMeta(ctx, EncodeDeleteGroup(group, topics)); err != nil {
		return fmt.Errorf("delete group %q (topics %s): %w", group, strings.Join(topics, ", "), err)
	}
	return nil
}
