package raftlog

import (
	"sync"

	"github.com/hashicorp/raft"
)

// logCache keeps the most recently stored entries in memory for raft: a
// leader reads them back to replicate and both roles to apply them.
// raft.LogCache bounds only their number, and 256 entries of 1 MiB held
// 256 MiB on every node during a flood of large requests; this cache also
// bounds their bytes. Like raft.LogCache it writes through, serves misses
// from the store and forgets everything on DeleteRange.
type logCache struct {
	raft.LogStore
	maxEntries, maxBytes int

	// settle, when set, runs before every read (guard.settle).
	settle func() error

	mu    sync.RWMutex
	byIdx map[uint64]*raft.Log
	order []uint64 // cached indexes, oldest first
	bytes int
}

func newLogCache(store raft.LogStore, maxEntries, maxBytes int) *logCache {
	return &logCache{LogStore: store, maxEntries: maxEntries, maxBytes: maxBytes, byIdx: map[uint64]*raft.Log{}}
}

func (c *logCache) GetLog(idx uint64, out *raft.Log) error {
	if c.settle != nil {
		if err := c.settle(); err != nil {
			return err
		}
	}
	c.mu.RLock()
	l := c.byIdx[idx]
	c.mu.RUnlock()
	if l != nil {
		*out = *l
		return nil
	}
	return c.LogStore.GetLog(idx, out)
}

func (c *logCache) StoreLog(l *raft.Log) error { return c.StoreLogs([]*raft.Log{l}) }

func (c *logCache) StoreLogs(logs []*raft.Log) error {
	if len(logs) > 0 {
		if err := c.dropBeforeGap(logs[0].Index); err != nil {
			return err
		}
	}
	if err := c.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if old := c.byIdx[l.Index]; old != nil {
			c.bytes -= len(old.Data)
		} else {
			c.order = append(c.order, l.Index)
		}
		c.byIdx[l.Index] = l
		c.bytes += len(l.Data)
	}
	for len(c.order) > 0 && (len(c.order) > c.maxEntries || c.bytes > c.maxBytes) {
		if l := c.byIdx[c.order[0]]; l != nil {
			c.bytes -= len(l.Data)
			delete(c.byIdx, c.order[0])
		}
		c.order = c.order[1:]
	}
	return nil
}

// dropBeforeGap deletes the whole log when an append would leave a gap after
// it. Raft appends past the end of the log only after installing a snapshot
// that covers everything up to the new entry (the leader had deleted what
// this node lacked: retention), so every old entry is below the snapshot.
// raft-wal cannot hold a gap, and the old entries must not be served as if
// they were the group's: a follower's unacknowledged tail may differ.
//
// Raft could do this itself for a store that says it is monotonic, but it
// then deletes the whole log after installing any snapshot, also one older
// than the log's end (a leader resending its snapshot), and panics on the
// next commit ("log not found").
func (c *logCache) dropBeforeGap(next uint64) error {
	last, err := c.LogStore.LastIndex()
	if err != nil || last == 0 || next <= last+1 {
		return err
	}
	first, err := c.LogStore.FirstIndex()
	if err != nil {
		return err
	}
	return c.DeleteRange(first, last)
}

func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	c.byIdx, c.order, c.bytes = map[uint64]*raft.Log{}, nil, 0
	c.mu.Unlock()
	return c.LogStore.DeleteRange(min, max)
}
