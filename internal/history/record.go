package history

import (
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
)

// Sent is the Op of one produce request sent with the SDK (client.Producer
// Send, one request per call): what its client was told. worker names the
// producer (per worker and key the acknowledged messages must keep the
// order of seq), invoke and complete are Recorder.Now before and after the
// send. A nil err with a number of acks other than of messages is
// recorded as acknowledged: Check reports its shape.
func Sent(worker string, seq uint64, msgs []client.Message, invoke, complete time.Duration, acks []*api.Ack, err error) Op {
	op := Op{Worker: worker, Seq: seq, Invoke: invoke, Complete: complete, Outcome: Classify(err)}
	for _, m := range msgs {
		op.Delayed = op.Delayed || m.DelayLevel != 0 || !m.DeliverAt.IsZero()
		q := int32(-1)
		if m.Queue != nil {
			q = *m.Queue
		}
		op.Messages = append(op.Messages, SentMessage{Body: BodyName(m.Body), Hash: BodyHash(m.Body), Key: m.Key,
			Tag: m.Tag, Props: PropsHash(m.Properties), Queue: q})
	}
	if err != nil {
		op.Error = err.Error()
		return op
	}
	for _, a := range acks {
		op.Acks = append(op.Acks, Ack{Queue: a.Queue, Offset: a.Offset, ID: a.Id, DeliverAt: a.DeliverAtMs})
	}
	return op
}

// Entry is a message as read back, in the form the history keeps.
func Entry(m *api.Message) LogEntry {
	return LogEntry{Offset: m.Offset, ID: m.Id, Body: BodyName(m.Body), Hash: BodyHash(m.Body), Key: m.Key, Tag: m.Tag,
		Props: PropsHash(m.Properties), Timestamp: m.TimestampMs, Staged: m.Properties[mq.PropStagedID],
		Origin: m.Properties[mq.PropOriginMessageID], Reconsume: m.Properties[mq.PropReconsumeTime]}
}

// LogOf arranges the messages read back (from the earliest offset, by one
// consumer, in any order across queues) into each queue's log in offset
// order. A message read twice stays twice: Check reports it.
func LogOf(msgs []*api.Message) QueueLog {
	l := QueueLog{}
	for _, m := range msgs {
		l[m.Queue] = append(l[m.Queue], Entry(m))
	}
	for _, es := range l {
		sort.SliceStable(es, func(i, j int) bool { return es[i].Offset < es[j].Offset })
	}
	return l
}

// Records are the messages of consumer records, for LogOf.
func Records(recs []client.Record) []*api.Message {
	out := make([]*api.Message, len(recs))
	for i, r := range recs {
		out[i] = r.Message
	}
	return out
}

// CheckRead checks what rec recorded against final, the log read back
// from offset 0 of every queue; nodes, when not nil, is each node's log
// as it serves it, to be identical to final.
func CheckRead(rec *Recorder, final QueueLog, nodes map[string]QueueLog) *Report {
	h := &History{Final: final, Nodes: nodes}
	rec.Fill(h)
	return Check(h)
}

// Errors lists the violations one a line, with a line for those the
// report counted but did not keep; "" when there are none.
func (r *Report) Errors() string {
	if r.OK() {
		return ""
	}
	var b strings.Builder
	b.WriteString(r.Summary())
	for _, v := range r.Violations {
		b.WriteString("\n  " + v.String())
	}
	total := 0
	for _, n := range r.Counts {
		total += n
	}
	if total > len(r.Violations) {
		b.WriteString("\n  ...")
	}
	return b.String()
}
