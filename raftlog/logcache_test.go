package raftlog

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestLogCacheBoundsBytes(t *testing.T) {
	store := raft.NewInmemStore()
	c := newLogCache(store, 256, 10<<10) // 10 KiB
	for i := uint64(1); i <= 40; i++ {
		if err := c.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: make([]byte, 1024)}}); err != nil {
			t.Fatal(err)
		}
		if c.bytes > c.maxBytes || len(c.byIdx) != len(c.order) {
			t.Fatalf("after %d entries: %d bytes in %d entries (order %d), budget %d", i, c.bytes, len(c.byIdx), len(c.order), c.maxBytes)
		}
	}
	if len(c.byIdx) != 10 || c.byIdx[31] == nil || c.byIdx[30] != nil {
		t.Fatalf("cache holds %d entries, want the newest 10 (31..40)", len(c.byIdx))
	}
	// Evicted entries still come from the store.
	for i := uint64(1); i <= 40; i++ {
		var l raft.Log
		if err := c.GetLog(i, &l); err != nil || l.Index != i || len(l.Data) != 1024 {
			t.Fatalf("GetLog(%d) = %+v, %v", i, l, err)
		}
	}
	// One entry larger than the budget is stored, not cached.
	if err := c.StoreLogs([]*raft.Log{{Index: 41, Term: 1, Data: make([]byte, 20<<10)}}); err != nil {
		t.Fatal(err)
	}
	if c.bytes > c.maxBytes || c.byIdx[41] != nil {
		t.Fatalf("oversized entry: %d bytes cached", c.bytes)
	}
	var l raft.Log
	if err := c.GetLog(41, &l); err != nil || len(l.Data) != 20<<10 {
		t.Fatalf("GetLog(41): %v", err)
	}
	if err := c.DeleteRange(30, 41); err != nil {
		t.Fatal(err)
	}
	if len(c.byIdx) != 0 || c.bytes != 0 {
		t.Fatalf("DeleteRange left %d entries, %d bytes", len(c.byIdx), c.bytes)
	}
	if err := c.GetLog(35, &l); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog of a deleted entry: %v", err)
	}
}

func TestLogCacheBoundsCount(t *testing.T) {
	c := newLogCache(raft.NewInmemStore(), 4, 1<<20)
	var logs []*raft.Log
	for i := uint64(1); i <= 9; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: []byte("x")})
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if len(c.byIdx) != 4 || c.byIdx[6] == nil {
		t.Fatalf("cache holds %d entries, want 6..9", len(c.byIdx))
	}
}

func TestAppendChunk(t *testing.T) {
	mk := func(sizes ...int) []*raft.Log {
		var out []*raft.Log
		for _, n := range sizes {
			out = append(out, &raft.Log{Data: make([]byte, n)})
		}
		return out
	}
	cases := []struct {
		sizes []int
		want  int
	}{
		{[]int{10, 10, 10}, 3},
		{[]int{60, 50, 10}, 1},
		{[]int{200, 10}, 1}, // one entry over the limit still goes
		{[]int{50, 50, 1}, 2},
	}
	for _, c := range cases {
		if got := appendChunk(mk(c.sizes...), 100); got != c.want {
			t.Errorf("appendChunk(%v, 100) = %d, want %d", c.sizes, got, c.want)
		}
	}
}
