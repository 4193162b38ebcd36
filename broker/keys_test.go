package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func newKeyBroker(t *testing.T) (*Broker, *fakeReplica) {
	t.Helper()
	f := newFakeReplica("n1")
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClientAddr, cfg.RetentionAge = "n1", "n1:9000", 0
	cfg.KeyIndexDir = t.TempDir()
	cfg.KeyIndexSlots, cfg.KeyIndexEntries = 8, 16 // collisions and many files
	b, err := New(cfg, Replica{Writer: f, State: f, Leadership: f, Membership: f, Snapshots: f}, f, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, f
}

// find waits until the index has caught up with what was applied, then
// looks the key up.
func find(t *testing.T, b *Broker, req FindRequest) []Message {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); b.keys.Next() <= b.fsm.Applied(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("key index at %d, applied %d", b.keys.Next(), b.fsm.Applied())
		}
	}
	msgs, err := b.FindMessages(req)
	if err != nil {
		t.Fatalf("find %+v: %v", req, err)
	}
	return msgs
}

func where(ms []Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s/%d:%d=%s", m.Topic, m.Queue, m.Offset, m.Body))
	}
	return fmt.Sprint(out)
}

func TestFindMessagesByKey(t *testing.T) {
	b, _ := newKeyBroker(t)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		m := ProduceMessage{Body: []byte(fmt.Sprintf("b%d", i)), Key: fmt.Sprintf("order-%d customer-%d", i, i%3), Queue: int32(i % 2), HasQueue: true}
		if i == 7 {
			m.Properties = map[string]string{UniqKeyProperty: "U7"}
		}
		produce(t, b, ProduceRequest{Topic: "t", ProducerID: "p", Seq: uint64(i), Messages: []ProduceMessage{m}})
	}
	// A retry of sequence 4 is a duplicate: not stored again, not found twice.
	produce(t, b, ProduceRequest{Topic: "t", ProducerID: "p", Seq: 4, Messages: []ProduceMessage{{Body: []byte("b4"), Key: "order-4 customer-1", Queue: 0, HasQueue: true}}})
	produce(t, b, ProduceRequest{Topic: "u", Messages: []ProduceMessage{{Body: []byte("other topic"), Key: "order-4"}}})

	if got := where(find(t, b, FindRequest{Topic: "t", Key: "order-4"})); got != "[t/0:2=b4]" {
		t.Errorf("order-4: %s, want [t/0:2=b4] once", got)
	}
	got := find(t, b, FindRequest{Topic: "t", Key: "customer-1"})
	if len(got) != 10 || string(got[0].Body) != "b28" || string(got[9].Body) != "b1" {
		t.Errorf("customer-1: %s, want the 10 messages b28 .. b1, newest first", where(got))
	}
	for _, m := range got {
		if m.ID == "" || m.Timestamp == 0 {
			t.Errorf("message without id or timestamp: %+v", m)
		}
	}
	if got := where(find(t, b, FindRequest{Topic: "t", Key: "customer-1", Max: 3})); got != "[t/0:14=b28 t/1:12=b25 t/0:11=b22]" {
		t.Errorf("customer-1, max 3: %s", got)
	}
	if got := where(find(t, b, FindRequest{Topic: "t", Key: "U7"})); got != "[t/1:3=b7]" {
		t.Errorf("UNIQ_KEY U7: %s", got)
	}
	if got := find(t, b, FindRequest{Topic: "t", Key: "order-99"}); len(got) != 0 {
		t.Errorf("absent key: %s", where(got))
	}
	if got := find(t, b, FindRequest{Topic: "t", Key: "order-5", EndMS: 1}); len(got) != 0 {
		t.Errorf("outside the time window: %s", where(got))
	}

	for _, bad := range []FindRequest{{Topic: "t", Key: ""}, {Topic: "t", Key: "two words"}, {Topic: "bad name", Key: "k"}, {Topic: "t", Key: "k", BeginMS: 5, EndMS: 1}} {
		if _, err := b.FindMessages(bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("find %+v: %v, want invalid argument", bad, err)
		}
	}
	if _, err := b.FindMessages(FindRequest{Topic: "nope", Key: "k"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown topic: %v", err)
	}

	// A deleted topic's messages are never answered, even when it exists
	// again under the name.
	if err := b.DeleteTopic(ctx, "t", true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}
	if got := find(t, b, FindRequest{Topic: "t", Key: "order-4"}); len(got) != 0 {
		t.Errorf("order-4 after the topic was deleted and created again: %s", where(got))
	}
}
