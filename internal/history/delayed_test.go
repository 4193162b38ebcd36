package history

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/raftlog"
)

// withDelayed adds to a hand history one delayed request of worker w2: two
// messages staged at log index 100 and delivered at dueIn after the run's
// start to the ends of queues 0 and 1 (copies at log index 200), and a
// consumer that received them at seenAt.
func withDelayed(h *History, dueIn, seenAt time.Duration) *History {
	h.Start = time.Date(2026, 12, 4, 4, 0, 0, 0, time.UTC).UnixMilli()
	due := time.UnixMilli(h.Start).Add(dueIn).UnixMilli()
	op := Op{Worker: "w2", Producer: "p-w2", Seq: 1, Invoke: 0, Complete: 10 * time.Millisecond, Outcome: OutcomeOK, Delayed: true}
	for i, q := range []int32{0, 1} {
		body := []string{"w2-000001-0", "w2-000001-1"}[i]
		m := SentMessage{Body: body, Hash: BodyHash([]byte(body)), Key: "k-w2", Queue: -1}
		op.Messages = append(op.Messages, m)
		staged := raftlog.MessageID(100, uint32(i))
		op.Acks = append(op.Acks, Ack{Queue: q, ID: staged, DeliverAt: due})
		off := uint64(len(h.Final[q]))
		e := LogEntry{Offset: off, ID: raftlog.MessageID(200, uint32(i)), Body: body, Hash: m.Hash, Key: m.Key, Staged: staged}
		h.Final[q] = append(h.Final[q], e)
		h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c", Queue: q, Offset: off, ID: e.ID, Body: body, Hash: e.Hash, ServedBy: "n1", ServedByLeader: true, At: seenAt})
	}
	h.Ops = append(h.Ops, op)
	setFinal(h, h.Final)
	return h
}

func TestCheckerAcceptsDelayedDeliveredOnce(t *testing.T) {
	r := Check(withDelayed(handHistory(), 2*time.Second, 2100*time.Millisecond))
	if !r.OK() || r.Delayed != 2 {
		t.Fatalf("delivered once after its time: %s %v", r.Summary(), r.Violations)
	}
	if r.MaxDelayLateness != 100*time.Millisecond {
		t.Errorf("lateness %s, want 100ms", r.MaxDelayLateness)
	}
}

func TestCheckerReportsDelayedDeliveredEarly(t *testing.T) {
	wantOnly(t, Check(withDelayed(handHistory(), 2*time.Second, time.Second)), VEarly)
}

func TestCheckerReportsDelayedLost(t *testing.T) {
	h := withDelayed(handHistory(), time.Second, 2*time.Second)
	h.Final[1] = h.Final[1][:len(h.Final[1])-1]
	h.Deliveries = h.Deliveries[:len(h.Deliveries)-1]
	setFinal(h, h.Final)
	wantOnly(t, Check(h), VLost)
}

func TestCheckerReportsDelayedDeliveredTwice(t *testing.T) {
	h := withDelayed(handHistory(), time.Second, 2*time.Second)
	e := h.Final[0][len(h.Final[0])-1]
	e.Offset++
	e.ID = raftlog.MessageID(300, 0)
	h.Final[0] = append(h.Final[0], e)
	setFinal(h, h.Final)
	wantOnly(t, Check(h), VDuplicate)
}

func TestCheckerReportsDelayedCopyOfAnotherStagedMessage(t *testing.T) {
	h := withDelayed(handHistory(), time.Second, 2*time.Second)
	h.Final[0][len(h.Final[0])-1].Staged = raftlog.MessageID(101, 0)
	setFinal(h, h.Final)
	wantOnly(t, Check(h), VMisplaced)
}

func TestCheckerReportsStagedIDOnOrdinaryMessage(t *testing.T) {
	h := handHistory()
	h.Final[0][0].Staged = raftlog.MessageID(100, 0)
	setFinal(h, h.Final)
	wantOnly(t, Check(h), VCorrupt)
}

// withSendBacks adds two acknowledged send-backs of w0's first messages:
// one to the retry topic (a staged copy) and one dead-lettered.
func withSendBacks(h *History) *History {
	e0, e1 := h.Final[0][0], h.Final[0][1]
	h.SendBacks = []SendBack{
		{Consumer: "c", Group: "g", ID: e0.ID, Body: e0.Body, Hash: e0.Hash, Outcome: OutcomeOK,
			CopyID: raftlog.MessageID(500, 0), CopyTopic: "%RETRY%g", DeliverAt: 1},
		{Consumer: "c", Group: "g", ID: e1.ID, Body: e1.Body, Hash: e1.Hash, DLQ: true, Outcome: OutcomeOK,
			CopyID: raftlog.MessageID(501, 0), CopyTopic: "%DLQ%g", DeadLettered: true},
	}
	h.Retry = []LogEntry{{Offset: 0, ID: raftlog.MessageID(600, 0), Staged: raftlog.MessageID(500, 0), Body: e0.Body, Hash: e0.Hash, Origin: e0.ID, Reconsume: "1"}}
	h.DeadLetters = []LogEntry{{Offset: 0, ID: raftlog.MessageID(501, 0), Body: e1.Body, Hash: e1.Hash, Origin: e1.ID, Reconsume: "1"}}
	return h
}

func TestCheckerAcceptsSendBacks(t *testing.T) {
	r := Check(withSendBacks(handHistory()))
	if !r.OK() || r.SentBack != 2 {
		t.Fatalf("%s %v", r.Summary(), r.Violations)
	}
}

func TestCheckerReportsLostSendBack(t *testing.T) {
	h := withSendBacks(handHistory())
	h.Retry = nil
	wantOnly(t, Check(h), VLost)
}

func TestCheckerReportsSendBackCopiedTwice(t *testing.T) {
	h := withSendBacks(handHistory())
	e := h.Retry[0]
	e.Offset, e.ID, e.Staged = 1, raftlog.MessageID(601, 0), raftlog.MessageID(502, 0)
	h.Retry = append(h.Retry, e)
	wantOnly(t, Check(h), VDuplicate)
}

func TestCheckerReportsSendBackCopyWithWrongOrigin(t *testing.T) {
	h := withSendBacks(handHistory())
	h.DeadLetters[0].Reconsume = "2"
	wantOnly(t, Check(h), VCorrupt)
}

func TestCheckerReportsCopyNobodySentBack(t *testing.T) {
	h := withSendBacks(handHistory())
	e1 := h.Final[1][0]
	h.Retry = append(h.Retry, LogEntry{Offset: 1, ID: raftlog.MessageID(602, 0), Body: e1.Body, Hash: e1.Hash, Origin: e1.ID, Reconsume: "1"})
	wantOnly(t, Check(h), VInvented)
}

// TestCheckerSendBackCopyBelowRetentionCut: a missing copy whose entry is
// below the last retention cut was taken by retention, not lost; above the
// cut it is lost.
func TestCheckerSendBackCopyBelowRetentionCut(t *testing.T) {
	h := withSendBacks(handHistory())
	h.Retry = nil
	h.Retention, h.Cut = true, 550
	if r := Check(h); !r.OK() || r.Retained == 0 {
		t.Fatalf("copy staged at 500 below the cut 550: %s %v, want it counted as retained", r.Summary(), r.Violations)
	}
	h.Cut = 450
	wantOnly(t, Check(h), VLost)
}

// TestCheckerDelayedDeletedByRetentionIsCovered: a run whose delayed
// messages were all delivered and then deleted by retention exercised
// delayed delivery; one whose delayed sends all failed did not.
func TestCheckerDelayedDeletedByRetentionIsCovered(t *testing.T) {
	h := withDelayed(handHistory(), time.Second, 2*time.Second)
	kept := QueueLog{}
	for q, es := range h.Final {
		for _, e := range es {
			if e.Staged == "" {
				kept[q] = append(kept[q], e)
			}
		}
	}
	h.Deliveries = h.Deliveries[:len(h.Deliveries)-2]
	setFinal(h, kept)
	h.Retention, h.Cut = true, 150 // the staged entry (100) is below it
	if r := Check(h); !r.OK() || r.Delayed != 0 || r.Retained < 2 {
		t.Fatalf("delayed messages deleted by retention: %s %v, want no violation", r.Summary(), r.Violations)
	}
	h.Ops[len(h.Ops)-1].Outcome = OutcomeFail
	h.Ops[len(h.Ops)-1].Acks = nil
	if r := Check(h); r.Counts[VCoverage] == 0 {
		t.Fatalf("no delayed message acknowledged: %s %v, want a coverage violation", r.Summary(), r.Violations)
	}
}
