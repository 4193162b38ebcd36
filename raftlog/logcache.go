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

	mu    sync.RWMutex
	byIdx map[uint64]*raft.Log
	order []uint64 // cached indexes, oldest first
	bytes int
}

func newLogCache(store raft.LogStore, maxEntries, maxBytes int) *logCache {
	return &logCache{LogStore: store, maxEntries: maxEntries, maxBytes: maxBytes, byIdx: map[uint64]*raft.Log{}}
}

// IsMonotonic passes on the answer of the store below, as raft.LogCache
// does (for raft-wal: yes, through the guard).
func (c *logCache) IsMonotonic() bool {
	m, ok := c.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (c *logCache) GetLog(idx uint64, out *raft.Log) error {
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

func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	c.byIdx, c.order, c.bytes = map[uint64]*raft.Log{}, nil, 0
	c.mu.Unlock()
	return c.LogStore.DeleteRange(min, max)
}
