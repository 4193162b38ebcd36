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
	b := NewBatchBuilder(0, BatchV1)
	b.Add(r)
	if got, want := r.EncodedSize(), b.Len()-BatchOverhead; got != want {
		t.Errorf("case %d: EncodedSize %d, BatchBuilder wrote %d", i, got, want)
	}
	if got := NewBatchBuilder(0, BatchV1).Len(); got != BatchOverhead {
		t.Errorf("an empty batch is %d bytes, BatchOverhead says %d", got, BatchOverhead)
	}
	for _, v := range []byte{batchVersion2, batchVersion3} {
		b := NewBatchBuilder(0, BatchVersion(v))
		b.Add(r)
		if got, want := r.encodedSize(v), b.Len()-batchV2HeaderLen; got != want {
			t.Errorf("case %d: version %d size %d, BatchBuilder wrote %d", i, v, got, want)
		}
	}
	checkSmallestVersion(t, i, []*Request{r})
}

// checkSmallestVersion: SmallestVersion picks the version of fewer bytes
// (the later one on a tie) of those it may write, within the bound of
// BatchOverhead and EncodedSize.
func checkSmallestVersion(t *testing.T, i int, reqs []*Request) {
	t.Helper()
	sizes := map[BatchVersion]int{BatchV1: len(encodeBatchV1(reqs...)), BatchV2: len(encodeBatchV2(reqs...)), BatchV3: len(encodeBatchV3(reqs...))}
	bound := BatchOverhead
	for _, r := range reqs {
		bound += r.EncodedSize()
	}
	for _, max := range []BatchVersion{BatchV1, BatchV2, BatchV3} {
		want := BatchV1
		for v := BatchV2; v <= max; v++ {
			if sizes[v] <= sizes[want] {
				want = v
			}
		}
		got := SmallestVersion(max, reqs)
		if got != want {
			t.Errorf("case %d: SmallestVersion(%d) %d, but the versions take %v bytes", i, max, got, sizes)
		}
		if sizes[got] > bound {
			t.Errorf("case %d: version %d is %d bytes, above the bound of %d", i, got, sizes[got], bound)
		}
	}
}

// TestSmallestVersionWhenVersion2IsLarger: version 2 takes a byte more than
// version 1 for a message with a key, a tag and properties, so a batch of
// enough of them stays in version 1.
func TestSmallestVersionWhenVersion2IsLarger(t *testing.T) {
	full := Message{Key: "k", Tag: "t", Properties: map[string]string{"a": "b"}, Body: []byte("x")}
	for n, want := range map[int]BatchVersion{1: BatchV2, 4: BatchV2, 5: BatchV1, 50: BatchV1} {
		reqs := []*Request{{Topic: "t", Messages: repeatMsg(full, n)}}
		if got := SmallestVersion(BatchV2, reqs); got != want {
			t.Errorf("%d messages with key, tag and properties: version %d, want %d", n, got, want)
		}
		checkSmallestVersion(t, n, reqs)
	}
	plain := []*Request{{Topic: "t", Messages: repeatMsg(Message{Body: []byte("x")}, 3)}, {Topic: "u", Messages: []Message{{Key: "k"}}}}
	checkSmallestVersion(t, 0, plain)
	checkSmallestVersion(t, 1, append(plain, &Request{Topic: "t", Messages: repeatMsg(full, 40)}))
}

func TestReadByAll(t *testing.T) {
	for _, c := range []struct {
		reads []uint32
		want  BatchVersion
	}{
		{nil, BatchV3},
		{[]uint32{3, 3, 3}, BatchV3},
		{[]uint32{3, 4, 7}, BatchV3},
		{[]uint32{2, 2, 2}, BatchV2},
		{[]uint32{2, 3, 7}, BatchV2},
		{[]uint32{2, 0, 2}, BatchV1},
		{[]uint32{1, 2}, BatchV1},
		{[]uint32{0}, BatchV1},
	} {
		if got := ReadByAll(c.reads); got != c.want {
			t.Errorf("ReadByAll(%v) = %d, want %d", c.reads, got, c.want)
		}
	}
}

func FuzzEncodedSize(f *testing.F) {
	f.Add("p", uint64(1), "topic", uint32(3), int64(1780000000000), "key", "tag", "pk", "pv", 3, []byte("body"))
	f.Add("", uint64(0), "", uint32(0), int64(-1), "", "", "", "", 0, []byte{})
	f.Add("#42", uint64(7), "t", uint32(1), int64(0), "", "", "", "", 0, []byte("b"))
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
