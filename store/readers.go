package store

import (
	"fmt"
	"sort"
)

// TopicInfo describes a topic as this node has applied it.
type TopicInfo struct {
	Name   string
	Queues []QueueRange
	// Perm is RocketMQ's permission bits (PermRead, PermWrite); 0 reads as
	// both (Readable, Writable).
	Perm uint32
}

// Topic returns one topic.
func (f *FSM) Topic(name string) (TopicInfo, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[name]
	if t == nil {
		return TopicInfo{}, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return t.infoLocked(), nil
}

func (t *topic) infoLocked() TopicInfo {
	ti := TopicInfo{Name: t.name, Queues: make([]QueueRange, len(t.queues)), Perm: t.perm}
	for i, q := range t.queues {
		ti.Queues[i] = q.rangeLocked()
	}
	return ti
}

// Topics lists every topic, sorted by name.
func (f *FSM) Topics() []TopicInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]TopicInfo, 0, len(f.topics))
	for _, t := range f.topics {
		out = append(out, t.infoLocked())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// QueueCount returns the number of queues of a topic, or 0 when unknown.
func (f *FSM) QueueCount(name string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if t := f.topics[name]; t != nil {
		return len(t.queues)
	}
	return 0
}

// Offsets returns a group's committed offsets for a topic (queue -> offset).
func (f *FSM) Offsets(group, topicName string) map[int32]uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[int32]uint64{}
	for q, o := range f.offsets[group][topicName] {
		out[q] = o
	}
	return out
}

// Groups lists the owners of committed offsets, sorted: consumer groups,
// and broadcasting members as MemberKey(group, member).
func (f *FSM) Groups() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.offsets))
	for g := range f.offsets {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// GroupTopics lists the topics a group has committed offsets for, sorted.
func (f *FSM) GroupTopics(group string) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	for t := range f.offsets[group] {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Applied is the index of the last entry applied to this node's state.
func (s *Store) Applied() uint64 { return s.fsm.Applied() }

// Changed returns a channel that is closed at the next apply. Long polls
// grab it, check their condition, then wait on it.
func (s *Store) Changed() <-chan struct{} { return s.fsm.Changed() }

// Damaged returns the damaged entry the state machine stopped at and why
// (0, nil: none).
func (s *Store) Damaged() (uint64, error) { return s.fsm.Damaged() }

// LogFloor is the log index below which retention has dropped every message
// (0: nothing dropped).
func (s *Store) LogFloor() uint64 { return s.fsm.LogFloor() }

// Locate returns up to limit locations covering offsets from offset on in
// queue q of a topic, and the queue's range as this node has applied it.
func (s *Store) Locate(topic string, q int32, offset uint64, limit int) ([]Location, QueueRange, error) {
	return s.fsm.Locate(topic, q, offset, limit)
}

// Topic returns one topic as this node has applied it.
func (s *Store) Topic(name string) (TopicInfo, error) { return s.fsm.Topic(name) }

// Topics lists every topic, sorted by name.
func (s *Store) Topics() []TopicInfo { return s.fsm.Topics() }

// QueueCount returns the number of queues of a topic, or 0 when unknown.
func (s *Store) QueueCount(topic string) int { return s.fsm.QueueCount(topic) }

// Offsets returns a group's committed offsets for a topic (queue -> offset).
func (s *Store) Offsets(group, topic string) map[int32]uint64 { return s.fsm.Offsets(group, topic) }

// Groups lists the owners of committed offsets, sorted: consumer groups,
// and broadcasting members as MemberKey(group, member).
func (s *Store) Groups() []string { return s.fsm.Groups() }

// GroupTopics lists the topics a group has committed offsets for, sorted.
func (s *Store) GroupTopics(group string) []string { return s.fsm.GroupTopics(group) }

// Node returns the addresses registered for a node.
func (s *Store) Node(id string) (NodeInfo, bool) { return s.fsm.Node(id) }

// Nodes returns every registered node.
func (s *Store) Nodes() map[string]NodeInfo { return s.fsm.Nodes() }
