package history

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
)

// Violation kinds reported by Check. Each is a broken promise of the broker.
const (
	VLost          = "lost"           // an acknowledged message is not in the log
	VMisplaced     = "misplaced"      // an acknowledged message sits elsewhere than its ack said
	VDuplicate     = "duplicate"      // a message body appears more than once
	VInvented      = "invented"       // the log holds a message nobody sent
	VCorrupt       = "corrupt"        // a message's body or key differs from what was sent
	VGap           = "gap"            // a queue's offsets are not 0..n-1 in order
	VFailedPresent = "failed-present" // a message whose request got a definite error is in the log
	VKeyOrder      = "key-order"      // a producer's messages of one key are out of order
	VRealTime      = "real-time"      // a message sits before one acknowledged before it was sent
	VDivergent     = "divergent"      // a node's log differs from the group's
	VDelivery      = "delivery"       // a consumer got something that is not in the final log
	VAckShape      = "ack-shape"      // an acknowledgement of the wrong shape
	VAckPosition   = "ack-position"   // an ack names the right message id but the wrong queue or offset
	VNemesis       = "nemesis"        // a fault's expected outcome did not happen (e.g. corrupt log accepted)
	VStartPanic    = "start-panic"    // a node refused to start by crashing (Go panic) instead of with its message
	VLiveness      = "liveness"       // the group did not recover after healing
	VWALStuck      = "wal-stuck"      // a node's log store refused appends after the fault was gone, until restarted
	VReplStall     = "repl-stall"     // the leader stopped replicating to a follower until the leader restarted
	VDisk          = "disk"           // a node's stores, read offline after it stopped, fail a check (undecodable entry, CRC, term)
	VAckContent    = "ack-content"    // the log on disk holds, at the id an ack named, another message (or none)
	VLimit         = "limit"          // a request over the limits was not refused with a definite error, or one at them was refused
	VCoverage      = "not-covered"    // the run did not exercise what it claims to (no ack, no follower read, a fault not applied)
	VRetention     = "retention"      // what retention dropped does not follow from its cuts and the size rule
	VEarly         = "early"          // a delayed message reached a consumer before its delivery time
	VRolledBack    = "rolled-back"    // a message its client rolled back (or never committed) is in its topic, on disk or was delivered
	VTxnEarly      = "txn-early"      // a transactional message reached a consumer before its client sent a commit
	VDamaged       = "damaged"        // raft replaced log entries a node had applied (committed entries lost) where nothing allows it
)

// earlySlack is how much before its delivery time a delayed message may
// reach a consumer without counting as early: the broker and the checker
// read one clock, but the ack rounds the time to milliseconds.
const earlySlack = 5 * time.Millisecond

// Violation is one broken promise.
type Violation struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

func (v Violation) String() string { return v.Kind + ": " + v.Detail }

// Report is the result of checking a history.
type Report struct {
	Ops            int `json:"ops"`
	Acked          int `json:"acked"`
	Failed         int `json:"failed"`
	Unknown        int `json:"unknown"`
	UnknownPresent int `json:"unknown_present"` // unknown-outcome messages found in the log
	Messages       int `json:"messages"`        // messages in the final log
	AckedMessages  int `json:"acked_messages"`

	Lost       int `json:"lost"`
	Duplicated int `json:"duplicated"`
	// Retained counts acknowledged messages below their queue's final
	// minimum: deleted by retention, not lost.
	Retained int `json:"retained,omitempty"`

	// OverLimit counts requests over the limits sent on purpose;
	// RefusedReuse the reused sequences with other content that were refused.
	OverLimit int `json:"over_limit,omitempty"`
	// AtLimit counts requests just within the request bound sent on purpose.
	AtLimit int `json:"at_limit,omitempty"`
	// DiskVerified counts acknowledged messages found as sent at their id
	// in the logs read offline.
	DiskVerified int `json:"disk_verified,omitempty"`
	RefusedReuse int `json:"refused_reuse,omitempty"`
	// Delayed counts acknowledged delayed messages found delivered;
	// MaxDelayLateness is the longest a consumer got one after its time.
	Delayed  int `json:"delayed,omitempty"`
	SentBack int `json:"sent_back,omitempty"` // acknowledged send-backs
	// TxnCommitted and TxnRolledBack count transactions whose half message
	// was acknowledged and that their client committed (found in the topic
	// once) or rolled back (found nowhere); TxnChecked the check-back
	// answers.
	TxnCommitted     int           `json:"txn_committed,omitempty"`
	TxnRolledBack    int           `json:"txn_rolled_back,omitempty"`
	TxnChecked       int           `json:"txn_checked,omitempty"`
	MaxDelayLateness time.Duration `json:"max_delay_lateness_ns,omitempty"`

	Deliveries         int `json:"deliveries"`
	FollowerDeliveries int `json:"follower_deliveries"`
	// LateUnknown counts messages of unknown-outcome requests that landed
	// after a later request of the same producer and key: allowed (nobody
	// was told they were written), but worth knowing.
	LateUnknown int `json:"late_unknown"`

	// CrashLost counts acknowledged messages (and send-backs) missing
	// after a majority crash of a QuorumMemory group, each acknowledged
	// within that crash's window (History.MajorityCrashes): allowed, and
	// reported. CrashLostFirst and CrashLostLast are the earliest and latest
	// of their acknowledgements relative to the crash (negative: before).
	CrashLost      int           `json:"crash_lost,omitempty"`
	CrashLostFirst time.Duration `json:"crash_lost_first_ns,omitempty"`
	CrashLostLast  time.Duration `json:"crash_lost_last_ns,omitempty"`
	// CrashDeliveries counts deliveries during the run of entries such a
	// crash removed (a node that kept them served them before the group
	// replaced them): allowed, and reported.
	CrashDeliveries int `json:"crash_deliveries,omitempty"`

	// MaxAckGap is the longest time without any acknowledgement during the
	// fault phase; Windows counts gaps longer than a second.
	MaxAckGap     time.Duration `json:"max_ack_gap_ns"`
	MaxAckGapFrom time.Duration `json:"max_ack_gap_from_ns"` // when that gap began (since the run started)
	Windows       int           `json:"windows"`

	Violations []Violation `json:"violations,omitempty"`
	// Counts holds the number of violations per kind (Violations is capped).
	Counts map[string]int `json:"counts,omitempty"`
}

// OK is true when nothing was violated.
func (r *Report) OK() bool { return r.OKIgnoring(nil) }

// OKIgnoring is true when nothing but the given kinds (known bugs) was
// violated.
func (r *Report) OKIgnoring(known map[string]bool) bool {
	for k := range r.Counts {
		if !known[k] {
			return false
		}
	}
	return true
}

// MaxViolationsKept is how many violations a Report keeps in full; Counts
// counts them all.
const MaxViolationsKept = 40

// Add records a violation.
func (r *Report) Add(kind, format string, args ...any) {
	if r.Counts == nil {
		r.Counts = map[string]int{}
	}
	r.Counts[kind]++
	if len(r.Violations) < MaxViolationsKept {
		r.Violations = append(r.Violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
}

// crashLoss counts a write acknowledged at ack that crash c lost.
func (r *Report) crashLoss(c *MajorityCrash, ack time.Duration) {
	rel := ack - c.At
	if r.CrashLost == 0 || rel < r.CrashLostFirst {
		r.CrashLostFirst = rel
	}
	if r.CrashLost == 0 || rel > r.CrashLostLast {
		r.CrashLostLast = rel
	}
	r.CrashLost++
}

// Summary is one line: the figures and the violation counts.
func (r *Report) Summary() string {
	s := fmt.Sprintf("ops=%d acked=%d failed=%d unknown=%d (in log %d) messages=%d lost=%d duplicated=%d deliveries=%d (followers %d) max-ack-gap=%s windows=%d",
		r.Ops, r.Acked, r.Failed, r.Unknown, r.UnknownPresent, r.Messages, r.Lost, r.Duplicated,
		r.Deliveries, r.FollowerDeliveries, r.MaxAckGap.Round(time.Millisecond), r.Windows)
	if r.Retained > 0 {
		s += fmt.Sprintf(" retention-dropped=%d", r.Retained)
	}
	s += fmt.Sprintf(" verified-on-disk=%d", r.DiskVerified)
	if r.Delayed > 0 {
		s += fmt.Sprintf(" delayed=%d (max lateness seen %s)", r.Delayed, r.MaxDelayLateness.Round(time.Millisecond))
	}
	if r.SentBack > 0 {
		s += fmt.Sprintf(" sent-back=%d", r.SentBack)
	}
	if r.TxnCommitted+r.TxnRolledBack > 0 {
		s += fmt.Sprintf(" txn-committed=%d txn-rolled-back=%d txn-checks=%d", r.TxnCommitted, r.TxnRolledBack, r.TxnChecked)
	}
	if r.CrashLost > 0 || r.CrashDeliveries > 0 {
		s += fmt.Sprintf(" lost-in-majority-crash=%d (acked %s..%s around the crash) crash-deliveries=%d",
			r.CrashLost, r.CrashLostFirst.Round(time.Millisecond), r.CrashLostLast.Round(time.Millisecond), r.CrashDeliveries)
	}
	if r.OverLimit > 0 || r.AtLimit > 0 || r.RefusedReuse > 0 {
		s += fmt.Sprintf(" over-limit=%d at-limit=%d refused-reuse=%d", r.OverLimit, r.AtLimit, r.RefusedReuse)
	}
	if len(r.Counts) > 0 {
		var kinds []string
		for k, n := range r.Counts {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(kinds)
		s += " VIOLATIONS: " + strings.Join(kinds, " ")
	}
	return s
}

type sentRef struct {
	op  int
	msg int
}

type place struct {
	queue int32
	e     LogEntry
}

func sortedQueues(l QueueLog) []int32 {
	qs := make([]int32, 0, len(l))
	for q := range l {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i] < qs[j] })
	return qs
}

// Check verifies a history:
//   - no acknowledged message lost, and each sits where its ack said; with
//     retention only messages of entries below the last announced cut
//     (History.Cut) may be gone, whatever minimum the broker reports;
//     under QuorumMemory (History.Durability) so may messages acknowledged
//     within the window of a majority crash (History.MajorityCrashes:
//     from its bound before the crash to the group's recovery), counted
//     in CrashLost, and a consumer may have received such a message at a
//     position the group has since given to another (CrashDeliveries);
//   - nothing in the log that was never sent, nothing twice, body, key, tag
//     and properties as sent;
//   - at every acknowledged id the logs on disk hold that very message
//     (checkDisk), and a request over the limits got a definite refusal;
//   - offsets of every queue dense (0..n-1) and in order;
//   - no message of a request that got a definite error;
//   - per producer and key, acknowledged messages in sending order, and no
//     message placed before one acknowledged before it was sent;
//   - every node's log, as it serves it pinned, identical to the group's
//     field by field (the logs on disk are compared by CompareDiskLogs);
//   - everything consumers received during the run (from leaders or
//     followers) is in the final log at the same queue and offset;
//   - coverage: something was acknowledged, and with follower reads on,
//     something was served by a follower.
func Check(h *History) *Report {
	r := &Report{}
	r.Ops = len(h.Ops)

	// What was sent.
	sent := map[string]sentRef{}
	for i, op := range h.Ops {
		switch op.Outcome {
		case OutcomeOK:
			r.Acked++
			r.AckedMessages += len(op.Messages)
		case OutcomeFail:
			r.Failed++
		default:
			r.Unknown++
		}
		for j, m := range op.Messages {
			if prev, dup := sent[m.Body]; dup {
				r.Add(VInvented, "history: body %q sent twice (ops %d and %d); the workload must make bodies unique", m.Body, prev.op, i)
			}
			sent[m.Body] = sentRef{i, j}
		}
	}

	// The final log: dense offsets, nothing invented, nothing twice.
	present := map[string][]place{}
	for _, q := range sortedQueues(h.Final) {
		entries := h.Final[q]
		next := h.Min[q] // retention: the log starts at the queue's minimum
		for _, e := range entries {
			if e.Offset != next {
				if e.Offset > next {
					r.Add(VGap, "queue %d: offsets %d..%d missing (next entry has offset %d)", q, next, e.Offset-1, e.Offset)
				} else {
					r.Add(VGap, "queue %d: offset %d read after offset %d (not monotonic)", q, e.Offset, next-1)
				}
			}
			next = e.Offset + 1
			r.Messages++
			present[e.Body] = append(present[e.Body], place{q, e})
			ref, ok := sent[e.Body]
			if !ok {
				r.Add(VInvented, "queue %d offset %d: body %q (id %s) was never sent", q, e.Offset, e.Body, e.ID)
				continue
			}
			m := h.Ops[ref.op].Messages[ref.msg]
			if m.Hash != e.Hash {
				r.Add(VCorrupt, "queue %d offset %d: body %q differs from what was sent (hash %x, sent %x)", q, e.Offset, e.Body, e.Hash, m.Hash)
			}
			if m.Key != e.Key {
				r.Add(VCorrupt, "queue %d offset %d: body %q has key %q, sent with %q", q, e.Offset, e.Body, short(e.Key), short(m.Key))
			}
			if m.Tag != e.Tag || m.Props != e.Props {
				r.Add(VCorrupt, "queue %d offset %d: body %q has tag %q properties %x, sent with tag %q properties %x", q, e.Offset, e.Body, e.Tag, e.Props, m.Tag, m.Props)
			}
			if m.Queue >= 0 && m.Queue != q {
				r.Add(VMisplaced, "body %q was sent to queue %d but sits in queue %d", e.Body, m.Queue, q)
			}
			if delayed := h.Ops[ref.op].Delayed; delayed != (e.Staged != "") {
				r.Add(VCorrupt, "queue %d offset %d: body %q was sent delayed=%v but is stored with staged id %q", q, e.Offset, e.Body, delayed, e.Staged)
			}
		}
	}
	for body, ps := range present {
		if len(ps) > 1 {
			r.Duplicated += len(ps) - 1
			var at []string
			for _, p := range ps {
				at = append(at, fmt.Sprintf("%d/%d", p.queue, p.e.Offset))
			}
			r.Add(VDuplicate, "body %q appears %d times (queue/offset %s)", body, len(ps), strings.Join(at, ", "))
		}
	}

	// Every op against the log.
	retainedDelayed := 0 // delayed, acknowledged, and deleted by retention since
	for i, op := range h.Ops {
		switch op.Outcome {
		case OutcomeOK:
			if op.Txn != nil {
				break // checkTxn
			}
			if len(op.Acks) != len(op.Messages) {
				r.Add(VAckShape, "op %d (%s seq %d): %d acks for %d messages", i, op.Worker, op.Seq, len(op.Acks), len(op.Messages))
			}
			for j, m := range op.Messages {
				ps := present[m.Body]
				if len(ps) == 0 && j < len(op.Acks) && h.belowCut(op.Acks[j].ID) {
					r.Retained++ // in an entry below the last retention cut
					if op.Delayed {
						retainedDelayed++
					}
					continue
				}
				if len(ps) == 0 {
					// A delayed message is written again when it is due.
					at := op.Complete
					if c := h.crashAllows(at); c == nil && op.Delayed && j < len(op.Acks) && h.Start != 0 {
						at = time.Duration(op.Acks[j].DeliverAt-h.Start) * time.Millisecond
					}
					if c := h.crashAllows(at); c != nil {
						r.crashLoss(c, at)
						continue
					}
					r.Lost++
					where := ""
					if j < len(op.Acks) {
						where = fmt.Sprintf(" (acked at queue %d offset %d id %s)", op.Acks[j].Queue, op.Acks[j].Offset, op.Acks[j].ID)
					}
					r.Add(VLost, "acknowledged body %q of op %d (%s seq %d, acked at %s) is not in the log%s",
						m.Body, i, op.Worker, op.Seq, op.Complete.Round(time.Millisecond), where)
					continue
				}
				if j >= len(op.Acks) {
					continue
				}
				a, p := op.Acks[j], ps[0]
				if op.Delayed {
					// Its offset is assigned at delivery: the copy names the
					// acked id and sits in the acked queue.
					r.Delayed++
					if a.DeliverAt == 0 {
						r.Add(VAckShape, "delayed body %q of op %d (%s seq %d) was acked without a delivery time", m.Body, i, op.Worker, op.Seq)
					}
					if a.ID != p.e.Staged || a.Queue != p.queue {
						r.Add(VMisplaced, "delayed body %q was acked as id %s in queue %d but was delivered to queue %d offset %d as the copy of %q",
							m.Body, a.ID, a.Queue, p.queue, p.e.Offset, p.e.Staged)
					}
					continue
				}
				if a.ID == p.e.ID && (a.Queue != p.queue || a.Offset != p.e.Offset) {
					r.Add(VAckPosition, "body %q was acked at queue %d offset %d id %s but message %s sits at queue %d offset %d",
						m.Body, a.Queue, a.Offset, a.ID, p.e.ID, p.queue, p.e.Offset)
				} else if a.Queue != p.queue || a.Offset != p.e.Offset || a.ID != p.e.ID {
					r.Add(VMisplaced, "body %q was acked at queue %d offset %d id %s but sits at queue %d offset %d id %s",
						m.Body, a.Queue, a.Offset, a.ID, p.queue, p.e.Offset, p.e.ID)
				}
			}
		case OutcomeFail:
			if op.Kind == KindReusedSeq {
				r.RefusedReuse++
			}
			for _, m := range op.Messages {
				if ps := present[m.Body]; len(ps) > 0 {
					r.Add(VFailedPresent, "body %q of op %d (%s seq %d) got a definite error (%s) but sits at queue %d offset %d",
						m.Body, i, op.Worker, op.Seq, op.Error, ps[0].queue, ps[0].e.Offset)
				}
			}
		default:
			for _, m := range op.Messages {
				if len(present[m.Body]) > 0 {
					r.UnknownPresent++
				}
			}
		}
	}

	for i, op := range h.Ops {
		switch op.Kind {
		case KindOverLimit:
			r.OverLimit++
			stored := false
			for _, m := range op.Messages {
				stored = stored || len(present[m.Body]) > 0
			}
			// An answer lost to a fault (the node died or was cut off
			// while reading the request) is unknown; what may never happen
			// is an acknowledgement, or any of it in the log.
			if op.Outcome == OutcomeOK || stored {
				r.Add(VLimit, "op %d (%s) was over the limits (%s) but its outcome is %s (stored: %v), not a refusal: %s",
					i, op.Worker, op.Messages[0].Body, op.Outcome, stored, op.Error)
			}
		case KindAtLimit:
			r.AtLimit++
			// A timeout under faults is allowed (unknown); a refusal is not.
			if op.Outcome == OutcomeFail {
				r.Add(VLimit, "op %d (%s) was within the limits (%s) but was refused: %s",
					i, op.Worker, op.Messages[0].Body, op.Error)
			}
		}
	}

	checkOrder(h, present, r)
	checkNodes(h, r)
	checkDisk(h, r)
	checkSendBacks(h, sent, r)
	checkTxn(h, sent, present, r)

	// Deliveries during the run.
	final := map[int32]map[uint64]LogEntry{}
	for q, entries := range h.Final {
		m := make(map[uint64]LogEntry, len(entries))
		for _, e := range entries {
			m[e.Offset] = e
		}
		final[q] = m
	}
	firstSeen := map[string]bool{}
	for _, d := range h.Deliveries {
		if ref, ok := sent[d.Body]; ok && h.Start != 0 {
			op := &h.Ops[ref.op]
			if op.Delayed && op.Outcome == OutcomeOK && ref.msg < len(op.Acks) && !firstSeen[d.Body] {
				firstSeen[d.Body] = true
				at := time.UnixMilli(h.Start).Add(d.At)
				due := time.UnixMilli(op.Acks[ref.msg].DeliverAt)
				if late := at.Sub(due); late < -earlySlack {
					r.Add(VEarly, "consumer %s received delayed body %q at %s, %s before its delivery time %s",
						d.Consumer, d.Body, at.Format("15:04:05.000"), (-late).Round(time.Millisecond), due.Format("15:04:05.000"))
				} else if late > r.MaxDelayLateness {
					r.MaxDelayLateness = late
				}
			}
		}
		r.Deliveries++
		if !d.ServedByLeader {
			r.FollowerDeliveries++
		}
		if _, ok := sent[d.Body]; !ok {
			r.Add(VInvented, "consumer %s received body %q (queue %d offset %d, served by %s) that was never sent",
				d.Consumer, d.Body, d.Queue, d.Offset, d.ServedBy)
		}
		if h.belowCut(d.ID) {
			continue // deleted by retention since: nothing to compare with
		}
		e, ok := final[d.Queue][d.Offset]
		if _, sentOK := sent[d.Body]; sentOK && (!ok || e.ID != d.ID || e.Body != d.Body || e.Hash != d.Hash) {
			// An entry a majority crash removed was written within the
			// crash's bound, and a node that kept it may have served it
			// until the group replaced it there (crashServed).
			if h.crashServed(&d) {
				r.CrashDeliveries++
				continue
			}
		}
		switch {
		case !ok:
			r.Add(VDelivery, "consumer %s received queue %d offset %d (body %q, served by %s, leader=%v) which is not in the final log",
				d.Consumer, d.Queue, d.Offset, d.Body, d.ServedBy, d.ServedByLeader)
		case e.ID != d.ID || e.Body != d.Body || e.Hash != d.Hash:
			r.Add(VDelivery, "consumer %s received queue %d offset %d as id %s body %q (served by %s, leader=%v); the final log has id %s body %q",
				d.Consumer, d.Queue, d.Offset, d.ID, d.Body, d.ServedBy, d.ServedByLeader, e.ID, e.Body)
		}
	}

	// Coverage: a run that acknowledged nothing, or read from followers
	// without one follower-served delivery, proves nothing about it.
	if r.Acked == 0 {
		r.Add(VCoverage, "no produce request was acknowledged (%d requests)", r.Ops)
	}
	delayedSent := 0
	for _, op := range h.Ops {
		if op.Delayed {
			delayedSent++
		}
	}
	// A delayed message that retention deleted since was exercised all the
	// same.
	if delayedSent > 0 && r.Delayed+retainedDelayed == 0 {
		r.Add(VCoverage, "%d delayed requests were sent but no delayed message was acknowledged and delivered (nor deleted by retention since)", delayedSent)
	}
	if h.FollowerReads && r.FollowerDeliveries == 0 {
		r.Add(VCoverage, "follower reads were on but no delivery was served by a follower (%d deliveries)", r.Deliveries)
	}

	// Unavailability: the longest stretch without an ack in the fault phase.
	var acks []time.Duration
	for _, op := range h.Ops {
		if op.Outcome == OutcomeOK && op.Complete >= h.FaultStart && op.Complete <= h.FaultEnd {
			acks = append(acks, op.Complete)
		}
	}
	if h.FaultEnd > h.FaultStart {
		sort.Slice(acks, func(i, j int) bool { return acks[i] < acks[j] })
		prev := h.FaultStart
		for _, a := range append(acks, h.FaultEnd) {
			gap := a - prev
			if gap > r.MaxAckGap {
				r.MaxAckGap, r.MaxAckGapFrom = gap, prev
			}
			if gap > time.Second {
				r.Windows++
			}
			prev = a
		}
	}
	return r
}

// checkOrder checks per producer/key order of acknowledged messages and
// that no message sits before one acknowledged before it was sent.
func checkOrder(h *History, present map[string][]place, r *Report) {
	type keyed struct {
		seq    uint64
		idx    int
		queue  int32
		offset uint64
		body   string
		acked  bool
	}
	byKey := map[string][]keyed{}
	for _, op := range h.Ops {
		if op.Outcome == OutcomeFail || op.Delayed || op.Txn != nil {
			continue
		}
		for j, m := range op.Messages {
			if m.Key == "" {
				continue
			}
			ps := present[m.Body]
			if len(ps) == 0 {
				continue
			}
			k := op.Worker + "\x00" + m.Key
			byKey[k] = append(byKey[k], keyed{op.Seq, j, ps[0].queue, ps[0].e.Offset, m.Body, op.Outcome == OutcomeOK})
		}
	}
	for k, list := range byKey {
		sort.Slice(list, func(i, j int) bool {
			if list[i].seq != list[j].seq {
				return list[i].seq < list[j].seq
			}
			return list[i].idx < list[j].idx
		})
		worker, key, _ := strings.Cut(k, "\x00")
		var last *keyed
		for i := range list {
			cur := &list[i]
			if last != nil {
				if cur.queue != last.queue {
					r.Add(VKeyOrder, "producer %s key %q: body %q in queue %d but earlier body %q in queue %d", worker, key, cur.body, cur.queue, last.body, last.queue)
				} else if cur.offset <= last.offset {
					if cur.acked && last.acked {
						r.Add(VKeyOrder, "producer %s key %q: body %q at offset %d is not after earlier body %q at offset %d (both acknowledged)",
							worker, key, cur.body, cur.offset, last.body, last.offset)
					} else {
						r.LateUnknown++
					}
				}
			}
			if cur.acked || last == nil || cur.offset > last.offset {
				last = cur
			}
		}
	}

	// Real time: per queue, an op invoked after another op's ack must land
	// after it.
	type ackAt struct {
		done   time.Duration
		offset uint64
		body   string
	}
	acked := map[int32][]ackAt{}
	for _, op := range h.Ops {
		if op.Outcome != OutcomeOK || op.Delayed || op.Txn != nil {
			continue
		}
		for _, m := range op.Messages {
			if ps := present[m.Body]; len(ps) > 0 {
				acked[ps[0].queue] = append(acked[ps[0].queue], ackAt{op.Complete, ps[0].e.Offset, m.Body})
			}
		}
	}
	type prefix struct {
		done   time.Duration
		max    uint64
		body   string
		exists bool
	}
	pre := map[int32][]prefix{}
	for q, list := range acked {
		sort.Slice(list, func(i, j int) bool { return list[i].done < list[j].done })
		ps := make([]prefix, len(list))
		var cur prefix
		for i, a := range list {
			if !cur.exists || a.offset > cur.max {
				cur = prefix{a.done, a.offset, a.body, true}
			}
			cur.done = a.done
			ps[i] = cur
		}
		pre[q] = ps
	}
	for _, op := range h.Ops {
		if op.Outcome == OutcomeFail || op.Delayed || op.Txn != nil {
			continue
		}
		for _, m := range op.Messages {
			ps := present[m.Body]
			if len(ps) == 0 {
				continue
			}
			q, off := ps[0].queue, ps[0].e.Offset
			list := pre[q]
			// Last ack completed strictly before this op was invoked.
			i := sort.Search(len(list), func(i int) bool { return list[i].done >= op.Invoke }) - 1
			if i >= 0 && list[i].max >= off && list[i].body != m.Body {
				r.Add(VRealTime, "body %q (op %s seq %d invoked at %s) sits at queue %d offset %d, not after body %q at offset %d acknowledged before it was sent",
					m.Body, op.Worker, op.Seq, op.Invoke.Round(time.Millisecond), q, off, list[i].body, list[i].max)
			}
		}
	}
}

// checkNodes compares every node's log with the final log.
func checkNodes(h *History, r *Report) {
	nodes := make([]string, 0, len(h.Nodes))
	for n := range h.Nodes {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for n, msg := range h.NodeErrors {
		r.Add(VDivergent, "node %s: its log could not be read: %s", n, msg)
	}
	for _, n := range nodes {
		nl := h.Nodes[n]
		qs := map[int32]bool{}
		for q := range nl {
			qs[q] = true
		}
		for q := range h.Final {
			qs[q] = true
		}
		for _, q := range sortedQueues(toLog(qs)) {
			a, b := h.Final[q], nl[q]
			// A node that installed a snapshot holds only a suffix of the
			// retained log: compare from its first message on.
			if h.Retention && len(b) > 0 && len(a) > 0 && b[0].Offset > a[0].Offset {
				if k := sort.Search(len(a), func(i int) bool { return a[i].Offset >= b[0].Offset }); k < len(a) {
					a = a[k:]
				}
			}
			for i := 0; i < max(len(a), len(b)); i++ {
				if i >= len(a) {
					r.Add(VDivergent, "node %s queue %d: has %d messages, the group's log %d (first extra: offset %d body %q)", n, q, len(b), len(a), b[i].Offset, b[i].Body)
					break
				}
				if i >= len(b) {
					r.Add(VDivergent, "node %s queue %d: has %d messages, the group's log %d (first missing: offset %d body %q)", n, q, len(b), len(a), a[i].Offset, a[i].Body)
					break
				}
				if a[i] != b[i] {
					r.Add(VDivergent, "node %s queue %d position %d: %s; the group's log has %s", n, q, i, b[i], a[i])
					break
				}
			}
		}
	}
}

// checkDisk compares every acknowledged message with the message the
// nodes' logs on disk hold at the id its ack named: same producer, body,
// key, tag and properties. Nothing the broker serves is involved. A
// message of an entry below the last retention cut may be gone, and so may
// one acknowledged within a majority crash's window (crashAllows).
func checkDisk(h *History, r *Report) {
	if !h.DiskRead {
		return
	}
	for i, op := range h.Ops {
		if op.Outcome != OutcomeOK {
			continue
		}
		dup := ""
		if op.Duplicate {
			dup = " (acknowledged as a duplicate)"
		}
		for j, m := range op.Messages {
			if j >= len(op.Acks) {
				break
			}
			a := op.Acks[j]
			dm, ok := h.Disk[a.ID]
			if c := h.crashAllows(ackedAt(&op)); c != nil && (!ok || dm.Body != m.Body) {
				continue // lost in the crash: Check counts it; another entry (or none) has its index now
			}
			if !ok {
				if !h.belowCut(a.ID) {
					r.Add(VAckContent, "body %q of op %d (%s)%s was acked as id %s, which no node's log on disk holds", m.Body, i, op.Worker, dup, a.ID)
				}
				continue
			}
			if op.Txn != nil && dm.Topic != mq.TxnHalfTopic {
				r.Add(VAckContent, "transactional body %q of op %d (%s) was acked as half message %s, but the log on disk holds there a message of topic %q",
					m.Body, i, op.Worker, a.ID, dm.Topic)
				continue
			}
			if (op.Producer != "" && dm.Producer != op.Producer) || dm.Body != m.Body || dm.Hash != m.Hash || dm.Key != m.Key || dm.Tag != m.Tag || dm.Props != m.Props {
				r.Add(VAckContent, "body %q of op %d (%s, producer %s)%s was acked as id %s; the log on disk holds there body %q of producer %s seq %d (hash %x/%x key %q/%q tag %q/%q properties %x/%x)",
					m.Body, i, op.Worker, op.Producer, dup, a.ID, dm.Body, dm.Producer, dm.Seq, dm.Hash, m.Hash, short(dm.Key), short(m.Key), dm.Tag, m.Tag, dm.Props, m.Props)
				continue
			}
			r.DiskVerified++
		}
	}
}

// belowCut reports whether a message id names a log entry below the last
// retention cut (only in retention runs).
func (h *History) belowCut(id string) bool {
	if !h.Retention || h.Cut == 0 {
		return false
	}
	idx, err := raftlog.MessageIndex(id)
	return err == nil && idx < h.Cut
}

func (e LogEntry) String() string {
	return fmt.Sprintf("offset %d id %s body %q (hash %x) key %q tag %q properties %x timestamp %d",
		e.Offset, e.ID, e.Body, e.Hash, short(e.Key), e.Tag, e.Props, e.Timestamp)
}

// short abbreviates long keys in messages.
func short(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s...(%d bytes)", s[:32], len(s))
	}
	return s
}

func toLog(qs map[int32]bool) QueueLog {
	l := QueueLog{}
	for q := range qs {
		l[q] = nil
	}
	return l
}
