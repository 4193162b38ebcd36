package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
)

// TestSendSaysWhyItWasRetrying: when the caller's context ends while the
// SDK is still retrying, the error names the last failure, not only the
// deadline.
func TestSendSaysWhyItWasRetrying(t *testing.T) {
	// A port that refuses connections: listen, note the address, close.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	c, err := New(Config{Servers: []string{addr}, RetryTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err = c.NewProducer().Send(ctx, "t", Message{Body: []byte("x")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("error does not say what failed: %v", err)
	}
}

// TestProducerIDs: a producer id is 11 URL-safe characters (64 random
// bits), and fresh producers never share one.
func TestProducerIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := newProducerID()
		if len(id) != 11 || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("producer id %q: want 11 URL-safe base64 characters", id)
		}
		if seen[id] {
			t.Fatalf("producer id %q twice", id)
		}
		seen[id] = true
	}
}

// A node that does not pack acks answers them one by one, and the producer
// takes either form; a count that does not match the messages is an error.
func TestResponseAcks(t *testing.T) {
	plain := &api.ProduceResponse{Acks: []*api.Ack{{Queue: 1, Offset: 4, Id: "000000000000000900000000"}}}
	if acks, err := plain.AcksFor(1); err != nil || acks[0] != plain.Acks[0] {
		t.Errorf("plain acks: %v, %v", acks, err)
	}
	packed := &api.ProduceResponse{PackedAcks: &api.PackedAcks{EntryIndex: 9, Queues: []uint32{1}, OffsetDeltas: []int64{4}}}
	if acks, err := packed.AcksFor(1); err != nil || acks[0].Id != plain.Acks[0].Id || acks[0].Offset != 4 || acks[0].Queue != 1 {
		t.Errorf("packed acks: %v, %v", acks, err)
	}
	for _, r := range []*api.ProduceResponse{plain, packed, {}} {
		if _, err := r.AcksFor(2); err == nil {
			t.Errorf("%v for 2 messages: no error", r)
		}
	}
}
