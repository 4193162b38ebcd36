package broker

import (
	"context"
	"sort"
	"time"

	"github.com/raftmq/raftmq/store"
)

// fakeRetry is the fake replica's group settings and orderly locks
// (fake_test.go).
type fakeRetry struct {
	maxReconsume map[string]int32
	locks        map[string]map[store.QueueRef]fakeLock // group -> queue -> holder
}

type fakeLock struct {
	member  string
	expires time.Time
}

// LockQueues grants as the state machine does (store/locks.go): a queue
// that is free, expired at now, or member's already.
func (f *fakeReplica) LockQueues(_ context.Context, group, member string, queues []store.QueueRef, now time.Time, lease time.Duration) ([]store.QueueRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return nil, err
	}
	f.appendLocked(store.EncodeLock(group, member, queues, now, lease))
	if f.retry.locks == nil {
		f.retry.locks = map[string]map[store.QueueRef]fakeLock{}
	}
	g := f.retry.locks[group]
	if g == nil {
		g = map[store.QueueRef]fakeLock{}
		f.retry.locks[group] = g
	}
	var out []store.QueueRef
	for _, q := range queues {
		if h, ok := g[q]; ok && h.member != member && h.expires.After(now) {
			continue
		}
		g[q] = fakeLock{member: member, expires: now.Add(lease)}
		out = append(out, q)
	}
	return out, nil
}

func (f *fakeReplica) UnlockQueues(_ context.Context, group, member string, queues []store.QueueRef, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return err
	}
	f.appendLocked(store.EncodeUnlock(group, member, queues, now))
	for _, q := range queues {
		if h, ok := f.retry.locks[group][q]; ok && h.member == member {
			delete(f.retry.locks[group], q)
		}
	}
	return nil
}

func (f *fakeReplica) IndexRebuilds() (rebuilt, refused uint64) { return 0, 0 }

func (f *fakeReplica) SetMaxReconsumeTimes(_ context.Context, group string, max int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return err
	}
	if f.retry.maxReconsume == nil {
		f.retry.maxReconsume = map[string]int32{}
	}
	f.retry.maxReconsume[group] = max
	f.appendLocked(store.EncodeSetMaxReconsume(group, max))
	return nil
}

func (f *fakeReplica) MaxReconsumeTimes(group string) (int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.retry.maxReconsume[group]
	return n, ok
}

func (f *fakeReplica) SettingsGroups() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for g := range f.retry.maxReconsume {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

func (f *fakeReplica) SetGroupID(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groupID == "" {
		f.groupID = id
	}
	return nil
}

func (f *fakeReplica) NumberProducer(context.Context) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.producerNumbers++
	return f.producerNumbers - 1, nil
}

func (f *fakeReplica) GroupID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groupID
}
