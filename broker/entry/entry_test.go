package entry

import (
	"testing"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// An entry of three requests: r0 (t: q0 a, q1 b, q0 c), r1 refused (t: q0
// d), r2 (t: q0 e). Queue 0 of t stores a, c, e at offsets 10, 11, 12. c
// has a timestamp of its own (bornAt), the others the entry's (entryAt).
func testEntry() (raftlog.Entry, store.Location) {
	msg := func(q uint32, body string) raftlog.Message { return raftlog.Message{Queue: q, Body: []byte(body)} }
	c := msg(0, "c")
	c.Timestamp = bornAt
	b := raftlog.NewBatchBuilder(0, raftlog.BatchV3)
	for _, r := range []*raftlog.Request{
		{ProducerID: "p", Seq: 1, Topic: "t", Messages: []raftlog.Message{msg(0, "a"), msg(1, "b"), c}},
		{ProducerID: "p", Seq: 2, Topic: "t", Messages: []raftlog.Message{msg(0, "d")}},
		{ProducerID: "p", Seq: 3, Topic: "t", Messages: []raftlog.Message{msg(0, "e")}},
	} {
		b.Add(r)
	}
	return raftlog.Entry{Data: b.Finish(), At: entryAt}, store.Location{Base: 10, LogIndex: 7, Count: 3, Skip: []uint32{1}}
}

const entryAt, bornAt = 1_800_000_000_123, 1_700_000_000_456

func TestReadSkipsRefusedRequests(t *testing.T) {
	e, loc := testEntry()
	var got []string
	var offsets []uint64
	if err := Read(e, "t", 0, loc, func(s Stored) bool {
		got, offsets = append(got, string(s.View.Body)), append(offsets, s.Offset)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "c" || got[2] != "e" || offsets[0] != 10 || offsets[2] != 12 {
		t.Fatalf("read %v at %v, want [a c e] at [10 11 12]", got, offsets)
	}
	loc.Count = 4
	if err := Read(e, "t", 0, loc, func(Stored) bool { return true }); err == nil {
		t.Fatal("an index record that counts more messages than the entry holds: no error")
	}
}

func TestAtAndOffsetOf(t *testing.T) {
	e, loc := testEntry()
	cases := []struct {
		ordinal uint32
		body    string
		queue   int32
		offset  uint64
		stored  bool
	}{
		{0, "a", 0, 10, true},
		{2, "c", 0, 11, true},
		{3, "d", 0, 0, false}, // its request was refused
		{4, "e", 0, 12, true},
	}
	for _, c := range cases {
		m, _, ok, err := At(7, e, c.ordinal)
		if err != nil || !ok || string(m.Body) != c.body || m.Queue != c.queue || m.ID != raftlog.MessageID(7, c.ordinal) {
			t.Fatalf("At(%d) = %+v %v %v", c.ordinal, m, ok, err)
		}
		want := int64(entryAt)
		if c.body == "c" {
			want = bornAt
		}
		if m.Timestamp != want {
			t.Errorf("At(%d): timestamp %d, want %d", c.ordinal, m.Timestamp, want)
		}
		off, stored, err := OffsetOf(e, "t", c.queue, loc, c.ordinal)
		if err != nil || stored != c.stored || (stored && off != c.offset) {
			t.Errorf("OffsetOf(%d) = %d %v %v, want %d %v", c.ordinal, off, stored, err, c.offset, c.stored)
		}
	}
	if _, _, ok, err := At(7, e, 5); ok || err != nil {
		t.Errorf("At past the last message: ok %v, err %v", ok, err)
	}
}
