package history

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/raftlog"
)

// handHistory builds a clean history by hand: two workers, two queues,
// keyed messages, every op acknowledged and in the log, three identical
// nodes and a follower delivery of every message.
func handHistory() *History {
	h := &History{Seed: 1, Topic: "t", Queues: 2, FaultStart: 0, FaultEnd: 2 * time.Second,
		Final: QueueLog{}, Nodes: map[string]QueueLog{}, FollowerReads: true, Min: map[int32]uint64{0: 0, 1: 0}}
	index := uint64(10) // each op is one log entry
	next := map[int32]uint64{}
	at := time.Duration(0)
	for seq := uint64(1); seq <= 5; seq++ {
		for _, w := range []string{"w0", "w1"} {
			q := int32(0)
			if w == "w1" {
				q = 1
			}
			op := Op{Worker: w, Producer: "p-" + w, Seq: seq, Invoke: at, Complete: at + 10*time.Millisecond, Outcome: OutcomeOK}
			at += 100 * time.Millisecond
			for i := 0; i < 2; i++ {
				body := fmt.Sprintf("%s-%06d-%d", w, seq, i)
				m := SentMessage{Body: body, Hash: BodyHash([]byte(body)), Key: "k-" + w, Queue: -1}
				op.Messages = append(op.Messages, m)
				id := raftlog.MessageID(index, uint32(i))
				op.Acks = append(op.Acks, Ack{Queue: q, Offset: next[q], ID: id})
				e := LogEntry{Offset: next[q], ID: id, Body: body, Hash: m.Hash, Key: m.Key}
				h.Final[q] = append(h.Final[q], e)
				h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c", Queue: q, Offset: e.Offset, ID: id, Body: body, Hash: e.Hash, ServedBy: "n2"})
				next[q]++
			}
			h.Ops = append(h.Ops, op)
			index++
		}
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		h.Nodes[n] = copyLog(h.Final)
	}
	return h
}

// withDisk adds the offline view of the logs: every acknowledged message
// found on disk at its id, as sent.
func withDisk(h *History) *History {
	h.DiskRead = true
	h.Disk = map[string]DiskMessage{}
	for _, op := range h.Ops {
		if op.Outcome != OutcomeOK {
			continue
		}
		for j, m := range op.Messages {
			a := op.Acks[j]
			h.Disk[a.ID] = DiskMessage{Producer: op.Producer, Seq: op.Seq, Topic: h.Topic, Queue: uint32(a.Queue),
				Body: m.Body, Hash: m.Hash, Key: m.Key, Tag: m.Tag, Props: m.Props}
		}
	}
	return h
}

func copyLog(l QueueLog) QueueLog {
	out := QueueLog{}
	for q, es := range l {
		out[q] = append([]LogEntry(nil), es...)
	}
	return out
}

// setFinal replaces the final log and every node's copy of it.
func setFinal(h *History, l QueueLog) {
	h.Final = l
	for n := range h.Nodes {
		h.Nodes[n] = copyLog(l)
	}
}

func wantOnly(t *testing.T, r *Report, kinds ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
		if r.Counts[k] == 0 {
			t.Errorf("want a %q violation, got %s; violations: %v", k, r.Summary(), r.Violations)
		}
	}
	for k := range r.Counts {
		if !want[k] {
			t.Errorf("unexpected %q violation: %v", k, r.Violations)
		}
	}
}

func TestCheckerCleanHistoryPasses(t *testing.T) {
	r := Check(handHistory())
	if !r.OK() {
		t.Fatalf("clean history reported: %v", r.Violations)
	}
	if r.Ops != 10 || r.Acked != 10 || r.Messages != 20 || r.Lost != 0 || r.Duplicated != 0 || r.FollowerDeliveries != 20 {
		t.Fatalf("figures: %s", r.Summary())
	}
}

func TestCheckerReportsLostAck(t *testing.T) {
	h := handHistory()
	// The last message of queue 0 vanished (as if a new leader lacked it).
	l := copyLog(h.Final)
	l[0] = l[0][:len(l[0])-1]
	setFinal(h, l)
	h.Deliveries = nil
	h.FollowerReads = false
	r := Check(h)
	wantOnly(t, r, VLost)
	if r.Lost != 1 {
		t.Fatalf("lost = %d, want 1", r.Lost)
	}
}

func TestCheckerReportsLostAckInTheMiddleAsGapToo(t *testing.T) {
	h := handHistory()
	l := copyLog(h.Final)
	l[1] = append(l[1][:3:3], l[1][4:]...)
	setFinal(h, l)
	h.Deliveries = nil
	h.FollowerReads = false
	r := Check(h)
	wantOnly(t, r, VLost, VGap)
}

func TestCheckerReportsDuplicate(t *testing.T) {
	h := handHistory()
	l := copyLog(h.Final)
	// A retry appended once more at the end of queue 0.
	d := l[0][2]
	d.Offset = uint64(len(l[0]))
	d.ID = "IDdup"
	l[0] = append(l[0], d)
	setFinal(h, l)
	r := Check(h)
	wantOnly(t, r, VDuplicate)
	if r.Duplicated != 1 {
		t.Fatalf("duplicated = %d, want 1", r.Duplicated)
	}
}

func TestCheckerReportsDuplicateOfUnknownOutcome(t *testing.T) {
	h := handHistory()
	// An op whose outcome was unknown appears twice: at most once is allowed.
	body := "w9-000001-0"
	h.Ops = append(h.Ops, Op{Worker: "w9", Seq: 1, Invoke: time.Second, Complete: 3 * time.Second, Outcome: OutcomeUnknown,
		Messages: []SentMessage{{Body: body, Hash: BodyHash([]byte(body)), Queue: 0}}})
	l := copyLog(h.Final)
	for i := 0; i < 2; i++ {
		l[0] = append(l[0], LogEntry{Offset: uint64(len(l[0])), ID: fmt.Sprintf("U%d", i), Body: body, Hash: BodyHash([]byte(body))})
	}
	setFinal(h, l)
	r := Check(h)
	wantOnly(t, r, VDuplicate)
	if r.UnknownPresent != 1 || r.Unknown != 1 {
		t.Fatalf("figures: %s", r.Summary())
	}
}

func TestCheckerAllowsUnknownOutcomeOnceOrNever(t *testing.T) {
	h := handHistory()
	for i, present := range []bool{true, false} {
		body := fmt.Sprintf("w9-%06d-0", i+1)
		h.Ops = append(h.Ops, Op{Worker: "w9", Seq: uint64(i + 1), Invoke: time.Second, Complete: 3 * time.Second, Outcome: OutcomeUnknown,
			Messages: []SentMessage{{Body: body, Hash: BodyHash([]byte(body)), Queue: -1}}})
		if present {
			l := copyLog(h.Final)
			l[1] = append(l[1], LogEntry{Offset: uint64(len(l[1])), ID: "U", Body: body, Hash: BodyHash([]byte(body))})
			setFinal(h, l)
		}
	}
	r := Check(h)
	if !r.OK() || r.UnknownPresent != 1 {
		t.Fatalf("%s: %v", r.Summary(), r.Violations)
	}
}

func TestCheckerReportsGap(t *testing.T) {
	h := handHistory()
	l := copyLog(h.Final)
	// Offsets 0..n-1 renumbered with a hole: every message still present.
	for i := range l[0] {
		if i >= 5 {
			l[0][i].Offset++
		}
	}
	setFinal(h, l)
	h.Deliveries = nil
	h.FollowerReads = false
	for i := range h.Ops { // keep acks consistent with the log
		for j, a := range h.Ops[i].Acks {
			if a.Queue == 0 && a.Offset >= 5 {
				h.Ops[i].Acks[j].Offset++
			}
		}
	}
	r := Check(h)
	wantOnly(t, r, VGap)
}

func TestCheckerReportsNonMonotonicOffsets(t *testing.T) {
	h := handHistory()
	l := copyLog(h.Final)
	l[0][3], l[0][4] = l[0][4], l[0][3]
	setFinal(h, l)
	r := Check(h)
	if r.Counts[VGap] == 0 {
		t.Fatalf("want a gap violation: %v", r.Violations)
	}
}

func TestCheckerReportsInventedMessage(t *testing.T) {
	h := handHistory()
	l := copyLog(h.Final)
	body := "nobody-sent-this"
	l[1] = append(l[1], LogEntry{Offset: uint64(len(l[1])), ID: "X", Body: body, Hash: BodyHash([]byte(body))})
	setFinal(h, l)
	r := Check(h)
	wantOnly(t, r, VInvented)
}

func TestCheckerReportsInventedDelivery(t *testing.T) {
	h := handHistory()
	h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c", Queue: 0, Offset: 99, ID: "X", Body: "ghost", ServedBy: "n3"})
	r := Check(h)
	wantOnly(t, r, VInvented, VDelivery)
}

func TestCheckerReportsCorruptBody(t *testing.T) {
	h := handHistory()
	l := copyLog(h.Final)
	l[0][1].Hash ^= 1
	setFinal(h, l)
	h.Deliveries = nil
	h.FollowerReads = false
	r := Check(h)
	wantOnly(t, r, VCorrupt)
}

func TestCheckerReportsMisplacedAck(t *testing.T) {
	h := handHistory()
	// The ack names another message than the one holding the body.
	h.Ops[0].Acks[0].Offset = 7
	h.Ops[0].Acks[0].ID = h.Final[0][7].ID
	r := Check(h)
	wantOnly(t, r, VMisplaced)
}

func TestCheckerReportsAckWithWrongPosition(t *testing.T) {
	h := handHistory()
	// The right message id, but the ack names another queue (as a retried
	// round-robin message's ack did: see TestRegressionDuplicateAckOfRoundRobinMessage).
	h.Ops[0].Acks[0].Queue = 1
	r := Check(h)
	wantOnly(t, r, VAckPosition)
}

func TestCheckerReportsFailedOpPresent(t *testing.T) {
	h := handHistory()
	h.Ops[3].Outcome = OutcomeFail
	h.Ops[3].Error = "rpc error: code = InvalidArgument"
	r := Check(h)
	wantOnly(t, r, VFailedPresent)
}

func TestCheckerReportsKeyOrder(t *testing.T) {
	h := handHistory()
	// Swap where two acknowledged ops of w0 landed (and their acks with them).
	l := copyLog(h.Final)
	l[0][0].Body, l[0][2].Body = l[0][2].Body, l[0][0].Body
	l[0][0].Hash, l[0][2].Hash = l[0][2].Hash, l[0][0].Hash
	setFinal(h, l)
	h.Deliveries = nil
	h.FollowerReads = false
	h.Ops[0].Acks[0].Offset, h.Ops[2].Acks[0].Offset = 2, 0
	h.Ops[0].Acks[0].ID, h.Ops[2].Acks[0].ID = l[0][2].ID, l[0][0].ID
	r := Check(h)
	if r.Counts[VKeyOrder] == 0 || r.Counts[VRealTime] == 0 {
		t.Fatalf("want key-order and real-time violations: %v", r.Violations)
	}
}

func TestCheckerReportsDivergentNode(t *testing.T) {
	h := handHistory()
	h.Nodes["n3"][1][2].Hash ^= 0xff
	r := Check(h)
	wantOnly(t, r, VDivergent)

	h = handHistory()
	h.Nodes["n2"][0] = h.Nodes["n2"][0][:4]
	r = Check(h)
	wantOnly(t, r, VDivergent)
}

func TestCheckerReportsUncommittedFollowerRead(t *testing.T) {
	h := handHistory()
	// A follower served a message that did not survive (never committed).
	h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c", Queue: 0, Offset: 2, ID: "OTHER", Body: h.Final[0][2].Body,
		Hash: h.Final[0][2].Hash, ServedBy: "n3"})
	r := Check(h)
	wantOnly(t, r, VDelivery)
}

func TestCheckerUnavailabilityWindow(t *testing.T) {
	h := handHistory()
	h.FaultEnd = 5 * time.Second // the last ack is at 0.91s: 4.09s without acks
	r := Check(h)
	if r.MaxAckGap < 4*time.Second || r.Windows != 1 {
		t.Fatalf("max gap %s windows %d", r.MaxAckGap, r.Windows)
	}
}

func TestHistoryJSONRoundTrip(t *testing.T) {
	h := handHistory()
	p := filepath.Join(t.TempDir(), "h.json")
	if err := h.WriteJSON(p); err != nil {
		t.Fatal(err)
	}
	back, err := ReadHistory(p)
	if err != nil {
		t.Fatal(err)
	}
	if r := Check(back); !r.OK() || r.Messages != 20 {
		t.Fatalf("round trip: %s %v", r.Summary(), r.Violations)
	}
	if !strings.Contains(Check(back).Summary(), "lost=0") {
		t.Fatal("summary")
	}
}

// With retention, acknowledged messages below a queue's final minimum are
// dropped, not lost; one at or above it that is missing is lost; and a node
// may hold a suffix of the retained log, but only with retention.
func TestCheckerRetention(t *testing.T) {
	retained := func() *History {
		h := handHistory()
		h.Retention = true
		h.Min = map[int32]uint64{0: 4, 1: 0}
		// Offsets 0-3 of queue 0 (ops 0 and 2, entries 10 and 12) deleted
		// by a cut at entry 13.
		h.Cut = 13
		h.Final[0] = h.Final[0][4:]
		for n := range h.Nodes {
			h.Nodes[n] = copyLog(h.Final)
		}
		return h
	}
	h := retained()
	if r := Check(h); !r.OK() || r.Retained != 4 || r.Lost != 0 {
		t.Fatalf("clean retained history: ok=%v retained=%d lost=%d %v", r.OK(), r.Retained, r.Lost, r.Violations)
	}
	h = retained()
	h.Min[0] = 3 // the broker says offset 3 is still there, but its log starts at 4
	if r := Check(h); r.Lost != 0 || r.Counts[VGap] == 0 {
		t.Fatalf("a minimum the log does not start at: lost=%d %v", r.Lost, r.Violations)
	}
	// The broker's minimum decides nothing: a cut below the entry of a
	// missing message makes it lost, whatever DescribeTopic said.
	h = retained()
	h.Cut = 12 // entry 12 (offsets 2 and 3 of queue 0) is above it
	if r := Check(h); r.Lost != 2 || r.Retained != 2 || r.Counts[VLost] != 2 {
		t.Fatalf("messages above the announced cut missing: lost=%d retained=%d %v", r.Lost, r.Retained, r.Violations)
	}
	h = retained()
	h.Cut = 0 // no cut announced: nothing may be gone
	if r := Check(h); r.Lost != 4 {
		t.Fatalf("no cut announced but messages gone: lost=%d %v", r.Lost, r.Violations)
	}
	h = retained()
	h.Nodes["n3"][0] = h.Nodes["n3"][0][2:] // n3 installed a snapshot: it holds a suffix
	if r := Check(h); !r.OK() {
		t.Fatalf("a node holding a suffix of the retained log: %v", r.Violations)
	}
	h.Retention = false
	if r := Check(h); r.Counts[VDivergent] == 0 {
		t.Fatalf("without retention a node missing the head of a queue passed")
	}
}

func TestCheckerDiskViewCleanPasses(t *testing.T) {
	if r := Check(withDisk(handHistory())); !r.OK() {
		t.Fatalf("clean history with its disk view reported: %v", r.Violations)
	}
}

// A producer sequence reused with other content, acknowledged as a
// duplicate: the ack names the first request's messages, so the new bodies
// are neither in the log nor at the ids the ack named.
func TestCheckerReportsReusedSequenceAckedButNotStored(t *testing.T) {
	h := withDisk(handHistory())
	first := h.Ops[0]
	reuse := Op{Worker: "reuse", Producer: first.Producer, Seq: first.Seq, Invoke: 2 * time.Second, Complete: 2*time.Second + time.Millisecond,
		Outcome: OutcomeOK, Duplicate: true, Kind: KindReusedSeq, Acks: append([]Ack(nil), first.Acks...)}
	for i := range first.Messages {
		body := fmt.Sprintf("reuse-000001-%d", i)
		reuse.Messages = append(reuse.Messages, SentMessage{Body: body, Hash: BodyHash([]byte(body)), Queue: -1})
	}
	h.Ops = append(h.Ops, reuse)
	r := Check(h)
	wantOnly(t, r, VAckContent, VLost)
	if r.Counts[VAckContent] != 2 || !strings.Contains(fmt.Sprint(r.Violations), "acknowledged as a duplicate") {
		t.Fatalf("want two ack-content violations naming the duplicate: %v", r.Violations)
	}
}

// The refused reuse of a sequence is what the broker should answer.
func TestCheckerAcceptsRefusedReusedSequence(t *testing.T) {
	h := withDisk(handHistory())
	first := h.Ops[0]
	body := "reuse-000001-0"
	h.Ops = append(h.Ops, Op{Worker: "reuse", Producer: first.Producer, Seq: first.Seq, Invoke: 2 * time.Second, Complete: 2 * time.Second,
		Outcome: OutcomeFail, Error: "InvalidArgument: sequence reused with other content", Kind: KindReusedSeq,
		Messages: []SentMessage{{Body: body, Hash: BodyHash([]byte(body)), Queue: -1}}})
	r := Check(h)
	if !r.OK() || r.RefusedReuse != 1 {
		t.Fatalf("a refused reuse: refused=%d %v", r.RefusedReuse, r.Violations)
	}
}

// An ack whose id names an entry that holds another producer's message.
func TestCheckerReportsAckNamingOtherContentOnDisk(t *testing.T) {
	h := withDisk(handHistory())
	id := h.Ops[4].Acks[1].ID
	dm := h.Disk[id]
	dm.Key = "other"
	h.Disk[id] = dm
	wantOnly(t, Check(h), VAckContent)
	h = withDisk(handHistory())
	delete(h.Disk, h.Ops[4].Acks[1].ID) // no node holds the entry
	wantOnly(t, Check(h), VAckContent)
}

func TestCheckerReportsCorruptTagAndProperties(t *testing.T) {
	h := handHistory()
	h.Ops[2].Messages[0].Tag = "tagA"
	h.Ops[2].Messages[0].Props = PropsHash(map[string]string{"a": "1"})
	l := copyLog(h.Final)
	l[0][2].Tag = "tagA"
	l[0][2].Props = PropsHash(map[string]string{"a": "2"})
	setFinal(h, l)
	wantOnly(t, Check(h), VCorrupt)
}

func TestCheckerReportsNodeDifferingInTimestamp(t *testing.T) {
	h := handHistory()
	h.Nodes["n2"][0][3].Timestamp = 12345
	wantOnly(t, Check(h), VDivergent)
}

func TestCheckerReportsOverLimitRequestNotRefused(t *testing.T) {
	// Acknowledged: a violation. Unknown (the answer lost to a fault) and
	// not in the log: allowed.
	for outcome, want := range map[Outcome]int{OutcomeOK: 1, OutcomeUnknown: 0} {
		h := handHistory()
		body := "big-000001-0"
		h.Ops = append(h.Ops, Op{Worker: "big", Producer: "p-big", Seq: 1, Outcome: outcome, Kind: KindOverLimit, Error: "deadline exceeded",
			Messages: []SentMessage{{Body: body, Hash: BodyHash([]byte(body)), Queue: -1}}})
		r := Check(h)
		if r.Counts[VLimit] != want {
			t.Fatalf("over-limit request with outcome %s: %v, want %d limit violations", outcome, r.Violations, want)
		}
	}
	h := handHistory()
	h.Ops = append(h.Ops, Op{Worker: "big", Producer: "p-big", Seq: 1, Outcome: OutcomeFail, Kind: KindOverLimit,
		Messages: []SentMessage{{Body: "big-000001-0", Queue: -1}}})
	if r := Check(h); !r.OK() || r.OverLimit != 1 {
		t.Fatalf("refused over-limit request: %v", r.Violations)
	}
}

func TestCheckerReportsAtLimitRequestRefused(t *testing.T) {
	h := handHistory()
	h.Ops = append(h.Ops, Op{Worker: "at-limit", Producer: "p-at", Seq: 1, Outcome: OutcomeFail, Kind: KindAtLimit, Error: "too large",
		Messages: []SentMessage{{Body: "at-000001-0", Queue: -1}}})
	wantOnly(t, Check(h), VLimit)
	// A timeout under faults proves nothing either way.
	h.Ops[len(h.Ops)-1].Outcome = OutcomeUnknown
	wantOnly(t, Check(h))
}

func TestCheckerReportsRunThatCoveredNothing(t *testing.T) {
	h := handHistory()
	for i := range h.Ops {
		h.Ops[i].Outcome = OutcomeUnknown
	}
	r := Check(h)
	if r.Counts[VCoverage] != 1 || !strings.Contains(fmt.Sprint(r.Violations), "no produce request was acknowledged") {
		t.Fatalf("no ack: %v", r.Violations)
	}
	h = handHistory()
	for i := range h.Deliveries {
		h.Deliveries[i].ServedByLeader = true
	}
	wantOnly(t, Check(h), VCoverage)
	h.FollowerReads = false
	wantOnly(t, Check(h))
}

func TestClassifySizeRefusalIsDefinite(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Outcome
	}{
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max (75611581 vs. 42008576)"), OutcomeFail},
		{status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (90000000 vs. 83886080)"), OutcomeFail},
		{status.Error(codes.ResourceExhausted, "broker busy: 1234 bytes of produce requests are waiting for raft"), OutcomeUnknown},
		{status.Error(codes.InvalidArgument, "produce request of 4 messages encodes to 16777300 bytes"), OutcomeFail},
		{status.Error(codes.Unavailable, "no leader"), OutcomeUnknown},
	} {
		if got := Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
