package retry

import (
	"testing"

	"github.com/raftmq/raftmq/broker/entry"
	"github.com/raftmq/raftmq/mq"
)

// TestBuildSendBack: the copy a send-back stores, from the first failure
// to the dead letter, by count, override and level.
func TestBuildSendBack(t *testing.T) {
	orig := &entry.Message{Topic: "orders", Queue: 2, Offset: 7, ID: "ORIG", Key: "k", Tag: "T", Body: []byte("b"), Timestamp: 42,
		Properties: map[string]string{"app": "x", mq.PropDelay: "7", mq.PropTimerDeliverMS: "1"}}
	c := Build(orig, "g", 0, 16)
	p := c.Message.Properties
	if c.Topic != "%RETRY%g" || c.DeadLettered || c.ReconsumeTimes != 1 || c.DelayLevel != 3 ||
		p[mq.PropRetryTopic] != "orders" || p[mq.PropOriginMessageID] != "ORIG" || p[mq.PropReconsumeTime] != "1" ||
		p[mq.PropDelay] != "3" || p["app"] != "x" || p[mq.PropTimerDeliverMS] != "" || p[mq.PropDeadLetterReason] != "" ||
		p[mq.PropOriginQueue] != "2" || p[mq.PropOriginOffset] != "7" {
		t.Fatalf("first copy: %+v", c)
	}
	if c.Message.Key != "k" || c.Message.Tag != "T" || string(c.Message.Body) != "b" || c.Message.Timestamp != 42 {
		t.Fatalf("first copy lost key, tag, body or timestamp: %+v", c.Message)
	}
	if orig.Properties[mq.PropRetryTopic] != "" || orig.Properties[mq.PropDelay] != "7" {
		t.Fatal("the original's properties were changed")
	}
	// Copies of copies keep the first copy's origin and count on.
	for n := int32(1); n <= 16; n++ {
		m := &entry.Message{Topic: "%RETRY%g", Queue: 0, Offset: uint64(n), ID: "COPY", Properties: c.Message.Properties, Body: c.Message.Body}
		c = Build(m, "g", 0, 16)
		p = c.Message.Properties
		if p[mq.PropRetryTopic] != "orders" || p[mq.PropOriginMessageID] != "ORIG" || c.ReconsumeTimes != n+1 ||
			p[mq.PropOriginQueue] != "2" || p[mq.PropOriginOffset] != "7" {
			t.Fatalf("copy %d: %+v", n, c)
		}
		wantLevel := min(3+int(n), 18)
		switch {
		case n < 16 && (c.DeadLettered || c.DelayLevel != wantLevel || c.Topic != "%RETRY%g"):
			t.Fatalf("copy %d: level %d dead %v, want level %d", n, c.DelayLevel, c.DeadLettered, wantLevel)
		case n == 16 && (!c.DeadLettered || c.Topic != "%DLQ%g" || p[mq.PropDeadLetterReason] == "" || p[mq.PropDelay] != ""):
			t.Fatalf("copy 16 (count past the max): %+v", c)
		}
	}
	// A message of its original topic that carries a RECONSUME_TIME of its
	// own (not ours) starts at 0.
	if c := Build(&entry.Message{Topic: "orders", ID: "X", Properties: map[string]string{mq.PropReconsumeTime: "9"}}, "g", 0, 16); c.ReconsumeTimes != 1 {
		t.Fatalf("count of a fresh message: %d", c.ReconsumeTimes)
	}
	if c := Build(orig, "g", -1, 16); !c.DeadLettered || c.Topic != "%DLQ%g" || c.ReconsumeTimes != 1 {
		t.Fatalf("delay level -1: %+v", c)
	}
	if c := Build(orig, "g", 5, 16); c.DelayLevel != 5 || c.Message.Properties[mq.PropDelay] != "5" {
		t.Fatalf("delay level 5: %+v", c)
	}
	if c := Build(orig, "g", 0, 0); !c.DeadLettered {
		t.Fatalf("max 0: the first failure must dead-letter: %+v", c)
	}
}
