package broker

import (
	"context"
	"sort"

	"github.com/raftmq/raftmq/store"
)

// fakeRetry is the fake replica's group settings (fake_test.go).
type fakeRetry struct {
	maxReconsume map[string]int32
	lockTerm     uint64
}

func (f *fakeReplica) MarkLockTerm(_ context.Context, term uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return err
	}
	f.retry.lockTerm = max(f.retry.lockTerm, term)
	return nil
}

func (f *fakeReplica) IndexRebuilds() (rebuilt, refused uint64) { return 0, 0 }

func (f *fakeReplica) LockTerm() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.retry.lockTerm
}

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
