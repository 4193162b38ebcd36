package raftlog

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

// A read that began before raft cut the log's tail keeps nothing of what
// it read in the cache: the entry it read may be replaced already.
func TestReadCacheKeepsNothingReadAcrossACut(t *testing.T) {
	c := newReadCache(1 << 20)
	c.put(3, Entry{Data: []byte("three")}, c.gen())
	c.put(7, Entry{Data: []byte("old seven")}, c.gen())
	g := c.gen() // a read of entry 6 begins
	c.dropFrom(5)
	c.put(6, Entry{Data: []byte("old six")}, g) // ... and ends after the cut
	if _, ok := c.get(6); ok {
		t.Fatal("an entry read before a cut was cached after it")
	}
	if _, ok := c.get(7); ok {
		t.Fatal("an entry above the cut stayed cached")
	}
	if d, ok := c.get(3); !ok || string(d.Data) != "three" {
		t.Fatal("an entry below the cut was forgotten")
	}
	c.put(6, Entry{Data: []byte("new six")}, c.gen())
	if d, ok := c.get(6); !ok || string(d.Data) != "new six" {
		t.Fatal("a read after the cut was not cached")
	}
}

// After raft replaces the log's tail, a read returns the new entries, not
// the ones read (and cached) before the cut.
func TestReadAfterATailCutReturnsTheNewEntry(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entry := func(i uint64, body string) []byte {
		return EncodeBatch(&Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []Message{{Timestamp: 1, Body: []byte(body)}}})
	}
	for i := uint64(1); i <= 10; i++ {
		if err := s.Log.StoreLogs([]*raft.Log{{Index: i, Term: 1, Type: raft.LogCommand, Data: entry(i, "old")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Read(8); err != nil { // cached
		t.Fatal(err)
	}
	if err := s.Log.DeleteRange(7, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Log.StoreLogs([]*raft.Log{{Index: 7, Term: 2, Type: raft.LogCommand, Data: entry(7, "new")}, {Index: 8, Term: 2, Type: raft.LogCommand, Data: entry(8, "new")}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read(8)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, entry(8, "new")) {
		t.Fatal("a read after the tail was replaced returned the old entry")
	}
}
