package raftlog

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/raft-wal/segment"
)

// TestMaxEntryBytesBelowWALReadLimit: an entry of MaxEntryBytes plus raft's
// framing must stay readable by raft-wal (the defect "one large request
// stops all writes for good" wrote an entry its leader could not read back).
func TestMaxEntryBytesBelowWALReadLimit(t *testing.T) {
	if MaxEntryBytes+64<<10 > segment.MaxEntrySize {
		t.Fatalf("MaxEntryBytes %d leaves less than 64 KiB below raft-wal's %d", MaxEntryBytes, segment.MaxEntrySize)
	}
}

func TestVarintSizes(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 16383, 16384, 1<<35 - 1, 1 << 35, math.MaxUint64 >> 1, math.MaxUint64} {
		if got, want := uvarintSize(v), len(binary.AppendUvarint(nil, v)); got != want {
			t.Errorf("uvarintSize(%d) = %d, want %d", v, got, want)
		}
	}
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 1780000000000, -1780000000000, math.MaxInt64, math.MinInt64} {
		if got, want := varintSize(v), len(binary.AppendVarint(nil, v)); got != want {
			t.Errorf("varintSize(%d) = %d, want %d", v, got, want)
		}
	}
}

// TestEncodedSizeMatchesBatchBuilder checks Request.EncodedSize against the
// bytes BatchBuilder writes, for the shapes the request bound must count:
// keys, tags, properties, bodies and the counts in between.
func TestEncodedSizeMatchesBatchBuilder(t *testing.T) {
	props := map[string]string{}
	for i := 0; i < 128; i++ {
		props[strings.Repeat("k", i+1)] = strings.Repeat("v", i*100)
	}
	cases := []*Request{
		{Topic: "t", Messages: []Message{{}}},
		{ProducerID: strings.Repeat("p", 255), Seq: math.MaxUint64, Topic: strings.Repeat("t", 255), Messages: []Message{{Queue: math.MaxUint32, Timestamp: math.MinInt64}}},
		{Topic: "keys", Messages: repeatMsg(Message{Key: strings.Repeat("k", 16<<10), Body: []byte("x")}, 300)},
		{Topic: "props", Messages: repeatMsg(Message{Queue: 1023, Timestamp: 1780000000000, Properties: props, Body: make([]byte, 200)}, 3)},
		{Topic: "one-prop", Messages: []Message{{Tag: "tag", Properties: map[string]string{"a": ""}, Body: make([]byte, 1<<20)}}},
	}
	for i, r := range cases {
		checkEncodedSize(t, i, r)
	}
}

func repeatMsg(m Message, n int) []Message {
	out := make([]Message, n)
	for i := range out {
		out[i] = m
	}
	return out
}

func checkEncodedSize(t *testing.T, i int, r *Request) {
	t.Helper()
	b := NewBatchBuilder(0)
	b.Add(r)
	if got, want := r.EncodedSize(), b.Len()-BatchOverhead; got != want {
		t.Errorf("case %d: EncodedSize %d, BatchBuilder wrote %d", i, got, want)
	}
	if got := NewBatchBuilder(0).Len(); got != BatchOverhead {
		t.Errorf("an empty batch is %d bytes, BatchOverhead says %d", got, BatchOverhead)
	}
	b2 := newBatchBuilder(0, batchVersion2)
	b2.Add(r)
	if got, want := r.encodedSize(batchVersion2), b2.Len()-batchV2HeaderLen; got != want {
		t.Errorf("case %d: version 2 size %d, BatchBuilder wrote %d", i, got, want)
	}
}

func FuzzEncodedSize(f *testing.F) {
	f.Add("p", uint64(1), "topic", uint32(3), int64(1780000000000), "key", "tag", "pk", "pv", 3, []byte("body"))
	f.Add("", uint64(0), "", uint32(0), int64(-1), "", "", "", "", 0, []byte{})
	f.Fuzz(func(t *testing.T, pid string, seq uint64, topic string, q uint32, ts int64, key, tag, pk, pv string, nprops int, body []byte) {
		m := Message{Queue: q, Timestamp: ts, Key: key, Tag: tag, Body: body}
		if nprops = nprops % 8; nprops < 0 {
			nprops = -nprops
		}
		if nprops > 0 {
			m.Properties = map[string]string{}
			for j := 0; j < nprops; j++ {
				m.Properties[pk+strings.Repeat("x", j)] = pv
			}
		}
		checkEncodedSize(t, 0, &Request{ProducerID: pid, Seq: seq, Topic: topic, Messages: []Message{m, m}})
	})
}
