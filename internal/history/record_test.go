package history

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// The SDK's view of sends, recorded with Sent and read back with LogOf,
// passes when the log holds what was acknowledged, and Check names what
// is wrong when it does not.
func TestSentAndLogOf(t *testing.T) {
	rec := NewRecorder()
	q1 := int32(1)
	msgs := []client.Message{{Key: "k", Body: []byte("w1-1")}, {Key: "k", Body: []byte("w1-2"), Tag: "t", Properties: map[string]string{"a": "b"}}}
	log := []*api.Message{
		{Queue: 1, Offset: 1, Id: "5-1", Key: "k", Body: []byte("w1-2"), Tag: "t", Properties: map[string]string{"a": "b"}},
		{Queue: 1, Offset: 0, Id: "5-0", Key: "k", Body: []byte("w1-1")},
		{Queue: 0, Offset: 0, Id: "6-0", Body: []byte("w2-1")},
	}
	rec.AddOp(Sent("w1", 1, msgs, 0, rec.Now(), []*api.Ack{{Queue: 1, Offset: 0, Id: "5-0"}, {Queue: 1, Offset: 1, Id: "5-1"}}, nil))
	// Unknown outcome, present once: allowed.
	rec.AddOp(Sent("w2", 1, []client.Message{{Body: []byte("w2-1"), Queue: &q1}}, rec.Now(), rec.Now(), nil, status.Error(codes.Unavailable, "no leader")))
	// Refused: must not be there, and is not.
	rec.AddOp(Sent("w3", 1, []client.Message{{Body: []byte("w3-1")}}, rec.Now(), rec.Now(), nil, client.ErrNotSent))

	final := LogOf(log)
	if got := final[1]; len(got) != 2 || got[0].Offset != 0 || got[1].Offset != 1 {
		t.Fatalf("LogOf did not order queue 1 by offset: %+v", got)
	}
	r := CheckRead(rec, final, map[string]QueueLog{"n1": LogOf(log)})
	// w2-1 was sent to queue 1 and sits in queue 0: the one violation.
	wantOnly(t, r, VMisplaced)
	if r.Acked != 1 || r.Unknown != 1 || r.Failed != 1 || r.UnknownPresent != 1 {
		t.Fatalf("counts: %s", r.Summary())
	}
	if e := r.Errors(); !strings.Contains(e, "w2-1") {
		t.Fatalf("Errors() does not name the misplaced body: %s", e)
	}

	// An acknowledged message missing from the log is lost.
	r = CheckRead(rec, LogOf(log[2:]), nil)
	if r.Lost != 2 {
		t.Fatalf("lost %d, want 2: %s", r.Lost, r.Errors())
	}
}

func TestSentRecordsShapeAndOutcome(t *testing.T) {
	op := Sent("w", 1, []client.Message{{Body: []byte("a")}, {Body: []byte("b")}}, 0, 0, []*api.Ack{{Id: "1-0"}}, nil)
	if op.Outcome != OutcomeOK || len(op.Acks) != 1 || op.Messages[1].Queue != -1 {
		t.Fatalf("op %+v", op)
	}
	h := &History{Ops: []Op{op}, Final: QueueLog{0: {{Offset: 0, ID: "1-0", Body: "a", Hash: BodyHash([]byte("a"))}}}}
	if r := Check(h); r.Counts[VAckShape] != 1 {
		t.Fatalf("one ack for two messages not reported: %v", r.Violations)
	}
	if op := Sent("w", 2, []client.Message{{Body: []byte("c")}}, 0, 0, nil, errors.New("boom")); op.Outcome != OutcomeUnknown || op.Error != "boom" {
		t.Fatalf("op %+v", op)
	}
}
