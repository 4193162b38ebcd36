package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/broker/delay"
	"github.com/raftmq/raftmq/broker/lookup"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Transactions (docs/semantics.md, "Transactions"). A produce whose
// messages carry TRAN_MSG=true stores them as half messages: in the half
// topic's one queue, with their real topic and queue (chosen as for any
// produce) in REAL_TOPIC and REAL_QID. EndTransaction decides one: commit
// stores it in its real topic through a replicated delivery from the half
// queue's reserved producer id, rollback replicates the decision alone;
// the state machine applies each only while the half message is undecided
// (store/txn.go).

// TxnStore is the replicated decision state of half messages.
// *store.Store implements it; a replica without it refuses half messages.
type TxnStore interface {
	TxnState() store.TxnState
	TxnFloor() uint64
	TxnRollback(ctx context.Context, off uint64) error
}

var _ TxnStore = (*store.Store)(nil)

// isTransactional reports whether a produce request stores half messages.
func isTransactional(req *ProduceRequest) bool {
	return len(req.Messages) > 0 && mq.IsTransactionPrepared(req.Messages[0].Properties)
}

// validateTxn refuses what only the broker may write (the commit producer
// id) and requests that mix half and ordinary messages or delay a half
// message.
func validateTxn(req *ProduceRequest) error {
	if store.IsTxnProducer(req.ProducerID) {
		return invalid("producer id %q is reserved for the broker's commits of transactional messages", req.ProducerID)
	}
	half := 0
	for i := range req.Messages {
		if mq.IsTransactionPrepared(req.Messages[i].Properties) {
			half++
			if isDelayed(&req.Messages[i]) {
				return invalid("message %d is transactional and delayed; a transactional message cannot be delayed", i)
			}
		}
	}
	if half != 0 && half != len(req.Messages) {
		return invalid("produce request mixes %d transactional and %d ordinary messages; send them in separate requests", half, len(req.Messages)-half)
	}
	return nil
}

// txnOverhead bounds what stageHalf adds to req's encoded size.
func txnOverhead(req *ProduceRequest) int {
	if !isTransactional(req) {
		return 0
	}
	return delay.Overhead(req.Topic, len(req.Messages))
}

// stageHalf turns the log request of a transactional produce (queues chosen
// in its topic) into the request that stores it in the half queue,
// creating the half topic when it is missing.
func (b *Broker) stageHalf(ctx context.Context, topic string, lr *raftlog.Request) error {
	if b.txn == nil {
		return fmt.Errorf("%w: this node's replica keeps no transaction state: transactional messages are not supported", ErrUnavailable)
	}
	if b.fsm.QueueCount(mq.TxnHalfTopic) == 0 {
		if _, err := b.w.CreateTopic(ctx, mq.TxnHalfTopic, 1, true); err != nil {
			return b.replicaErr(err)
		}
	}
	lr.Topic = mq.TxnHalfTopic
	for i := range lr.Messages {
		m := &lr.Messages[i]
		props := make(map[string]string, len(m.Properties)+2)
		maps.Copy(props, m.Properties)
		props[mq.PropRealTopic] = topic
		props[mq.PropRealQueue] = strconv.Itoa(int(m.Queue))
		m.Properties = props
		m.Queue = store.TxnHalfQueue
	}
	return nil
}

// halfAcks rewrites the acks of a half request as the producer sees them:
// the message's queue in its real topic (the offset stays the half
// message's).
func halfAcks(lr *raftlog.Request, acks []store.Ack) {
	for i := range acks {
		q, _ := strconv.Atoi(lr.Messages[i].Properties[mq.PropRealQueue])
		acks[i].Queue = uint32(q)
	}
}

// refuseHalfTopic refuses reads and creation of the half topic: the broker
// creates it, and its messages appear in their own topics once committed.
func refuseHalfTopic(topic string) error {
	if topic == mq.TxnHalfTopic {
		return invalid("topic %s is the broker's: it holds transactional half messages until their producer decides them; committed ones appear in their own topics", mq.TxnHalfTopic)
	}
	return nil
}

// txnCut keeps a retention cut below every undecided half message.
func (b *Broker) txnCut(cut uint64) uint64 {
	if b.txn == nil {
		return cut
	}
	return delay.Cut(cut, b.txn.TxnFloor())
}

// TxnDecision is a producer's decision on a half message.
type TxnDecision int

const (
	TxnCommit TxnDecision = iota
	TxnRollback
	// txnDiscard stores the half message in the discard topic: the
	// check-back gave up on it.
	txnDiscard
)

// TxnEnd is a decision on one half message.
type TxnEnd struct {
	// ID names the half message (the id its send's ack named).
	ID string
	// Topic, when set, must be the half message's topic.
	Topic string
	// ProducerGroup, when set, must be the group it was sent under.
	ProducerGroup string
	Decision      TxnDecision
}

// EndTransaction decides the half message e names. Deciding a half message
// that is already decided is no error and changes nothing. Only the leader
// decides; others get a NotLeaderError.
func (b *Broker) EndTransaction(ctx context.Context, e TxnEnd) error {
	ctx, cancel := b.callCtx(ctx)
	defer cancel()
	if b.txn == nil {
		return fmt.Errorf("%w: this node's replica keeps no transaction state", ErrUnavailable)
	}
	if e.Decision != TxnCommit && e.Decision != TxnRollback {
		return invalid("transaction decision %d: want commit or rollback", e.Decision)
	}
	if e.ID == "" {
		return invalid("transaction decision: no half message id")
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	m, err := b.halfMessage(e.ID)
	if errors.Is(err, lookup.ErrDecided) {
		return nil
	}
	if err != nil {
		return err
	}
	if g := m.Properties[mq.PropProducerGroup]; e.ProducerGroup != "" && g != "" && g != e.ProducerGroup {
		return invalid("half message %s was sent by producer group %q, not %q", e.ID, g, e.ProducerGroup)
	}
	if t := m.Properties[mq.PropRealTopic]; e.Topic != "" && t != e.Topic {
		return invalid("half message %s is bound for topic %q, not %q", e.ID, t, e.Topic)
	}
	return b.decide(ctx, &m, e.Decision)
}

// halfMessage reads the half message named by id (lookupLeader).
func (b *Broker) halfMessage(id string) (Message, error) {
	m, err := b.lookupLeader(id)
	if err != nil {
		return Message{}, err
	}
	if m.Topic != mq.TxnHalfTopic {
		return Message{}, invalid("message %s is not a transactional half message (topic %q)", id, m.Topic)
	}
	return m, nil
}

// decide replicates decision d on half message m; an already decided one
// is left as it is.
func (b *Broker) decide(ctx context.Context, m *Message, d TxnDecision) error {
	if b.txn.TxnState().IsDecided(m.Offset) {
		return nil
	}
	if d == TxnRollback {
		err := b.txn.TxnRollback(ctx, m.Offset)
		if errors.Is(err, store.ErrTxnDecided) {
			return nil
		}
		if err == nil {
			b.m.txnDecisions.WithLabelValues("rollback").Inc()
		}
		return b.replicaErr(err)
	}
	req, err := b.commitRequest(ctx, m, d)
	if err != nil {
		return err
	}
	_, wait, err := b.submit(ctx.Done(), req)
	if err != nil {
		return err
	}
	refused, err := wait()
	if err != nil {
		return b.replicaErr(err)
	}
	if errors.Is(refused, store.ErrTxnDecided) {
		return nil
	}
	if refused != nil {
		return b.replicaErr(refused)
	}
	label := "commit"
	if d == txnDiscard {
		label = "discard"
	}
	b.m.txnDecisions.WithLabelValues(label).Inc()
	return nil
}

// commitRequest is the delivery that commits half message m into its real
// topic and queue (or, for txnDiscard, into the discard topic), without
// the staging properties.
func (b *Broker) commitRequest(ctx context.Context, m *Message, d TxnDecision) (raftlog.Request, error) {
	props := make(map[string]string, len(m.Properties))
	maps.Copy(props, m.Properties)
	topic := props[mq.PropRealTopic]
	q, _ := strconv.Atoi(props[mq.PropRealQueue])
	if d == txnDiscard {
		topic, q = mq.TxnDiscardTopic, 0
		if b.fsm.QueueCount(topic) == 0 {
			if _, err := b.w.CreateTopic(ctx, topic, 1, true); err != nil {
				return raftlog.Request{}, b.replicaErr(err)
			}
		}
	} else {
		delete(props, mq.PropRealTopic)
		delete(props, mq.PropRealQueue)
		delete(props, mq.PropTransactionPrepared)
	}
	if n := b.fsm.QueueCount(topic); n > 0 {
		q %= n
	}
	if len(props) == 0 {
		props = nil
	}
	return raftlog.Request{ProducerID: store.TxnProducer(store.TxnHalfQueue), Seq: m.Offset, Topic: topic, Messages: []raftlog.Message{{
		Queue: uint32(q), Timestamp: m.Timestamp, Key: m.Key, Tag: m.Tag, Properties: props, Body: m.Body}}}, nil
}

// TxnPending is the number of undecided half messages on this node.
func (b *Broker) TxnPending() uint64 {
	if b.txn == nil {
		return 0
	}
	return b.txn.TxnState().Pending()
}

// txnOldestAge is the age of the oldest undecided half message as this
// node reads it (0: none, or it cannot be read here).
func (b *Broker) txnOldestAge() time.Duration {
	if b.txn == nil {
		return 0
	}
	st := b.txn.TxnState()
	for off := st.Below; off < st.Next; off++ {
		if st.IsDecided(off) {
			continue
		}
		locs, _, err := b.fsm.Locate(mq.TxnHalfTopic, int32(store.TxnHalfQueue), off, 1)
		if err != nil || len(locs) == 0 {
			return 0
		}
		at, err := b.rlog.AppendedAt(locs[0].LogIndex)
		if err != nil {
			return 0
		}
		return time.Since(at)
	}
	return 0
}

// HalfMessage is an undecided half message as the check-back reads it.
type HalfMessage struct {
	Message
	// StoredAt is when its log entry was appended (zero when unknown).
	StoredAt time.Time
}

// PendingHalf reads up to max undecided half messages, oldest first, from
// this node's applied state and log. Only the leader's answer is fresh.
func (b *Broker) PendingHalf(max int) ([]HalfMessage, error) {
	return b.pendingHalf(max, 0, nil)
}

// pendingHalf is PendingHalf from half queue offset from on, keeping only
// what keep accepts (nil: all).
func (b *Broker) pendingHalf(limit int, from uint64, keep func(*HalfMessage) bool) ([]HalfMessage, error) {
	if b.txn == nil {
		return nil, nil
	}
	st := b.txn.TxnState()
	var out []HalfMessage
	for off := max(st.Below, from); off < st.Next && len(out) < limit; {
		locs, _, err := b.fsm.Locate(mq.TxnHalfTopic, int32(store.TxnHalfQueue), off, 64)
		if err != nil {
			return out, b.replicaErr(err)
		}
		if len(locs) == 0 {
			break
		}
		msgs, next, err := b.readQueue(mq.TxnHalfTopic, int32(store.TxnHalfQueue), off, locs, 256, 4<<20)
		if err != nil {
			return out, err
		}
		if len(msgs) == 0 || next <= off {
			break
		}
		for _, m := range msgs {
			if st.IsDecided(m.Offset) || len(out) >= limit {
				continue
			}
			h := HalfMessage{Message: m}
			if idx, err := raftlog.MessageIndex(m.ID); err == nil {
				h.StoredAt, _ = b.rlog.AppendedAt(idx)
			}
			if keep == nil || keep(&h) {
				out = append(out, h)
			}
		}
		off = next
	}
	return out, nil
}

// HalfFilter selects undecided half messages for ListHalf.
type HalfFilter struct {
	// Topic and ProducerGroup, when set, keep only the half messages bound
	// for that topic and sent under that group.
	Topic         string
	ProducerGroup string
	// OlderThan keeps only half messages stored at least that long ago and
	// past their CHECK_IMMUNITY_TIME_IN_SECONDS.
	OlderThan time.Duration
	// Max bounds the answer (1 to MaxListHalf).
	Max int
	// From skips the half messages below this half queue offset.
	From uint64
}

// MaxListHalf bounds one ListHalf answer.
const MaxListHalf = 1000

// ListHalf answers the undecided half messages f selects, oldest first,
// each as it will be delivered (its topic and queue; its id and offset
// stay the half message's), and the number of undecided half messages in
// all. Only the leader answers (its state is the fresh one); others get a
// NotLeaderError.
func (b *Broker) ListHalf(ctx context.Context, f HalfFilter) ([]HalfMessage, uint64, error) {
	ctx, cancel := b.callCtx(ctx)
	defer cancel()
	if f.Max <= 0 || f.Max > MaxListHalf {
		return nil, 0, invalid("list half messages: max %d, want 1 to %d", f.Max, MaxListHalf)
	}
	if f.OlderThan < 0 {
		return nil, 0, invalid("list half messages: older than %v, want 0 or more", f.OlderThan)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return nil, 0, err
	}
	if b.txn == nil {
		return nil, 0, nil
	}
	now := time.Now()
	keep := func(h *HalfMessage) bool {
		if f.Topic != "" && h.Properties[mq.PropRealTopic] != f.Topic {
			return false
		}
		if f.ProducerGroup != "" && h.Properties[mq.PropProducerGroup] != f.ProducerGroup {
			return false
		}
		age := f.OlderThan
		if v, err := strconv.Atoi(h.Properties[mq.PropTxnCheckImmunity]); err == nil && v > 0 && f.OlderThan > 0 {
			age = max(age, time.Duration(v)*time.Second)
		}
		return age == 0 || (!h.StoredAt.IsZero() && now.Sub(h.StoredAt) >= age)
	}
	out, err := b.pendingHalf(f.Max, f.From, keep)
	for i := range out {
		m := &out[i].Message
		props := make(map[string]string, len(m.Properties))
		maps.Copy(props, m.Properties)
		m.Topic = props[mq.PropRealTopic]
		q, _ := strconv.Atoi(props[mq.PropRealQueue])
		m.Queue = int32(q)
		delete(props, mq.PropRealTopic)
		delete(props, mq.PropRealQueue)
		m.Properties = props
	}
	return out, b.txn.TxnState().Pending(), err
}

// DiscardHalf stores half message m, which its producer never decided
// within the check-back's limit, in the discard topic with its check
// count (RocketMQ's TRANS_CHECK_MAX_TIME_TOPIC), and so decides it. Only
// the leader discards; others get a NotLeaderError.
func (b *Broker) DiscardHalf(ctx context.Context, m Message, checks int) error {
	ctx, cancel := b.callCtx(ctx)
	defer cancel()
	if b.txn == nil {
		return fmt.Errorf("%w: this node's replica keeps no transaction state", ErrUnavailable)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	if m.Topic != mq.TxnHalfTopic {
		return invalid("message %s is not a transactional half message (topic %q)", m.ID, m.Topic)
	}
	props := make(map[string]string, len(m.Properties)+1)
	maps.Copy(props, m.Properties)
	props[mq.PropTxnCheckTimes] = strconv.Itoa(checks)
	m.Properties = props
	return b.decide(ctx, &m, txnDiscard)
}
