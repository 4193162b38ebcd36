package delay

import (
	"strconv"
	"time"

	"github.com/raftmq/raftmq/broker/brokererr"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// MaxMaxDelay is the largest --max-delay: what the schedule queues hold.
const MaxMaxDelay = 365 * 24 * time.Hour

// Wait is how one message waits: a delay level (1..18) or a delivery time
// (unix ms), at most one; the zero Wait is no wait.
type Wait struct {
	Level int
	At    int64
}

// Delayed reports whether the message waits.
func (w Wait) Delayed() bool { return w.Level != 0 || w.At != 0 }

// Parse returns the wait of message i: w, or what its DELAY or
// TIMER_DELIVER_MS property says when w leaves it unset. A DELAY above the
// last level waits the last level, as RocketMQ's broker does (its clients
// send 3 + reconsume count); DELAY 0 is no delay.
func Parse(i int, w Wait, props map[string]string) (Wait, error) {
	if v, ok := props[mq.PropDelay]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return w, brokererr.Invalid("message %d: property %s=%q is not a delay level 1..%d", i, mq.PropDelay, v, len(mq.DelayLevels))
		}
		n = min(n, len(mq.DelayLevels))
		if w.Level != 0 && n != 0 && n != w.Level {
			return w, brokererr.Invalid("message %d: delay level %d and property %s=%q disagree", i, w.Level, mq.PropDelay, v)
		}
		if w.Level == 0 {
			w.Level = n
		}
	}
	if v, ok := props[mq.PropTimerDeliverMS]; ok {
		at, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return w, brokererr.Invalid("message %d: property %s=%q is not a unix time in ms", i, mq.PropTimerDeliverMS, v)
		}
		if w.At != 0 && w.At != at {
			return w, brokererr.Invalid("message %d: delivery time %d and property %s=%q disagree", i, w.At, mq.PropTimerDeliverMS, v)
		}
		w.At = at
	}
	return w, nil
}

// Check refuses the wait of message i when it is not one the broker keeps:
// both a level and a time, an unknown level, a time before 1970 or more
// than maxDelay after now.
func Check(i int, w Wait, now time.Time, maxDelay time.Duration) error {
	switch {
	case w.Level != 0 && w.At != 0:
		return brokererr.Invalid("message %d has both a delay level (%d) and a delivery time (%d ms); give one", i, w.Level, w.At)
	case w.Level != 0:
		if _, err := mq.LevelDelay(w.Level); err != nil {
			return brokererr.Invalid("message %d: %v", i, err)
		}
	case w.At < 0:
		return brokererr.Invalid("message %d: delivery time %d ms is before 1970", i, w.At)
	case w.At > 0:
		if at := time.UnixMilli(w.At); at.Sub(now) > maxDelay {
			return brokererr.Invalid("message %d: delivery time %s is more than the broker's maximum delay (--max-delay, %s) ahead",
				i, at.UTC().Format(time.RFC3339), maxDelay)
		}
	}
	return nil
}

// Overhead bounds what staging adds to the encoded size of a delayed
// request of n messages to topic: per message REAL_TOPIC, REAL_QID and the
// larger of DELAY and TIMER_DELIVER_MS, names, values at their widest and
// their length varints (2 bytes each at most for these lengths), and the
// property count's varint growing by a byte.
func Overhead(topic string, n int) int {
	perMessage := len(mq.PropRealTopic) + len(topic) + len(mq.PropRealQueue) + len("1023") +
		len(mq.PropTimerDeliverMS) + len("-9223372036854775808") + 6*2 + 1
	return n * perMessage
}

// Stage turns the log request of a delayed produce to topic (queues chosen
// in its topic; waits[i] is message i's) into the request that stores it
// in the schedule topic. Only what the request holds decides the staged
// bytes, so a retry stores (and dedupes to) the same request.
func Stage(topic string, waits []Wait, lr *raftlog.Request) {
	lr.Topic = mq.ScheduleTopic
	for i := range lr.Messages {
		m, w := &lr.Messages[i], waits[i]
		props := make(map[string]string, len(m.Properties)+3)
		for k, v := range m.Properties {
			props[k] = v
		}
		props[mq.PropRealTopic] = topic
		props[mq.PropRealQueue] = strconv.Itoa(int(m.Queue))
		// What the broker writes on staged and delivered copies is its own.
		for _, k := range []string{mq.PropDelay, mq.PropTimerDeliverMS, mq.PropStagedID, mq.PropSchedulePopMS} {
			delete(props, k)
		}
		if w.Level != 0 {
			props[mq.PropDelay] = strconv.Itoa(w.Level)
			m.Queue = uint32(w.Level - 1)
		} else {
			props[mq.PropTimerDeliverMS] = strconv.FormatInt(w.At, 10)
			m.Queue = store.ScheduleIntakeQueue
		}
		m.Properties = props
	}
}

// Acks rewrites the acks of a staged request (lr, as Stage left it) as the
// producer sees them: the message's queue in its topic, offset 0 (assigned
// at delivery), and returns its delivery time (unix ms), which for a delay
// level counts from the append time of its entry (appendedAt).
func Acks(waits []Wait, lr *raftlog.Request, acks []store.Ack, appendedAt func(uint64) (time.Time, error)) []int64 {
	at := make([]int64, len(acks))
	appended := map[uint64]time.Time{} // the acks of a request name one or two entries
	for i := range acks {
		w := waits[i]
		q, _ := strconv.Atoi(lr.Messages[i].Properties[mq.PropRealQueue])
		acks[i].Queue, acks[i].Offset = uint32(q), 0
		if w.Level == 0 {
			at[i] = w.At
			continue
		}
		d, _ := mq.LevelDelay(w.Level)
		at[i] = time.Now().Add(d).UnixMilli()
		idx := acks[i].Index
		t, ok := appended[idx]
		if !ok {
			t, _ = appendedAt(idx)
			appended[idx] = t
		}
		if !t.IsZero() {
			at[i] = t.Add(d).UnixMilli()
		}
	}
	return at
}

// RefuseTopic refuses reads and creation of the schedule topic: the broker
// creates it, its messages are not due yet and appear in their own topics
// then.
func RefuseTopic(topic string) error {
	if topic == mq.ScheduleTopic {
		return brokererr.Invalid("topic %s is the broker's: it holds delayed messages until their time, which then appear in their own topics", mq.ScheduleTopic)
	}
	return nil
}

// Cut keeps a retention cut below every staged message that has not left
// its schedule queue (floor: the cursors' ScheduleFloor): it is delivered
// from there.
func Cut(cut, floor uint64) uint64 {
	if floor > 0 && floor < cut {
		return floor
	}
	return cut
}
