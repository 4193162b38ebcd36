package raftlog

import (
	"strings"
	"testing"
)

func digestOf(t *testing.T, r *Request) uint64 {
	t.Helper()
	b, err := ParseBatch(EncodeBatch(r), 0)
	if err != nil {
		t.Fatal(err)
	}
	var d uint64
	if err := b.Each(func(_ int, rv *RequestView) bool { d = rv.Digest(); return true }); err != nil {
		t.Fatal(err)
	}
	return d
}

func digestBase() *Request {
	return &Request{ProducerID: "p", Seq: 7, Topic: "t", Messages: []Message{
		{Queue: 1, Timestamp: 100, Key: "k", Tag: "tag", Properties: map[string]string{"a": "1", "b": "2", "c": "3"}, Body: []byte("one")},
		{Queue: 2, Timestamp: 101, Body: []byte("two")},
	}}
}

// TestDigestIgnoresTimestampAndIdentity: a retry re-stamped by another
// leader, or carrying another producer id/sequence, has the same digest.
func TestDigestIgnoresTimestampAndIdentity(t *testing.T) {
	want := digestOf(t, digestBase())
	r := digestBase()
	r.Messages[0].Timestamp, r.Messages[1].Timestamp = 9999999999, -5
	r.ProducerID, r.Seq = "other", 8
	// Another map with the same properties (Go randomises map order).
	r.Messages[0].Properties = map[string]string{"c": "3", "b": "2", "a": "1"}
	if got := digestOf(t, r); got != want {
		t.Fatalf("digest %016x, want %016x", got, want)
	}
}

// TestDigestCoversContent: every part of the content but the timestamp
// changes the digest, including bytes moved from one field to the next.
func TestDigestCoversContent(t *testing.T) {
	base := digestOf(t, digestBase())
	changes := map[string]func(r *Request){
		"topic":         func(r *Request) { r.Topic = "u" },
		"queue":         func(r *Request) { r.Messages[1].Queue = 3 },
		"key":           func(r *Request) { r.Messages[0].Key = "K" },
		"tag":           func(r *Request) { r.Messages[0].Tag = "TAG" },
		"key into tag":  func(r *Request) { r.Messages[0].Key, r.Messages[0].Tag = "ktag", "" },
		"property":      func(r *Request) { r.Messages[0].Properties["b"] = "x" },
		"property gone": func(r *Request) { delete(r.Messages[0].Properties, "c") },
		"body":          func(r *Request) { r.Messages[1].Body = []byte("TWO") },
		"body into key": func(r *Request) { r.Messages[1].Key, r.Messages[1].Body = "t", []byte("wo") },
		"more messages": func(r *Request) { r.Messages = append(r.Messages, Message{Queue: 1, Body: []byte("three")}) },
		"fewer":         func(r *Request) { r.Messages = r.Messages[:1] },
		"order":         func(r *Request) { r.Messages[0], r.Messages[1] = r.Messages[1], r.Messages[0] },
	}
	for name, change := range changes {
		r := digestBase()
		change(r)
		if got := digestOf(t, r); got == base {
			t.Errorf("%s: digest unchanged (%016x)", name, got)
		}
	}
}

// TestDigestAllocatesOncePerRequest: one allocation for the request, none
// per message.
func TestDigestAllocatesOncePerRequest(t *testing.T) {
	for _, version := range []byte{batchVersion1, batchVersion2} {
		for _, n := range []int{1, 100} {
			r := digestBase()
			for len(r.Messages) < n {
				r.Messages = append(r.Messages, r.Messages[0])
			}
			r.Messages = r.Messages[:n]
			b, err := ParseBatch(encodeBatchVersion(version, r), 0)
			if err != nil {
				t.Fatal(err)
			}
			var rv *RequestView
			b.Each(func(_ int, r *RequestView) bool { rv = r; return true })
			if got := testing.AllocsPerRun(100, func() { rv.Digest() }); got > 1 {
				t.Errorf("version %d: Digest of %d messages allocates %.0f times, want 1", version, n, got)
			}
		}
	}
}

// TestDigestValueIsFixed: digests are kept in the replicated dedupe table
// and in snapshots, and a retry after an upgrade is compared with a digest
// an older release computed. The value of a fixed request must never
// change, whatever the implementation.
func TestDigestValueIsFixed(t *testing.T) {
	const want = uint64(0xe0093f6cb65c62f0)
	if got := digestOf(t, digestBase()); got != want {
		t.Errorf("digest %#x, want %#x: the digest function changed, and retries across an upgrade would be refused as reused sequences", got, want)
	}
}

// TestDigestValueIsFixedForLargePieces: the same for a request whose key,
// property and binary body are long enough to bypass the digest's buffer,
// between short ones, in every batch version.
func TestDigestValueIsFixedForLargePieces(t *testing.T) {
	body := make([]byte, 3000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	r := &Request{ProducerID: "p", Seq: 9, Topic: "orders", Messages: []Message{
		{Queue: 3, Timestamp: 100, Key: strings.Repeat("k", 300), Tag: "t", Properties: map[string]string{"big": strings.Repeat("v", 400), "a": "1"}, Body: body},
		{Queue: 1, Timestamp: 101, Body: []byte{0, 1, 2}},
		{Queue: 2, Timestamp: 102, Key: "short", Body: body[:257]},
	}}
	const want = uint64(0xba07cb8394c8444b) // what the digest gave before it was buffered
	for _, v := range []byte{batchVersion1, batchVersion2, batchVersion3} {
		b, err := ParseBatch(encodeBatchVersion(v, r), 0)
		if err != nil {
			t.Fatal(err)
		}
		b.Each(func(_ int, rv *RequestView) bool {
			if got := rv.Digest(); got != want {
				t.Errorf("version %d: digest %#x, want %#x", v, got, want)
			}
			return true
		})
	}
}
