package store

import (
	"errors"
	"hash/crc32"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
)

// TestCorruptBatchStopsFSM: an FSM that meets a batch whose CRC does not
// match stops there instead of skipping it ("skipping corrupt batch" shifted
// every later offset on that node): nothing at or after it is applied,
// Applied stays below it, Snapshot refuses, the damage is reported once, and
// raft's goroutine is not blocked.
func TestCorruptBatchStopsFSM(t *testing.T) {
	h := newHarness(t)
	var calls []uint64
	h.f.OnDamaged(func(idx uint64, err error) {
		calls = append(calls, idx)
		if !errors.Is(err, ErrDamaged) || !errors.Is(err, raftlog.ErrCorrupt) {
			t.Errorf("OnDamaged error %v", err)
		}
	})
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	h.produce(&raftlog.Request{Topic: "t", Messages: msgs(0, "a")})
	good := h.f.Applied()

	bad := raftlog.EncodeBatch(&raftlog.Request{Topic: "t", Messages: msgs(0, "b")})
	bad[len(bad)-1] ^= 0x01
	next := raftlog.EncodeBatch(&raftlog.Request{Topic: "t", Messages: msgs(0, "c")})
	logs := []*raft.Log{
		{Index: good + 1, Type: raft.LogCommand, Data: bad},
		{Index: good + 2, Type: raft.LogCommand, Data: next},
		{Index: good + 3, Type: raft.LogCommand, Data: EncodeCreateTopic("u", 1, false)},
	}
	out := h.f.ApplyBatch(logs)
	for i, o := range out {
		if err, _ := o.(error); !errors.Is(err, ErrDamaged) {
			t.Errorf("entry %d answered %v, want ErrDamaged", logs[i].Index, o)
		}
	}
	// Later applies are refused too, at once.
	if err, _ := h.f.Apply(&raft.Log{Index: good + 4, Type: raft.LogCommand, Data: next}).(error); !errors.Is(err, ErrDamaged) {
		t.Errorf("apply after damage: %v", err)
	}
	if got := h.f.Applied(); got != good {
		t.Errorf("Applied %d, want %d (the entry before the damaged one)", got, good)
	}
	if ti, _ := h.f.Topic("t"); ti.Queues[0].Max != 1 {
		t.Errorf("queue end %d, want 1: nothing after the damaged entry may be applied", ti.Queues[0].Max)
	}
	if _, err := h.f.Topic("u"); err == nil {
		t.Error("a command after the damaged entry was applied")
	}
	if _, err := h.f.Snapshot(); !errors.Is(err, ErrDamaged) {
		t.Errorf("Snapshot of a damaged FSM: %v, want ErrDamaged", err)
	}
	if at, err := h.f.Damaged(); at != good+1 || !errors.Is(err, raftlog.ErrCorrupt) {
		t.Errorf("Damaged() = %d, %v", at, err)
	}
	if len(calls) != 1 || calls[0] != good+1 {
		t.Errorf("OnDamaged calls %v, want [%d]", calls, good+1)
	}
}

// TestDamagedFramingStopsFSM: a metadata command whose CRC does not match
// and a command with a damaged type byte stop the FSM too; a CRC-valid but
// undecodable command is rejected alike on every node and the FSM goes on.
func TestDamagedFramingStopsFSM(t *testing.T) {
	meta := EncodeCreateTopic("t", 1, false)
	meta[len(meta)-2] ^= 0x01
	typ := raftlog.EncodeBatch(&raftlog.Request{Topic: "t"})
	typ[0] = 9
	for name, data := range map[string][]byte{"meta crc": meta, "type byte": typ, "empty": {}} {
		h := newHarness(t)
		if err, _ := h.apply(data).(error); !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: %v, want ErrDamaged", name, err)
		}
		if h.f.Applied() != 0 {
			t.Errorf("%s: Applied %d", name, h.f.Applied())
		}
	}

	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	// A valid CRC over a request that walks past the end of the entry.
	malformed := raftlog.NewBatchBuilder(0, raftlog.BatchV1)
	malformed.Add(&raftlog.Request{Topic: "t", Messages: msgs(0, "a")})
	data := malformed.Finish()
	data = refreshBatchCRC(data[:len(data)-1]) // the last body byte is missing
	if err, _ := h.apply(data).(error); err == nil || errors.Is(err, ErrDamaged) {
		t.Fatalf("malformed batch with a valid CRC: %v, want a rejection that is not damage", err)
	}
	h.produce(&raftlog.Request{Topic: "t", Messages: msgs(0, "b")})
	if at, _ := h.f.Damaged(); at != 0 || h.f.Applied() != 3 {
		t.Fatalf("after a malformed batch: damaged at %d, applied %d", at, h.f.Applied())
	}
}

// refreshBatchCRC recomputes a batch's CRC32C over its bytes after the
// header's CRC field (version 1 layout: type, version, crc, count).
func refreshBatchCRC(data []byte) []byte {
	c := castagnoliSum(data[6:])
	data[2], data[3], data[4], data[5] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return data
}

func castagnoliSum(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
