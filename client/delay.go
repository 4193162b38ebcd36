package client

import (
	"time"

	"github.com/raftmq/raftmq/api"
)

// A request is delayed in all its messages or in none (the broker refuses
// a mix), so the producer coalesces delayed and immediate sends apart.

// delayedOp reports whether a send's messages are delayed (its first
// message says; the broker refuses a send that mixes).
func delayedOp(op *sendOp) bool {
	m := &op.msgs[0]
	return m.DelayLevel != 0 || !m.DeliverAt.IsZero()
}

func delayFields(m *Message) (uint32, int64) {
	var at int64
	if !m.DeliverAt.IsZero() {
		at = m.DeliverAt.UnixMilli()
		if at == 0 {
			at = 1 // the epoch itself: a time in the past, not "no time"
		}
	}
	level := uint32(0)
	if m.DelayLevel > 0 {
		level = uint32(m.DelayLevel)
	} else if m.DelayLevel < 0 {
		level = ^uint32(0) // refused by the broker as an unknown level
	}
	return level, at
}

// AckDeliverAt is when a delayed message acknowledged by a is delivered
// (zero for a message that was not delayed).
func AckDeliverAt(a *api.Ack) time.Time {
	if a == nil || a.DeliverAtMs == 0 {
		return time.Time{}
	}
	return time.UnixMilli(a.DeliverAtMs)
}
