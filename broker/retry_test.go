package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
)

// TestLookupOffsetsWithSkippedRequests: a message's offset counts only the
// stored messages of its queue before it in the entry; a retry's id (the
// request the state machine skipped) is not found.
func TestLookupOffsetsWithSkippedRequests(t *testing.T) {
	b, f := newFakeBroker(t)
	ctx := context.Background()
	if _, err := b.CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}
	one := func(body string, q int32) ProduceMessage {
		return ProduceMessage{Body: []byte(body), Queue: q, HasQueue: true}
	}
	first, err := b.Produce(ctx, ProduceRequest{Topic: "t", ProducerID: "p", Seq: 1, Messages: []ProduceMessage{one("a", 0), one("b", 1), one("c", 0)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range first.Acks {
		r, err := b.LookupMessage(ctx, a.ID())
		if err != nil || r.Message.Offset != a.Offset || r.Message.Queue != int32(a.Queue) || r.ServedBy != b.ID() {
			t.Fatalf("lookup %s: %+v %v, want %d/%d", a.ID(), r, err, a.Queue, a.Offset)
		}
	}
	// One entry: a retry of the first request (skipped) and a new one.
	retry := &raftlog.Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: []raftlog.Message{{Queue: 0, Body: []byte("a")}, {Queue: 1, Body: []byte("b")}, {Queue: 0, Body: []byte("c")}}}
	fresh := &raftlog.Request{Topic: "t", Messages: []raftlog.Message{{Queue: 1, Body: []byte("d")}, {Queue: 0, Body: []byte("e")}}}
	res, err := f.Produce([]*raftlog.Request{retry, fresh}, 0, 0).Wait()
	if err != nil || !res[0].Duplicate {
		t.Fatalf("batch: %v %v", res, err)
	}
	index := f.Applied()
	if _, err := b.LookupMessage(ctx, raftlog.MessageID(index, 0)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("id of the skipped retry: %v, want not found", err)
	}
	for j, a := range res[1].Acks {
		id := raftlog.MessageID(index, 3+uint32(j))
		r, err := b.LookupMessage(ctx, id)
		if err != nil || r.Message.Offset != a.Offset || r.Message.Queue != int32(a.Queue) || string(r.Message.Body) != string(fresh.Messages[j].Body) {
			t.Fatalf("lookup %s: %+v %v, want %d/%d", id, r.Message, err, a.Queue, a.Offset)
		}
	}
	if _, err := b.LookupMessage(ctx, "nonsense"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("malformed id: %v", err)
	}
	if _, err := b.LookupMessage(ctx, "00000000000FFFFF00000000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestProduceToRetryTopicPastLimit: a client's own retry (a produce to
// %RETRY%<group>) past its limit is stored in %DLQ%<group>; one within it
// stays; a request mixing both is refused; SendBack's copies are never
// moved (their count is at most the limit).
func TestProduceToRetryTopicPastLimit(t *testing.T) {
	b, _ := newFakeBroker(t)
	ctx := context.Background()
	msg := func(n, max string) ProduceMessage {
		p := map[string]string{mq.PropReconsumeTime: n, mq.PropRetryTopic: "orders", mq.PropRealQueue: "1"}
		if max != "" {
			p[mq.PropMaxReconsumeTimes] = max
		}
		return ProduceMessage{Body: []byte(n), Properties: p}
	}
	if _, err := b.Produce(ctx, ProduceRequest{Topic: "%RETRY%g", Messages: []ProduceMessage{msg("16", "")}}); err != nil {
		t.Fatal(err)
	}
	if b.fsm.QueueCount("%DLQ%g") != 0 {
		t.Fatal("count 16 of 16 dead-lettered")
	}
	if _, err := b.Produce(ctx, ProduceRequest{Topic: "%RETRY%g", Messages: []ProduceMessage{msg("17", "")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Produce(ctx, ProduceRequest{Topic: "%RETRY%g", Messages: []ProduceMessage{msg("3", "2")}}); err != nil {
		t.Fatal(err)
	}
	// The client's fallback sends DELAY = 3 + count along: a dead letter
	// is stored at once, not staged (this fake keeps no schedule state
	// and would refuse a delayed produce).
	past := msg("18", "")
	past.Properties[mq.PropDelay] = "20"
	if _, err := b.Produce(ctx, ProduceRequest{Topic: "%RETRY%g", Messages: []ProduceMessage{past}}); err != nil {
		t.Fatalf("a dead letter that carried DELAY: %v", err)
	}
	ti, err := b.Topic("%DLQ%g")
	if err != nil || ti.Queues[0].Max != 3 {
		t.Fatalf("dead-letter topic: %+v %v, want 3 messages", ti, err)
	}
	for _, a := range []string{raftlogID(b, "%DLQ%g", 0), raftlogID(b, "%DLQ%g", 1)} {
		r, err := b.LookupMessage(ctx, a)
		if err != nil || r.Message.Properties[mq.PropDeadLetterReason] == "" || r.Message.Properties[mq.PropRealQueue] != "" {
			t.Fatalf("dead letter %s: %+v %v", a, r.Message, err)
		}
	}
	if _, err := b.Produce(ctx, ProduceRequest{Topic: "%RETRY%g", Messages: []ProduceMessage{msg("1", ""), msg("20", "")}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("mixed request: %v", err)
	}
}

// raftlogID is the id of the message at offset of queue 0 of topic.
func raftlogID(b *Broker, topic string, offset uint64) string {
	locs, _, _ := b.fsm.Locate(topic, 0, offset, 1)
	return raftlog.MessageID(locs[0].LogIndex, 0)
}

// TestSendBackHonoursMessageLimit: a message's own MAX_RECONSUME_TIMES
// decides where its send-back goes when the request names no limit, and the
// answer says where the copy is.
func TestSendBackHonoursMessageLimit(t *testing.T) {
	b, _ := newFakeBroker(t)
	ctx := context.Background()
	res, err := b.Produce(ctx, ProduceRequest{Topic: "%RETRY%g", Messages: []ProduceMessage{{Body: []byte("x"),
		Properties: map[string]string{mq.PropReconsumeTime: "2", mq.PropMaxReconsumeTimes: "2", mq.PropRetryTopic: "orders"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.SendBack(ctx, SendBackRequest{Group: "g", ID: res.Acks[0].ID()})
	if err != nil || !r.DeadLettered || r.Topic != "%DLQ%g" {
		t.Fatalf("send back of a message at its own limit: %+v %v", r, err)
	}
	// The request's limit wins over the message's.
	res, err = b.Produce(ctx, ProduceRequest{Topic: "%RETRY%g", Messages: []ProduceMessage{{Body: []byte("y"),
		Properties: map[string]string{mq.PropReconsumeTime: "2", mq.PropMaxReconsumeTimes: "5", mq.PropRetryTopic: "orders"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r, err = b.SendBack(ctx, SendBackRequest{Group: "g", ID: res.Acks[0].ID(), MaxReconsumeTimes: 2})
	if err != nil || !r.DeadLettered || r.Topic != "%DLQ%g" || r.ReconsumeTimes != 3 {
		t.Fatalf("send back with an override: %+v %v", r, err)
	}
	look, err := b.LookupMessage(ctx, r.ID)
	if err != nil || look.Message.Topic != "%DLQ%g" || look.Message.Properties[mq.PropMaxReconsumeTimes] != "2" {
		t.Fatalf("the copy: %+v %v", look.Message, err)
	}
}
