package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// The fake's topic and group lifecycle: deletes as the state machine does;
// permissions are not modelled (its topics are always read and write), so
// they are tested on real groups (broker/server).

func (f *fakeReplica) UpdateTopic(_ context.Context, name string, perm uint32) (store.TopicInfo, error) {
	return store.TopicInfo{}, errors.New("fake replica: topic permissions are not modelled")
}

func (f *fakeReplica) DeleteTopic(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return err
	}
	if f.topics[name] == nil {
		return fmt.Errorf("delete topic %q: %w: %q", name, store.ErrUnknownTopic, name)
	}
	f.appendLocked(store.EncodeDeleteTopic(name))
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
	f.appendLocked(store.EncodeDeleteGroup(group, topics))
	for key := range f.offsets {
		if g, _, _ := store.SplitMemberKey(key); g == group {
			delete(f.offsets, key)
		}
	}
	for _, t := range topics {
		delete(f.topics, t)
	}
	return nil
}

func (f *fakeReplica) LocateEntry(topic string, q int32, logIndex uint64) (store.Location, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	qs := f.topics[topic]
	if q < 0 || int(q) >= len(qs) {
		return store.Location{}, false
	}
	for _, l := range qs[q].locs {
		if l.LogIndex == logIndex {
			return l, true
		}
	}
	return store.Location{}, false
}

func (f *fakeReplica) ReadUncached(index uint64) (raftlog.Entry, error) { return f.Read(index) }
