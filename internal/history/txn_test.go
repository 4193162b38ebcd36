package history

import (
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// withTxns adds to a clean history three transactions of worker t0: one
// committed by its local transaction, one rolled back, one unknown whose
// check-back committed it; the committed ones are in queue 0 of the topic
// (delivered after their commit) and on disk as half message and commit.
func withTxns(h *History) *History {
	h = withDisk(h)
	h.TxnDisk = map[string][]DiskMessage{}
	next := uint64(len(h.Final[0]))
	index := uint64(100)
	for k, tx := range []TxnOp{{Local: TxnCommit, Final: TxnCommit, CommitAt: 3 * time.Second}, {Local: TxnRollback, Final: TxnRollback}, {Local: TxnUnknown, Final: TxnCommit}} {
		body := []string{"t0-000001-0", "t0-000002-0", "t0-000003-0"}[k]
		tx := tx
		m := SentMessage{Body: body, Hash: BodyHash([]byte(body)), Queue: -1}
		half := raftlog.MessageID(index, 0)
		op := Op{Worker: "t0", Producer: "p-t0", Seq: uint64(k + 1), Invoke: 3 * time.Second, Complete: 3*time.Second + time.Millisecond,
			Outcome: OutcomeOK, Messages: []SentMessage{m}, Acks: []Ack{{Queue: 0, Offset: uint64(k), ID: half}}, Txn: &tx}
		h.Ops = append(h.Ops, op)
		h.Disk[half] = DiskMessage{Producer: "p-t0", Seq: 1, Topic: mq.TxnHalfTopic, Body: body, Hash: m.Hash}
		h.TxnDisk[body] = []DiskMessage{h.Disk[half]}
		index++
		if tx.Final != TxnCommit {
			continue
		}
		if tx.Local == TxnUnknown {
			h.TxnChecks = append(h.TxnChecks, TxnCheck{Body: body, Answer: TxnCommit, At: 5 * time.Second})
		}
		id := raftlog.MessageID(index, 0)
		index++
		e := LogEntry{Offset: next, ID: id, Body: body, Hash: m.Hash}
		next++
		h.Final[0] = append(h.Final[0], e)
		h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c", Queue: 0, Offset: e.Offset, ID: id, Body: body, Hash: e.Hash, ServedBy: "n2", At: 6 * time.Second})
		h.TxnDisk[body] = append(h.TxnDisk[body], DiskMessage{Producer: store.TxnProducer(store.TxnHalfQueue), Seq: uint64(k), Topic: h.Topic, Body: body, Hash: m.Hash})
	}
	for n := range h.Nodes {
		h.Nodes[n] = copyLog(h.Final)
	}
	return h
}

func TestCheckerTransactions(t *testing.T) {
	r := Check(withTxns(handHistory()))
	if !r.OK() || r.TxnCommitted != 2 || r.TxnRolledBack != 1 || r.TxnChecked != 1 {
		t.Fatalf("clean transactions: %s %v", r.Summary(), r.Violations)
	}
	for _, tc := range []struct {
		name, kind string
		break_     func(h *History)
	}{
		{"a rolled back message in the topic", VRolledBack, func(h *History) {
			h.Final[0] = append(h.Final[0], LogEntry{Offset: uint64(len(h.Final[0])), ID: raftlog.MessageID(900, 0), Body: "t0-000002-0", Hash: BodyHash([]byte("t0-000002-0"))})
		}},
		{"a rolled back message on disk in its topic", VRolledBack, func(h *History) {
			h.TxnDisk["t0-000002-0"] = append(h.TxnDisk["t0-000002-0"], DiskMessage{Producer: "%TXN%0", Seq: 1, Topic: h.Topic, Body: "t0-000002-0"})
		}},
		{"a rolled back message delivered", VRolledBack, func(h *History) {
			h.Deliveries = append(h.Deliveries, Delivery{Consumer: "c", Queue: 0, Offset: 99, Body: "t0-000002-0"})
		}},
		{"a committed message delivered before its commit", VTxnEarly, func(h *History) {
			for i := range h.Deliveries {
				if h.Deliveries[i].Body == "t0-000003-0" {
					h.Deliveries[i].At = 4 * time.Second // the check-back committed it at 5 s
				}
			}
		}},
		{"a committed message missing", VLost, func(h *History) {
			h.Final[0] = h.Final[0][:len(h.Final[0])-1]
			for n := range h.Nodes {
				h.Nodes[n] = copyLog(h.Final)
			}
			h.Deliveries = h.Deliveries[:len(h.Deliveries)-1]
		}},
		{"a commit copy from another producer", VAckContent, func(h *History) {
			h.TxnDisk["t0-000001-0"][1].Producer = "p-t0"
		}},
		{"a half message ack naming a message of the topic", VAckContent, func(h *History) {
			for id, dm := range h.Disk {
				if dm.Body == "t0-000001-0" {
					dm.Topic = h.Topic
					h.Disk[id] = dm
				}
			}
		}},
	} {
		h := withTxns(handHistory())
		tc.break_(h)
		r := Check(h)
		if r.Counts[tc.kind] == 0 {
			t.Errorf("%s: no %s violation: %s", tc.name, tc.kind, r.Summary())
		}
		if !strings.Contains(r.Summary(), "VIOLATIONS") {
			t.Errorf("%s: summary without violations: %s", tc.name, r.Summary())
		}
	}
}
