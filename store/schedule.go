package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Delayed and timed messages wait in the schedule topic, one queue per kind
// of wait (docs/semantics.md, "Delayed and timed messages"):
//
//   - queues 0..17: delay levels 1..18; a message leaves its queue at the
//     append time of its entry plus the level's delay, so due times follow
//     append order and each queue is FIFO;
//   - ScheduleIntakeQueue: timed messages as produced; they leave at once
//     and the scheduler stages them into the cascade (the queue a timed
//     message waits in depends on when it is staged, which a retried
//     produce must not change);
//   - ScheduleFinalQueue: the last part of a wait, shorter than
//     ScheduleUnit; a message leaves at its delivery time;
//   - ScheduleCascadeQueue(j): a wait of ScheduleUnit<<j; a message leaves
//     after that long and is staged again into a lower queue, or delivered.
//
// Every message leaves a queue through a delivery: a produce request from
// the reserved producer id of that queue (ScheduleProducer) whose sequence
// is the queue offset of its first message. The state machine applies such
// a request only when its sequence equals the queue's delivered cursor and
// moves the cursor by the request's message count in the same entry, so
// each staged message leaves its queue exactly once whoever sends it.
const (
	// ScheduleTopic is api.ScheduleTopic (the broker checks they match).
	ScheduleTopic        = "SCHEDULE_TOPIC_XXXX"
	ScheduleLevels       = 18
	ScheduleIntakeQueue  = ScheduleLevels
	ScheduleFinalQueue   = ScheduleLevels + 1
	ScheduleCascadeBase  = ScheduleLevels + 2
	ScheduleCascadeCount = 32
	// ScheduleQueues is the queue count of the schedule topic.
	ScheduleQueues = ScheduleCascadeBase + ScheduleCascadeCount
	// ScheduleUnit is the wait of the lowest cascade queue.
	ScheduleUnit = 16 * time.Millisecond

	scheduleProducerPrefix = "%SCHEDULE%"
)

// ScheduleCascadeQueue is the schedule queue of a wait of ScheduleUnit<<j.
func ScheduleCascadeQueue(j int) uint32 { return uint32(ScheduleCascadeBase + j) }

// ScheduleProducer is the reserved producer id of deliveries out of
// schedule queue q.
func ScheduleProducer(q uint32) string { return scheduleProducerPrefix + strconv.Itoa(int(q)) }

// IsScheduleProducer reports whether id is reserved for deliveries; users
// may not produce under such an id.
func IsScheduleProducer(id string) bool { return strings.HasPrefix(id, scheduleProducerPrefix) }

func parseScheduleProducer(id string) (uint32, bool) {
	if !IsScheduleProducer(id) {
		return 0, false
	}
	q, err := strconv.Atoi(id[len(scheduleProducerPrefix):])
	if err != nil || q < 0 || q >= ScheduleQueues {
		return 0, false
	}
	return uint32(q), true
}

// ErrScheduleStale: a delivery out of a schedule queue that does not start
// at the queue's cursor (another delivery took those messages first); it is
// a no-op.
var ErrScheduleStale = errors.New("schedule delivery is stale")

// schedule is the replicated state of the schedule queues: one delivered
// cursor per queue. Nothing else: a queue's index records below its cursor
// are dropped as it moves (only the scheduler reads a schedule queue, from
// its cursor on), so the schedule topic's index holds what waits, not what
// went through it.
type schedule struct {
	cursor [ScheduleQueues]uint64 // next schedule offset to leave, per queue
}

// scheduleCheckLocked decides a delivery request out of schedule queue q:
// nil when it applies (its sequence is the cursor and it does not reach
// past what the queue holds), else why it is a no-op.
func (f *FSM) scheduleCheckLocked(q uint32, seq uint64, count int) error {
	if seq != f.sched.cursor[q] {
		return fmt.Errorf("%w: schedule queue %d is delivered up to %d, this delivery starts at %d", ErrScheduleStale, q, f.sched.cursor[q], seq)
	}
	var next uint64
	if t := f.topics[ScheduleTopic]; t != nil && int(q) < len(t.queues) {
		next = t.queues[q].next
	}
	if seq+uint64(count) > next {
		return fmt.Errorf("%w: delivery of schedule offsets %d..%d, queue %d holds %d", ErrScheduleStale, seq, seq+uint64(count), q, next)
	}
	return nil
}

// scheduleAdvanceLocked moves queue q's cursor past an applied delivery and
// drops the queue's index files that now lie wholly below it.
func (f *FSM) scheduleAdvanceLocked(q uint32, seq uint64, count int) {
	c := seq + uint64(count)
	f.sched.cursor[q] = c
	t := f.topics[ScheduleTopic]
	if t == nil || int(q) >= len(t.queues) {
		return
	}
	qu := t.queues[q]
	if err := qu.ix.DropBelowOffset(c); err != nil {
		f.log.Warn("dropping delivered schedule index files failed", "queue", q, "error", err)
	}
	qu.min = max(qu.min, c)
}

// ScheduleCursors returns, per schedule queue, the offset of the first
// message that has not left it.
func (f *FSM) ScheduleCursors() [ScheduleQueues]uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.sched.cursor
}

// ScheduleFloor is the lowest log index holding a message that has not left
// its schedule queue (0: none waits). Retention never cuts above it.
func (f *FSM) ScheduleFloor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[ScheduleTopic]
	if t == nil {
		return 0
	}
	var floor uint64
	for q, qu := range t.queues {
		if q >= ScheduleQueues {
			break
		}
		c := f.sched.cursor[q]
		if c >= qu.next {
			continue
		}
		recs, err := qu.ix.Find(max(c, qu.min), 1)
		if err != nil {
			f.log.Warn("schedule queue index lookup failed", "queue", q, "offset", c, "error", err)
		}
		if len(recs) > 0 && (floor == 0 || recs[0].Index < floor) {
			floor = recs[0].Index
		}
	}
	return floor
}

// ScheduleCursors returns, per schedule queue, the offset of the first
// message that has not left it.
func (s *Store) ScheduleCursors() [ScheduleQueues]uint64 { return s.fsm.ScheduleCursors() }

// ScheduleFloor is the lowest log index holding a waiting staged message.
func (s *Store) ScheduleFloor() uint64 { return s.fsm.ScheduleFloor() }

// snapSchedule is the schedule state in a snapshot (absent in snapshots of
// nodes without delivered delayed messages: all cursors 0).
type snapSchedule struct {
	Cursors []uint64
}

// snap encodes a captured copy of the schedule state; nil when no message
// ever left a schedule queue.
func (s *schedule) snap() *snapSchedule {
	used := false
	for _, c := range s.cursor {
		used = used || c != 0
	}
	if !used {
		return nil
	}
	return &snapSchedule{Cursors: append([]uint64(nil), s.cursor[:]...)}
}

// load replaces s with a snapshot's schedule state (readSnapshot has
// checked it with the same call).
func (s *schedule) load(ss *snapSchedule) error {
	*s = schedule{}
	if ss == nil {
		return nil
	}
	if len(ss.Cursors) > ScheduleQueues {
		return fmt.Errorf("%w: snapshot has %d schedule cursors, at most %d", ErrCorruptCommand, len(ss.Cursors), ScheduleQueues)
	}
	copy(s.cursor[:], ss.Cursors)
	return nil
}
