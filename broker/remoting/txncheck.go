package remoting

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/mq"
	rmq "github.com/raftmq/raftmq/remoting"
)

// RocketMQ's check-back defaults (BrokerConfig: transactionTimeOut,
// transactionCheckInterval in 5.x, transactionCheckMax).
const (
	DefaultTxnTimeout       = 6 * time.Second
	DefaultTxnCheckInterval = 30 * time.Second
	DefaultTxnCheckMax      = 15
	// txnCheckBatch bounds the half messages one round reads.
	txnCheckBatch = 1000
)

// txnCheck is the check-back's soft state of one half message, kept by the
// leader that checks it (a new leader starts again from none).
type txnCheck struct {
	n    int
	last time.Time
}

// txnCheckLoop runs the check-back while this node leads: a half message
// undecided for the transaction timeout (or its
// CHECK_IMMUNITY_TIME_IN_SECONDS) gets CHECK_TRANSACTION_STATE sent to a
// live connection of its producer group, then again every check interval;
// after TxnCheckMax checks it is discarded into TRANS_CHECK_MAX_TIME_TOPIC
// (RocketMQ's TransactionalMessageServiceImpl.check).
func (a *Adapter) txnCheckLoop() {
	tick := max(min(a.cfg.TxnTimeout, a.cfg.TxnCheckInterval, time.Second)/2, 10*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	checks := map[uint64]*txnCheck{}
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		if !a.reg.current().isLeader() {
			clear(checks)
			continue
		}
		a.txnCheckRound(checks, time.Now())
	}
}

func (a *Adapter) txnCheckRound(checks map[uint64]*txnCheck, now time.Time) {
	if a.b.TxnPending() == 0 {
		clear(checks)
		return
	}
	msgs, err := a.b.PendingHalf(txnCheckBatch)
	if err != nil {
		a.log.Debug("transaction check-back: reading half messages failed", "error", err)
		return
	}
	pending := make(map[uint64]bool, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		pending[m.Offset] = true
		immunity := a.cfg.TxnTimeout
		if v, err := strconv.Atoi(m.Properties[mq.PropTxnCheckImmunity]); err == nil && v > 0 {
			immunity = time.Duration(v) * time.Second
		}
		if m.StoredAt.IsZero() || now.Sub(m.StoredAt) < immunity {
			continue
		}
		c := checks[m.Offset]
		if c == nil {
			c = &txnCheck{}
			checks[m.Offset] = c
		}
		if c.n > 0 && now.Sub(c.last) < a.cfg.TxnCheckInterval {
			continue
		}
		if c.n >= a.cfg.TxnCheckMax {
			ctx, cancel := context.WithTimeout(context.Background(), a.b.Config().WriteTimeout)
			err := a.b.DiscardHalf(ctx, m.Message, c.n)
			cancel()
			if err != nil {
				a.log.Warn("transaction check-back: discarding a half message failed", "id", m.ID, "error", err)
				continue
			}
			a.log.Info("transaction check-back: discarded a half message its producer never decided", "id", m.ID,
				"producerGroup", m.Properties[mq.PropProducerGroup], "checks", c.n)
			delete(checks, m.Offset)
			continue
		}
		c.n++
		c.last = now
		a.sendCheck(&m.Message)
	}
	if len(msgs) < txnCheckBatch {
		for off := range checks {
			if !pending[off] {
				delete(checks, off) // decided
			}
		}
	}
}

var checkOpaque atomic.Int32

// sendCheck sends CHECK_TRANSACTION_STATE for half message m, oneway, to a
// live connection of its producer group; the message is sent as it will be
// delivered (its real topic and queue), with PGROUP, which the client
// checks. Without such a connection the check counts all the same, as in
// RocketMQ.
func (a *Adapter) sendCheck(m *broker.Message) {
	group := m.Properties[mq.PropProducerGroup]
	conn := a.producers.pick(group)
	if conn == nil {
		a.log.Debug("transaction check-back: no live producer of the group", "id", m.ID, "producerGroup", group)
		return
	}
	out := *m
	out.Topic = m.Properties[mq.PropRealTopic]
	q, _ := strconv.Atoi(m.Properties[mq.PropRealQueue])
	out.Queue = int32(q)
	body, err := a.encodeMessages([]broker.Message{out})
	if err != nil {
		a.log.Warn("transaction check-back: encoding the half message failed", "id", m.ID, "error", err)
		return
	}
	phys := physicalOffset(m.ID)
	txID := m.Properties[mq.PropTransactionID]
	if txID == "" {
		txID = m.Properties[propUniqKey]
	}
	req := rmq.NewRequest(rmq.CheckTransactionState, map[string]string{
		"tranStateTableOffset": strconv.FormatUint(m.Offset, 10),
		"commitLogOffset":      strconv.FormatInt(phys, 10),
		"msgId":                m.Properties[propUniqKey],
		"transactionId":        txID,
		"offsetMsgId":          rmq.OffsetMessageID(a.store, phys),
	}, body)
	req.Flag |= rmq.FlagOneway
	req.Opaque = checkOpaque.Add(1)
	if err := conn.Send(req); err != nil {
		a.log.Debug("transaction check-back: send failed", "id", m.ID, "producerGroup", group, "error", err)
		return
	}
	a.log.Debug("transaction check-back sent", "id", m.ID, "producerGroup", group)
}
