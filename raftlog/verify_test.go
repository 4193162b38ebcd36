package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// flipInSealedSegment flips one byte inside the body that starts with mark
// in the first (sealed) raft-wal segment of dir, while the store is open.
func flipInSealedSegment(t *testing.T, dir, mark string) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "log", "*.wal"))
	sort.Strings(segs)
	if len(segs) < 2 {
		t.Fatalf("want a sealed segment and a tail, have %d segments", len(segs))
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	pos := bytes.Index(b, []byte(mark))
	if pos < 0 {
		t.Fatalf("%q not found in sealed segment %s", mark, segs[0])
	}
	pos += len(mark) + 10
	if _, err := f.WriteAt([]byte{b[pos] ^ 0x01}, int64(pos)); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptLeaderSegmentGetLogReturnsErrCorrupt: one flipped body byte in
// a sealed segment of a running store, in an entry that has left the cache,
// is found by the read raft replicates from (ErrCorrupt, not
// raft.ErrLogNotFound, which would make a leader send its snapshot), by
// pulls and by Verify, and reported to OnDamaged once.
func TestCorruptLeaderSegmentGetLogReturnsErrCorrupt(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	reported := map[uint64]int{}
	s, err := Open(dir, Options{Kind: KindWAL, SegmentSize: 64 << 10, CacheSize: 4, ReadCache: 1,
		OnDamaged: func(idx uint64, err error) {
			mu.Lock()
			reported[idx]++
			mu.Unlock()
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("OnDamaged(%d) error %v does not wrap ErrCorrupt", idx, err)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 400 // about 120 KiB: the first segment is sealed
	for i := 1; i <= n; i++ {
		body := fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", 300))
		if err := s.Log.StoreLog(&raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand,
			Data: EncodeBatch(&Request{Topic: "t", Messages: []Message{{Body: []byte(body)}}})}); err != nil {
			t.Fatal(err)
		}
	}
	const bad = 7
	flipInSealedSegment(t, dir, fmt.Sprintf("entry-%05d-", bad))

	var l raft.Log
	for i := 0; i < 2; i++ {
		err := s.Log.GetLog(bad, &l)
		if !errors.Is(err, ErrCorrupt) || errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog(%d) of a flipped entry: %v, want ErrCorrupt", bad, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprint(bad)) {
			t.Errorf("error %q does not name index %d", err, bad)
		}
	}
	if err := s.Log.GetLog(bad+1, &l); err != nil {
		t.Fatalf("GetLog(%d) of a good entry: %v", bad+1, err)
	}
	if _, err := s.Read(bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read(%d): %v, want ErrCorrupt", bad, err)
	}
	if _, err := s.Verify(nil); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("log entry %d", bad)) {
		t.Fatalf("Verify: %v, want ErrCorrupt naming entry %d", err, bad)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || reported[bad] != 1 {
		t.Fatalf("OnDamaged calls %v, want index %d once", reported, bad)
	}
	if idx, err := s.Damaged(); idx != bad || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Damaged() = %d, %v", idx, err)
	}
}

// TestCheckEntryRejectsDamagedFraming: a flipped type byte or metadata CRC
// is damage, not an unknown command to skip.
func TestCheckEntryRejectsDamagedFraming(t *testing.T) {
	batch := EncodeBatch(&Request{Topic: "t", Messages: []Message{{Body: []byte("hello")}}})
	meta := append([]byte{byte(CmdMeta), 0, 0, 0, 0}, `{"op":"x"}`...)
	c := crc32Of(meta[MetaHeaderLen:])
	meta[1], meta[2], meta[3], meta[4] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	flip := func(b []byte, i int) []byte { b = append([]byte(nil), b...); b[i] ^= 0x04; return b }
	for _, tc := range []struct {
		name string
		l    raft.Log
		ok   bool
	}{
		{"batch", raft.Log{Index: 1, Type: raft.LogCommand, Data: batch}, true},
		{"meta", raft.Log{Index: 1, Type: raft.LogCommand, Data: meta}, true},
		{"noop", raft.Log{Index: 1, Type: raft.LogNoop}, true},
		{"batch body", raft.Log{Index: 1, Type: raft.LogCommand, Data: flip(batch, len(batch)-2)}, false},
		{"meta json", raft.Log{Index: 1, Type: raft.LogCommand, Data: flip(meta, len(meta)-2)}, false},
		{"command type", raft.Log{Index: 1, Type: raft.LogCommand, Data: flip(batch, 0)}, false},
		{"empty command", raft.Log{Index: 1, Type: raft.LogCommand}, false},
		{"entry type", raft.Log{Index: 1, Type: raft.LogNoop, Data: batch}, false},
		{"index", raft.Log{Index: 2, Type: raft.LogCommand, Data: batch}, false},
	} {
		err := CheckEntry(1, &tc.l)
		if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
