package history

import (
	"fmt"
	"time"

	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// checkTxn checks the messages sent in transactions against what their
// clients decided (Op.Txn, History.TxnChecks), never against the broker's
// word:
//   - a message whose half message was acknowledged and that its client
//     committed is in the topic, in the queue its ack named (exactly once:
//     Check's duplicate check covers every body);
//   - a message its client rolled back, or never committed, is in no
//     queue of the topic, was delivered to no consumer, and the logs on
//     disk hold it only as a half message;
//   - no consumer got a transactional message before its client sent a
//     commit for it;
//   - on disk, every copy of a message in the topic is the commit step of
//     its own half message: the broker's commit producer id with the half
//     message's offset as its sequence (a committed message a consumer
//     sent back has further copies in the group's retry, schedule and
//     dead-letter topics).
func checkTxn(h *History, sent map[string]sentRef, present map[string][]place, r *Report) {
	commitAt := map[string]time.Duration{} // earliest commit a client sent
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Txn != nil && op.Txn.CommitAt > 0 {
			for _, m := range op.Messages {
				commitAt[m.Body] = op.Txn.CommitAt
			}
		}
	}
	for _, c := range h.TxnChecks {
		r.TxnChecked++
		if c.Answer != TxnCommit {
			continue
		}
		if at, ok := commitAt[c.Body]; !ok || c.At < at {
			commitAt[c.Body] = c.At
		}
	}
	committer := store.TxnProducer(store.TxnHalfQueue)
	sentTxns := 0
	retainedCommits := 0 // committed, acknowledged, and deleted by retention since
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Txn == nil {
			continue
		}
		sentTxns++
		for j, m := range op.Messages {
			ps := present[m.Body]
			commit := op.Txn.Final == TxnCommit && op.Outcome != OutcomeFail
			var ack *Ack
			if op.Outcome == OutcomeOK && j < len(op.Acks) {
				ack = &op.Acks[j]
			}
			switch {
			case !commit && len(ps) > 0:
				r.Add(VRolledBack, "transactional body %q of op %d (%s seq %d, local %s, decided %s, send %s) sits at queue %d offset %d",
					m.Body, i, op.Worker, op.Seq, op.Txn.Local, op.Txn.Final, op.Outcome, ps[0].queue, ps[0].e.Offset)
			case !commit:
				if op.Outcome == OutcomeOK {
					r.TxnRolledBack++
				}
			case len(ps) == 0 && ack != nil && h.belowCut(ack.ID):
				r.Retained++
				retainedCommits++
			case len(ps) == 0 && ack != nil && h.crashAllows(ackedAt(op)) != nil:
				r.crashLoss(h.crashAllows(ackedAt(op)), ackedAt(op))
			case len(ps) == 0 && ack != nil && op.Txn.CommitAt > 0 && h.crashAllows(op.Txn.CommitAt) != nil:
				r.crashLoss(h.crashAllows(op.Txn.CommitAt), op.Txn.CommitAt)
			case len(ps) == 0 && ack != nil:
				r.Lost++
				r.Add(VLost, "transactional body %q of op %d (%s seq %d, local %s) was acknowledged as half message %s and committed by its client, but is not in the topic",
					m.Body, i, op.Worker, op.Seq, op.Txn.Local, ack.ID)
			case len(ps) > 0 && ack != nil:
				r.TxnCommitted++
				if ps[0].queue != ack.Queue {
					r.Add(VMisplaced, "transactional body %q was acked for queue %d but was committed to queue %d offset %d", m.Body, ack.Queue, ps[0].queue, ps[0].e.Offset)
				}
			}
			if !h.DiskRead {
				continue
			}
			for _, dm := range h.TxnDisk[m.Body] {
				if dm.Topic == mq.TxnHalfTopic {
					continue
				}
				switch {
				case !commit:
					r.Add(VRolledBack, "transactional body %q of op %d (%s, decided %s, send %s) is on disk in topic %q queue %d (producer %s seq %d)",
						m.Body, i, op.Worker, op.Txn.Final, op.Outcome, dm.Topic, dm.Queue, dm.Producer, dm.Seq)
				case dm.Topic == h.Topic && (dm.Producer != committer || (ack != nil && dm.Seq != ack.Offset)):
					want := "the half message's offset"
					if ack != nil {
						want = fmt.Sprint(ack.Offset)
					}
					r.Add(VAckContent, "transactional body %q of op %d (%s) is on disk in topic %q from producer %s seq %d; a commit is stored by %s with sequence %s",
						m.Body, i, op.Worker, dm.Topic, dm.Producer, dm.Seq, committer, want)
				}
			}
		}
	}
	for _, d := range h.Deliveries {
		ref, ok := sent[d.Body]
		if !ok || h.Ops[ref.op].Txn == nil {
			continue
		}
		op := &h.Ops[ref.op]
		at, committed := commitAt[d.Body]
		switch {
		case op.Txn.Final != TxnCommit:
			r.Add(VRolledBack, "consumer %s received transactional body %q (queue %d offset %d, served by %s), which its client decided to %s",
				d.Consumer, d.Body, d.Queue, d.Offset, d.ServedBy, op.Txn.Final)
		case !committed:
			r.Add(VTxnEarly, "consumer %s received transactional body %q (queue %d offset %d, served by %s) at %s; its client never sent a commit",
				d.Consumer, d.Body, d.Queue, d.Offset, d.ServedBy, d.At.Round(time.Millisecond))
		case d.At < at:
			r.Add(VTxnEarly, "consumer %s received transactional body %q (queue %d offset %d, served by %s) at %s, before its client sent the commit at %s",
				d.Consumer, d.Body, d.Queue, d.Offset, d.ServedBy, d.At.Round(time.Millisecond), at.Round(time.Millisecond))
		}
	}
	// A commit that retention deleted since was exercised all the same.
	if sentTxns > 0 && (r.TxnCommitted+retainedCommits == 0 || r.TxnRolledBack == 0) {
		r.Add(VCoverage, "%d transactions were sent, but %d acknowledged ones were found committed (%d more deleted by retention since) and %d rolled back",
			sentTxns, r.TxnCommitted, retainedCommits, r.TxnRolledBack)
	}
}
