package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/replica"
)

// The fake's topic and group lifecycle: deletes as the state machine does;
// permissions are not modelled (its topics are always read and write), so
// they are tested on real groups (broker/server).

func (f *fakeReplica) UpdateTopic(_ context.Context, name string, perm uint32) (replica.TopicInfo, error) {
	return replica.TopicInfo{}, errors.New("fake replica: topic permissions are not modelled")
}

func (f *fakeReplica) DeleteTopic(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return err
	}
	if f.topics[name] == nil {
		return fmt.Errorf("delete topic %q: %w: %q", name, replica.ErrUnknownTopic, name)
	}
	f.appendLocked(replica.EncodeDeleteTopic(name))
	delete(f.topics, name)
	for _, ts := range f.offsets {
		delete(ts, name)
	}
	return nil
}

func (f *fakeReplica) DeleteGroup(_ context.Context, group string, topics []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return err
	}
	f.appendLocked(replica.EncodeDeleteGroup(group, topics))
	for key := range f.offsets {
		if g, _, _ := replica.SplitMemberKey(key); g == group {
			delete(f.offsets, key)
		}
	}
	for _, t := range topics {
		delete(f.topics, t)
	}
	return nil
}

func (f *fakeReplica) LocateEntry(topic string, q int32, logIndex uint64) (replica.Location, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	qs := f.topics[topic]
	if q < 0 || int(q) >= len(qs) {
		return replica.Location{}, false
	}
	for _, l := range qs[q].locs {
		if l.LogIndex == logIndex {
			return l, true
		}
	}
	return replica.Location{}, false
}

func (f *fakeReplica) ReadUncached(index uint64) ([]byte, error) { return f.Read(index) }
