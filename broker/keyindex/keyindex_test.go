package keyindex

import (
	"fmt"
	"testing"
)

func add(t *testing.T, x *Index, from, to uint64, keyOf func(uint64) string) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := x.Add(i, 0, "t", keyOf(i)); err != nil {
			t.Fatal(err)
		}
		if err := x.Add(i, 1, "other", keyOf(i)); err != nil {
			t.Fatal(err)
		}
		x.Done(i)
	}
}

func indexes(hits []Hit) []uint64 {
	var out []uint64
	for _, h := range hits {
		out = append(out, h.LogIndex)
	}
	return out
}

// TestLookupAcrossFiles: small files (few slots, so chains collide; few
// entries, so it rolls over many files): every key's entries are found,
// newest first, up to the limit, and only for their topic.
func TestLookupAcrossFiles(t *testing.T) {
	x, err := Open(t.TempDir(), Options{Slots: 7, Entries: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	add(t, x, 1, 101, func(i uint64) string { return fmt.Sprintf("k%d", i%10) })
	if x.Files() < 10 {
		t.Errorf("%d files for 200 entries of 10, want >= 20", x.Files())
	}
	hits, err := x.Lookup("t", "k3", 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(indexes(hits)); got != "[93 83 73 63 53 43 33 23 13 3]" {
		t.Errorf("k3 in t: %s", got)
	}
	for _, h := range hits {
		if h.Ordinal != 0 {
			t.Errorf("hit %+v: ordinal of topic t is 0", h)
		}
	}
	if hits, _ := x.Lookup("t", "k3", 2); fmt.Sprint(indexes(hits)) != "[93 83]" {
		t.Errorf("limit 2: %v", hits)
	}
	if hits, _ := x.Lookup("t", "nope", 10); len(hits) != 0 {
		t.Errorf("unknown key: %v (a hash match of another key is possible only for colliding hashes)", hits)
	}
	if x.Next() != 101 {
		t.Errorf("next %d, want 101", x.Next())
	}
	if err := x.DropBelow(50); err != nil {
		t.Fatal(err)
	}
	hits, _ = x.Lookup("t", "k3", 100)
	if len(hits) == 0 || hits[len(hits)-1].LogIndex < 40 || hits[0].LogIndex != 93 {
		t.Errorf("after dropping files below 50: %v", indexes(hits))
	}
}

// TestReopen: a clean close keeps everything; a crash (no Close) drops the
// file being written, and Next says where to index again from.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Slots: 16, Entries: 50}
	x, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	key := func(i uint64) string { return fmt.Sprintf("k%d", i%5) }
	add(t, x, 1, 61, key) // 120 entries: files of 50, 50, 20
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if x.Next() != 61 {
		t.Fatalf("after a clean close: next %d, want 61", x.Next())
	}
	add(t, x, 61, 71, key)
	if hits, _ := x.Lookup("t", "k0", 100); len(hits) != 14 || hits[0].LogIndex != 70 {
		t.Errorf("k0 after reopen: %v, want 14 hits from 70 down", indexes(hits))
	}
	// A crash: flushed but never closed.
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, fl := range append(x.sealed, x.cur) {
		fl.f.Close()
	}
	x, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Next() != 51 {
		t.Fatalf("after a crash: next %d, want 51 (the first entry of the file being written)", x.Next())
	}
	add(t, x, 51, 71, key)
	if hits, _ := x.Lookup("t", "k0", 100); len(hits) != 14 {
		t.Errorf("k0 after the crash and indexing again: %v, want 14 hits", indexes(hits))
	}
}

// TestReopenWithoutKeys: an index whose entries had no key remembers how
// far it got, so a restart does not read the whole log again to index it.
func TestReopenWithoutKeys(t *testing.T) {
	dir := t.TempDir()
	x, err := Open(dir, Options{Slots: 7, Entries: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 500; i++ {
		x.Done(i) // entries without keys
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir, Options{Slots: 7, Entries: 10}); err != nil {
		t.Fatal(err)
	}
	if got := x.Next(); got != 501 {
		t.Fatalf("Next after reopen %d, want 501", got)
	}
	// Keys added afterwards are found after another reopen.
	add(t, x, 501, 511, func(i uint64) string { return fmt.Sprintf("k%d", i) })
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(dir, Options{Slots: 7, Entries: 10}); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if got := x.Next(); got != 511 {
		t.Fatalf("Next after the second reopen %d, want 511", got)
	}
	hits, err := x.Lookup("t", "k505", 10)
	if err != nil || len(hits) != 1 || hits[0].LogIndex != 505 {
		t.Fatalf("lookup of k505: %v, %v", indexes(hits), err)
	}
}
