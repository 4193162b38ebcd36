package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func sampleRequests() []*Request {
	return []*Request{
		{ProducerID: "p1", Seq: 7, Topic: "orders", Messages: []Message{
			{Queue: 0, Timestamp: 1700000000000, Key: "k1", Tag: "t", Properties: map[string]string{"a": "1", "b": ""}, Body: []byte("hello")},
			{Queue: 3, Timestamp: -5, Body: []byte{}},
		}},
		{Topic: "x", Messages: []Message{{Queue: 1 << 20, Body: bytes.Repeat([]byte{0xff}, 1000)}}},
	}
}

func encodeBatchVersion(version byte, reqs ...*Request) []byte {
	b := NewBatchBuilder(0, BatchVersion(version))
	for _, r := range reqs {
		b.Add(r)
	}
	return b.Finish()
}

func encodeBatchV1(reqs ...*Request) []byte { return encodeBatchVersion(batchVersion1, reqs...) }
func encodeBatchV2(reqs ...*Request) []byte { return encodeBatchVersion(batchVersion2, reqs...) }
func encodeBatchV3(reqs ...*Request) []byte { return encodeBatchVersion(batchVersion3, reqs...) }

var batchEncoders = map[string]func(...*Request) []byte{"v1": encodeBatchV1, "v2": encodeBatchV2, "v3": encodeBatchV3}

// testEntryAt is the entry time the tests decode with.
const testEntryAt = 1_800_000_000_123

func TestBatchRoundTrip(t *testing.T) {
	for name, enc := range batchEncoders {
		t.Run(name, func(t *testing.T) { testBatchRoundTrip(t, enc) })
	}
}

// testBatchRoundTrip: what was encoded decodes, and a message without a
// timestamp gets the entry's (version 3) or the builder's clock.
func testBatchRoundTrip(t *testing.T, enc func(...*Request) []byte) {
	reqs := sampleRequests()
	before := time.Now().UnixMilli()
	data := enc(reqs...)
	after := time.Now().UnixMilli()
	got, err := DecodeBatch(data, testEntryAt)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reqs) {
		t.Fatalf("%d requests, want %d", len(got), len(reqs))
	}
	for i := range reqs {
		want := *reqs[i]
		want.Messages = slices.Clone(want.Messages)
		for j := range want.Messages {
			if len(want.Messages[j].Properties) == 0 {
				want.Messages[j].Properties = nil
			}
			if want.Messages[j].Timestamp != 0 || j >= len(got[i].Messages) {
				continue
			}
			switch ts := got[i].Messages[j].Timestamp; {
			case data[1] == batchVersion3:
				want.Messages[j].Timestamp = testEntryAt
			case ts >= before && ts <= after:
				want.Messages[j].Timestamp = ts
			}
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, got[i], want)
		}
	}
}

func TestBatchDetectsCorruption(t *testing.T) {
	for name, enc := range batchEncoders {
		t.Run(name, func(t *testing.T) { testBatchDetectsCorruption(t, enc) })
	}
}

func testBatchDetectsCorruption(t *testing.T, enc func(...*Request) []byte) {
	data := enc(sampleRequests()...)
	for _, pos := range []int{0, 1, 3, 8, 12, len(data) / 2, len(data) - 1} {
		bad := append([]byte{}, data...)
		bad[pos] ^= 0x40
		if _, err := DecodeBatch(bad, 0); !errors.Is(err, ErrCorrupt) {
			t.Errorf("flip at %d: err %v, want ErrCorrupt", pos, err)
		}
	}
	if _, err := DecodeBatch(data[:len(data)-1], 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: err %v, want ErrCorrupt", err)
	}
	if _, err := DecodeBatch(nil, 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty: err %v", err)
	}
}

func TestBatchBuilderIncremental(t *testing.T) {
	reqs := sampleRequests()
	reqs[1].Messages[0].Timestamp = 1 // stamped by neither builder's clock
	b := NewBatchBuilder(16, BatchV1)
	for _, r := range reqs {
		b.Add(r)
	}
	if b.Count() != 2 || b.Len() <= batchHeaderLen {
		t.Fatalf("count %d len %d", b.Count(), b.Len())
	}
	if !bytes.Equal(b.Finish(), EncodeBatch(reqs...)) {
		t.Fatal("builder and EncodeBatch disagree")
	}
}

// TestBatchV2Size pins what version 2 saves on a request of one plain
// message: the request count and two of the three empty lengths.
func TestBatchV2Size(t *testing.T) {
	r := &Request{ProducerID: "p-b15d51d2ae0bb760", Seq: 8727, Topic: "bench",
		Messages: []Message{{Queue: 1, Timestamp: 1796543585836, Body: make([]byte, 16)}}}
	v1, v2 := encodeBatchV1(r), encodeBatchV2(r)
	if len(v1) != 65 || len(v2) != 59 {
		t.Fatalf("version 1 %d bytes, version 2 %d: want 65 and 59", len(v1), len(v2))
	}
}

// TestBatchV3Size pins what version 3 saves on the SDK's request of one
// 16-byte message, which the broker stamps: the 6-byte timestamp (and its
// 11-character producer id).
func TestBatchV3Size(t *testing.T) {
	r := &Request{ProducerID: "sTIGpA3xqaQ", Seq: 8727, Topic: "bench",
		Messages: []Message{{Queue: 1, Body: make([]byte, 16)}}}
	v2, v3 := encodeBatchV2(r), encodeBatchV3(r)
	if len(v2) != 52 || len(v3) != 46 {
		t.Fatalf("version 2 %d bytes, version 3 %d: want 52 and 46", len(v2), len(v3))
	}
}

// TestNumberedProducers: version 3 stores a producer id "#<n>" as the
// number (two bytes for n below 16128) and reads back the same id; any
// other id, and every id in the other versions, as its characters.
func TestNumberedProducers(t *testing.T) {
	maxN := fmt.Sprint(uint64(math.MaxUint64 - numberedProducer))
	for _, c := range []struct {
		id       string
		numbered bool
	}{
		{"#0", true}, {"#5", true}, {"#16127", true}, {"#16128", true}, {"#" + maxN, true},
		{"#007", false}, {"#", false}, {"#-1", false}, {"#+1", false}, {"#12a", false}, {"x#1", false}, {"", false},
		{"#18446744073709551615", false}, {"#99999999999999999999", false}, {"sTIGpA3xqaQ", false},
	} {
		n, ok := producerNumber(c.id)
		if ok != c.numbered {
			t.Errorf("%q: numbered %v, want %v", c.id, ok, c.numbered)
		}
		r := &Request{ProducerID: c.id, Seq: 3, Topic: "t", Messages: []Message{{Timestamp: 9, Body: []byte("b")}}}
		for _, v := range []byte{batchVersion1, batchVersion2, batchVersion3} {
			got, err := DecodeBatch(encodeBatchVersion(v, r), 0)
			if err != nil || len(got) != 1 || got[0].ProducerID != c.id {
				t.Errorf("%q in version %d: read back %+v, %v", c.id, v, got, err)
			}
		}
		want := 0 // bytes version 3 saves
		if c.numbered {
			want = 1 + len(c.id) - len(binary.AppendUvarint(nil, numberedProducer+n))
		}
		if v2, v3 := len(encodeBatchV2(r)), len(encodeBatchV3(r)); v2-v3 != want {
			t.Errorf("%q: version 3 is %d bytes, version 2 %d: want %d fewer", c.id, v3, v2, want)
		}
	}
	if n := len(encodeBatchV3(&Request{ProducerID: "#16127", Topic: "t"})) - len(encodeBatchV3(&Request{ProducerID: "", Topic: "t"})); n != 1 {
		t.Errorf("producer #16127 takes %d bytes more than an empty id, want 1 (a 2-byte number)", n)
	}
}

// TestDigestSameInBothVersions: a request has one digest whichever format
// its entry has, so that a retry stored in the other format is still
// recognised as the same request.
func TestDigestSameInBothVersions(t *testing.T) {
	reqs := append(sampleRequests(), &Request{Topic: "k", Messages: []Message{{Key: "only-key", Body: []byte("b")}, {Tag: "only-tag"}}})
	digests := func(data []byte) []uint64 {
		b, err := ParseBatch(data, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		if err := b.Each(func(_ int, rv *RequestView) bool { out = append(out, rv.Digest()); return true }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	d1 := digests(encodeBatchV1(reqs...))
	if d2 := digests(encodeBatchV2(reqs...)); !reflect.DeepEqual(d1, d2) {
		t.Fatalf("digests differ: version 1 %x, version 2 %x", d1, d2)
	}
	if d3 := digests(encodeBatchV3(reqs...)); !reflect.DeepEqual(d1, d3) {
		t.Fatalf("digests differ: version 1 %x, version 3 %x", d1, d3)
	}
}

func TestMessageID(t *testing.T) {
	if got := MessageID(0x1A, 0xB); got != "000000000000001A0000000B" {
		t.Fatalf("got %s", got)
	}
	if idx, err := MessageIndex(MessageID(0x1A, 0xB)); err != nil || idx != 0x1A {
		t.Errorf("MessageIndex: %d %v", idx, err)
	}
	if _, err := MessageIndex("1A"); err == nil {
		t.Error("MessageIndex took a short id")
	}
	if MessageID(1, 2) == MessageID(2, 1) {
		t.Fatal("ids collide")
	}
}

// FuzzParseBatch: any input either decodes or fails with ErrCorrupt; it
// never panics, and what decodes re-encodes to a batch that decodes equal.
func FuzzParseBatch(f *testing.F) {
	f.Add(EncodeBatch(sampleRequests()...))
	f.Add(EncodeBatch(&Request{Topic: "t", Messages: []Message{{Body: []byte("x")}}}))
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(encodeBatchV2(sampleRequests()...))
	f.Add(encodeBatchV2(&Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: []Message{{Key: "k", Body: []byte("x")}}}))
	f.Add([]byte{1, 2, 0, 0, 0, 0})
	f.Add(encodeBatchV3(sampleRequests()...))
	f.Add(encodeBatchV3(&Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: []Message{{Tag: "g", Body: []byte("x")}, {Timestamp: 5}}}))
	f.Add(encodeBatchV3(&Request{ProducerID: "#42", Seq: 2, Topic: "t", Messages: []Message{{Body: []byte("x")}}}, &Request{ProducerID: "#0", Topic: "u"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Also try the input with a correct CRC so that the fuzzer gets past it.
		// ParseReadBatch trusts the CRC: decoding must still end in
		// ErrCorrupt or success on any input, never panic.
		if b, err := ParseReadBatch(data, testEntryAt); err == nil {
			each, err := eachTrace(b, nil)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseReadBatch: error not ErrCorrupt: %v", err)
			}
			walk, werr := walkTrace(b, nil)
			if (err == nil) != (werr == nil) || (err == nil && walk != each) {
				t.Fatalf("Walk and Each differ:\n%v: %s\n%v: %s", werr, walk, err, each)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ParseReadBatch: error not ErrCorrupt: %v", err)
		}
		for _, in := range [][]byte{data, fixCRC(data)} {
			reqs, err := DecodeBatch(in, testEntryAt)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("error not ErrCorrupt: %v", err)
				}
				continue
			}
			ptrs := make([]*Request, len(reqs))
			for i := range reqs {
				ptrs[i] = &reqs[i]
				for j := range reqs[i].Messages {
					if m := &reqs[i].Messages[j]; m.Timestamp == 0 {
						m.Timestamp = 1 // a timestamp of its own: re-encoded the same in every version
					}
				}
			}
			again, err := DecodeBatch(EncodeBatch(ptrs...), 0)
			if err != nil || len(again) != len(reqs) {
				t.Fatalf("re-encode: %v (%d vs %d)", err, len(again), len(reqs))
			}
			// Every format holds the same requests with the same digests.
			var digests [][]uint64
			for _, v := range []byte{batchVersion1, batchVersion2, batchVersion3} {
				enc := encodeBatchVersion(v, ptrs...)
				if again2, err := DecodeBatch(enc, testEntryAt); err != nil || !reflect.DeepEqual(again2, again) {
					t.Fatalf("version %d re-encode: %v\n got %+v\nwant %+v", v, err, again2, again)
				}
				b, _ := ParseBatch(enc, 0)
				var d []uint64
				b.Each(func(_ int, rv *RequestView) bool { d = append(d, rv.Digest()); return true })
				if len(digests) > 0 && !reflect.DeepEqual(d, digests[0]) {
					t.Fatalf("digests differ between the formats: version 1 %x, version %d %x", digests[0], v, d)
				}
				digests = append(digests, d)
			}
		}
	})
}

func fixCRC(data []byte) []byte {
	if len(data) < batchHeaderLen {
		return data
	}
	out := append([]byte{}, data...)
	out[0] = byte(CmdBatch)
	if out[1] != batchVersion2 && out[1] != batchVersion3 {
		out[1] = batchVersion1
	}
	c := crc32Of(out[6:])
	out[2], out[3], out[4], out[5] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return out
}

// BenchmarkBatchVersions compares the two batch formats: encoding, and a
// walk of every message with its digest as the state machine does.
func BenchmarkBatchVersions(b *testing.B) {
	shapes := []struct {
		name       string
		reqs, msgs int
		body       int
	}{{"1x1/16B", 1, 1, 16}, {"64x1/1024B", 64, 1, 1024}, {"1x64/100B", 1, 64, 100}}
	for _, sh := range shapes {
		var reqs []*Request
		for i := range sh.reqs {
			r := &Request{ProducerID: "p-b15d51d2ae0bb760", Seq: uint64(i), Topic: "bench"}
			for range sh.msgs {
				r.Messages = append(r.Messages, Message{Queue: uint32(i % 4), Timestamp: 1796543585836, Body: make([]byte, sh.body)})
			}
			reqs = append(reqs, r)
		}
		for _, v := range []byte{batchVersion1, batchVersion2} {
			data := encodeBatchVersion(v, reqs...)
			b.Run(fmt.Sprintf("v%d/encode/%s", v, sh.name), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					bb := NewBatchBuilder(len(data), BatchVersion(v))
					for _, r := range reqs {
						bb.Add(r)
					}
					bb.Finish()
				}
			})
			b.Run(fmt.Sprintf("v%d/apply/%s", v, sh.name), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					batch, err := ParseBatch(data, 0)
					if err != nil {
						b.Fatal(err)
					}
					batch.Each(func(_ int, rv *RequestView) bool {
						rv.Digest()
						rv.Messages(func(_ int, m *MessageView) bool { return true })
						return true
					})
				}
			})
		}
	}
}

// eachTrace lists what Each and RequestView.Messages show of b, the
// messages of the requests that want picks (nil: all).
func eachTrace(b Batch, want func(i int) bool) (string, error) {
	var out strings.Builder
	err := b.Each(func(i int, rv *RequestView) bool {
		fmt.Fprintf(&out, "r%d %q %d %q %d;", i, rv.ProducerID, rv.Seq, rv.Topic, rv.Count)
		if want == nil || want(i) {
			rv.Messages(func(j int, m *MessageView) bool { traceMessage(&out, j, m); return true })
		}
		return true
	})
	return out.String(), err
}

// walkTrace is eachTrace through Walk.
func walkTrace(b Batch, want func(i int) bool) (string, error) {
	var out strings.Builder
	err := b.Walk(func(i int, h *RequestHeader) bool {
		fmt.Fprintf(&out, "r%d %q %d %q %d;", i, h.ProducerID, h.Seq, h.Topic, h.Count)
		return want == nil || want(i)
	}, func(j int, m *MessageView) bool { traceMessage(&out, j, m); return true })
	return out.String(), err
}

func traceMessage(out *strings.Builder, j int, m *MessageView) {
	fmt.Fprintf(out, " m%d q%d t%d %q %q %v %q;", j, m.Queue, m.Timestamp, m.Key, m.Tag, m.Properties(), m.Body)
}

func TestWalkDecodesAsEach(t *testing.T) {
	reqs := sampleRequests()
	odd := func(i int) bool { return i%2 == 1 }
	for _, data := range [][]byte{encodeBatchV1(reqs...), encodeBatchV2(reqs...)} {
		b, err := ParseBatch(data, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []func(int) bool{nil, odd} {
			each, err := eachTrace(b, want)
			if err != nil {
				t.Fatal(err)
			}
			walk, err := walkTrace(b, want)
			if err != nil {
				t.Fatal(err)
			}
			if walk != each || !strings.Contains(each, " m0 ") {
				t.Fatalf("Walk shows\n%s\nEach shows\n%s", walk, each)
			}
		}
		// msg returning false ends the walk.
		n := 0
		if err := b.Walk(func(int, *RequestHeader) bool { return true }, func(int, *MessageView) bool { n++; return n < 2 }); err != nil || n != 2 {
			t.Fatalf("walk stopped after %d messages (%v), want 2", n, err)
		}
	}
}
