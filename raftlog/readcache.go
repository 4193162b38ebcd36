package raftlog

import (
	"container/list"
	"sync"
)

// readCache keeps the data of recently read entries, bounded by bytes.
// Consumers of different queues read the same entries (one entry holds
// messages of many queues), and the log cache (logcache.go) holds only
// recently written entries, so without it every queue's pull re-reads the
// entry from disk.
type readCache struct {
	mu    sync.Mutex
	max   int
	size  int
	items map[uint64]*list.Element
	lru   list.List // of *cached, most recently used at the front
	// cuts counts dropFrom calls: a read that began before a cut must not
	// put what it read after it (put's gen).
	cuts uint64
}

type cached struct {
	index uint64
	Entry
}

func newReadCache(maxBytes int) *readCache {
	return &readCache{max: maxBytes, items: map[uint64]*list.Element{}}
}

func (c *readCache) get(idx uint64) (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[idx]
	if !ok {
		return Entry{}, false
	}
	c.lru.MoveToFront(e)
	return e.Value.(*cached).Entry, true
}

// gen is the cache's generation, to hand to put after a read from the
// store.
func (c *readCache) gen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cuts
}

// put caches entry idx, read from the store after gen returned g; a cut
// since then (dropFrom) may have replaced the entry, so it keeps nothing.
func (c *readCache) put(idx uint64, e Entry, g uint64) {
	data := e.Data
	if len(data) > c.max/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cuts != g {
		return
	}
	if _, ok := c.items[idx]; ok {
		return
	}
	c.items[idx] = c.lru.PushFront(&cached{idx, e})
	c.size += len(data)
	for c.size > c.max {
		e := c.lru.Back()
		old := e.Value.(*cached)
		c.lru.Remove(e)
		delete(c.items, old.index)
		c.size -= len(old.Data)
	}
}

// dropFrom forgets entries at or above idx (raft truncated the log's tail).
func (c *readCache) dropFrom(idx uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts++
	for i, e := range c.items {
		if i >= idx {
			c.size -= len(e.Value.(*cached).Data)
			c.lru.Remove(e)
			delete(c.items, i)
		}
	}
}
