package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/mq"
)

// Transactions (docs/semantics.md, "Transactions"): a TransactionProducer
// sends a half message, which the group stores durably and no consumer
// sees, runs the caller's local transaction, and commits or rolls the half
// message back with its outcome. A half message left undecided (the local
// transaction answered TxnUnknown, the producer died, the decision was
// lost) is found again by the check-back: the producer asks the leader,
// every CheckInterval, for its group's half messages older than Timeout and
// decides each with the Check callback.

// TxnState is a local transaction's outcome.
type TxnState int

const (
	// TxnUnknown leaves the half message undecided, for the check-back.
	TxnUnknown TxnState = iota
	// TxnCommit makes the half message visible in its topic, once.
	TxnCommit
	// TxnRollback discards it: it is never delivered.
	TxnRollback
)

func (s TxnState) String() string {
	switch s {
	case TxnCommit:
		return "commit"
	case TxnRollback:
		return "rollback"
	case TxnUnknown:
		return "unknown"
	}
	return fmt.Sprintf("TxnState(%d)", int(s))
}

// ParseTxnState reads "commit", "rollback" or "unknown".
func ParseTxnState(s string) (TxnState, error) {
	switch s {
	case "commit":
		return TxnCommit, nil
	case "rollback":
		return TxnRollback, nil
	case "unknown":
		return TxnUnknown, nil
	}
	return 0, fmt.Errorf("transaction state %q: want commit, rollback or unknown", s)
}

// HalfMessage is an undecided half message as the check-back reads it:
// where it will be delivered (Topic, Queue) and what.
type HalfMessage struct {
	// ID names the half message for EndTransaction (its send's ack id).
	ID string
	// Offset is its position in the broker's half queue.
	Offset        uint64
	Topic         string
	Queue         int32
	Key           string
	Tag           string
	Properties    map[string]string
	Body          []byte
	ProducerGroup string
	// StoredAt is when the group stored it (zero when unknown).
	StoredAt time.Time
}

// TransactionConfig configures a TransactionProducer.
type TransactionConfig struct {
	// Group is the producer group (the PGROUP property): the check-back
	// asks any producer of the group about the group's half messages, so
	// producers that can answer for each other share one.
	Group string
	// Check answers the check-back: the outcome of the local transaction
	// of a half message nobody decided. TxnUnknown asks again later. It
	// runs on the producer's one check goroutine.
	Check func(ctx context.Context, m HalfMessage) TxnState
	// Topics are checked from the start, besides every topic this producer
	// sends to: list the topics a restarted producer's predecessor may have
	// left half messages in.
	Topics []string
	// Timeout is how old an undecided half message must be before Check is
	// asked about it (default 6 s, as RocketMQ's broker waits; a message's
	// CHECK_IMMUNITY_TIME_IN_SECONDS property lengthens it).
	Timeout time.Duration
	// CheckInterval is how often the producer asks for such half messages
	// (default 5 s).
	CheckInterval time.Duration
	// Producer tunes the producer that sends the half messages.
	Producer ProducerConfig
}

// DefaultTxnTimeout and DefaultTxnCheckInterval are TransactionConfig's
// defaults.
const (
	DefaultTxnTimeout       = 6 * time.Second
	DefaultTxnCheckInterval = 5 * time.Second
	// txnCheckBatch bounds the half messages one check asks for per topic.
	txnCheckBatch = 100
)

// TransactionProducer sends messages in transactions. It is safe for
// concurrent use; Close stops its check-back.
type TransactionProducer struct {
	c   *Client
	p   *Producer
	cfg TransactionConfig

	mu     sync.Mutex
	topics map[string]bool // checked by the check-back
	local  map[string]bool // half message ids whose local transaction runs

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// NewTransactionProducer returns a producer of cfg.Group and starts its
// check-back.
func (c *Client) NewTransactionProducer(cfg TransactionConfig) (*TransactionProducer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTxnTimeout
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultTxnCheckInterval
	}
	tp := &TransactionProducer{c: c, p: c.NewProducerWith(cfg.Producer), cfg: cfg,
		topics: map[string]bool{}, local: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, t := range cfg.Topics {
		tp.topics[t] = true
	}
	go tp.checkLoop()
	return tp, nil
}

// Validate reports what in cfg a transaction producer cannot run with.
func (cfg *TransactionConfig) Validate() error {
	if cfg.Group == "" {
		return errors.New("transaction producer: no producer group (TransactionConfig.Group)")
	}
	if cfg.Check == nil {
		return errors.New("transaction producer: no check-back callback (TransactionConfig.Check)")
	}
	if cfg.Timeout < 0 || cfg.CheckInterval < 0 {
		return fmt.Errorf("transaction producer: timeout %v and check interval %v may not be negative", cfg.Timeout, cfg.CheckInterval)
	}
	if slices.Contains(cfg.Topics, "") {
		return errors.New("transaction producer: an empty topic in TransactionConfig.Topics")
	}
	return nil
}

// CheckTopic adds topic to the topics the check-back asks about (a topic
// this producer sends to is added by the send).
func (tp *TransactionProducer) CheckTopic(topic string) {
	tp.mu.Lock()
	tp.topics[topic] = true
	tp.mu.Unlock()
}

// ID is the producer id the half messages are sent under.
func (tp *TransactionProducer) ID() string { return tp.p.ID() }

// TxnResult is what SendInTransaction did.
type TxnResult struct {
	// Ack names the half message (its id) and the queue it goes to.
	Ack *api.Ack
	// State is what the local transaction answered; the group has that
	// decision when SendInTransaction returns without error.
	State TxnState
}

// SendInTransaction sends msg as a half message to topic, runs local once
// the group has stored it, and decides the half message with local's
// answer (TxnUnknown leaves it to the check-back). An error before the ack
// means nothing was stored, or a half message was stored that the
// check-back will ask about; an error after it (the result then has the
// ack and the state) means the decision may not have reached the group,
// and the check-back asks about it after Timeout.
func (tp *TransactionProducer) SendInTransaction(ctx context.Context, topic string, msg Message, local func(ctx context.Context, ack *api.Ack) TxnState) (TxnResult, error) {
	if local == nil {
		return TxnResult{}, fmt.Errorf("%w: send in transaction: no local transaction", ErrNotSent)
	}
	if msg.DelayLevel != 0 || !msg.DeliverAt.IsZero() {
		return TxnResult{}, fmt.Errorf("%w: send in transaction: a transactional message cannot be delayed", ErrNotSent)
	}
	props := make(map[string]string, len(msg.Properties)+2)
	maps.Copy(props, msg.Properties)
	props[mq.PropTransactionPrepared] = "true"
	props[mq.PropProducerGroup] = tp.cfg.Group
	msg.Properties = props
	tp.CheckTopic(topic)
	acks, err := tp.p.Send(ctx, topic, msg)
	if err != nil {
		return TxnResult{}, err
	}
	ack := acks[0]
	tp.mu.Lock()
	tp.local[ack.Id] = true
	tp.mu.Unlock()
	st := local(ctx, ack)
	tp.mu.Lock()
	delete(tp.local, ack.Id)
	tp.mu.Unlock()
	res := TxnResult{Ack: ack, State: st}
	if st == TxnUnknown {
		return res, nil
	}
	if err := tp.c.EndTransaction(ctx, topic, tp.cfg.Group, ack.Id, st); err != nil {
		return res, fmt.Errorf("half message %s: %s: %w", ack.Id, st, err)
	}
	return res, nil
}

// Close stops the check-back and waits for it. Half messages still
// undecided wait for another producer of the group (or this one
// restarted) to answer for them.
func (tp *TransactionProducer) Close() error {
	tp.closeOnce.Do(func() { close(tp.stop) })
	<-tp.done
	return nil
}

func (tp *TransactionProducer) checkLoop() {
	defer close(tp.done)
	t := time.NewTicker(tp.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-tp.stop:
			return
		case <-t.C:
		}
		tp.CheckNow()
	}
}

// CheckNow runs one round of the check-back now: every half message of
// the group older than Timeout, in every topic it checks, gets Check's
// answer. It returns how many it decided.
func (tp *TransactionProducer) CheckNow() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-tp.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tp.mu.Lock()
	topics := make([]string, 0, len(tp.topics))
	for t := range tp.topics {
		topics = append(topics, t)
	}
	tp.mu.Unlock()
	sort.Strings(topics)
	decided := 0
	for _, topic := range topics {
		decided += tp.checkTopic(ctx, topic)
	}
	return decided
}

// checkTopic is one check-back round of topic: it pages through the
// group's old half messages, so that ones Check leaves unknown never hide
// newer ones.
func (tp *TransactionProducer) checkTopic(ctx context.Context, topic string) int {
	decided := 0
	for from := uint64(0); ctx.Err() == nil; {
		hs, _, err := tp.c.listHalf(ctx, topic, tp.cfg.Group, tp.cfg.Timeout, txnCheckBatch, from)
		if err != nil {
			return decided // asked again next round
		}
		for _, h := range hs {
			tp.mu.Lock()
			running := tp.local[h.ID]
			tp.mu.Unlock()
			if running || ctx.Err() != nil {
				continue
			}
			st := tp.cfg.Check(ctx, h)
			if st == TxnUnknown {
				continue
			}
			if tp.c.EndTransaction(ctx, topic, tp.cfg.Group, h.ID, st) == nil {
				decided++
			}
		}
		if len(hs) < txnCheckBatch {
			return decided
		}
		from = hs[len(hs)-1].Offset + 1
	}
	return decided
}

// EndTransaction commits (TxnCommit) or rolls back (TxnRollback) the half
// message id. topic and group, when set, must be the half message's (the
// call needs publish on topic; without one, admin on the cluster).
// Deciding a half message already decided is no error and changes
// nothing, so a retry, or an answer to a check-back that another producer
// answered first, is safe.
func (c *Client) EndTransaction(ctx context.Context, topic, group, id string, st TxnState) error {
	var d api.TransactionDecision
	switch st {
	case TxnCommit:
		d = api.TransactionDecision_TRANSACTION_DECISION_COMMIT
	case TxnRollback:
		d = api.TransactionDecision_TRANSACTION_DECISION_ROLLBACK
	default:
		return fmt.Errorf("end transaction %s: decision %s: want commit or rollback", id, st)
	}
	if id == "" {
		return errors.New("end transaction: no half message id")
	}
	_, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.EndTransactionResponse, error) {
		return cl.EndTransaction(ctx, &api.EndTransactionRequest{Id: id, Topic: topic, ProducerGroup: group, Decision: d})
	})
	return err
}

// ListHalfMessages answers up to max undecided half messages, oldest first,
// bound for topic and sent under group (either empty: any), stored at
// least olderThan ago, as the leader holds them.
func (c *Client) ListHalfMessages(ctx context.Context, topic, group string, olderThan time.Duration, max int) ([]HalfMessage, error) {
	hs, _, err := c.listHalf(ctx, topic, group, olderThan, max, 0)
	return hs, err
}

// PendingHalfMessages is ListHalfMessages that also answers the number of
// undecided half messages of every topic and group.
func (c *Client) PendingHalfMessages(ctx context.Context, topic, group string, olderThan time.Duration, max int) ([]HalfMessage, uint64, error) {
	return c.listHalf(ctx, topic, group, olderThan, max, 0)
}

func (c *Client) listHalf(ctx context.Context, topic, group string, olderThan time.Duration, max int, from uint64) ([]HalfMessage, uint64, error) {
	if max <= 0 || max > 1000 {
		return nil, 0, fmt.Errorf("list half messages: max %d, want 1 to 1000", max)
	}
	if olderThan < 0 {
		return nil, 0, fmt.Errorf("list half messages: older than %v, want 0 or more", olderThan)
	}
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.ListHalfMessagesResponse, error) {
		return cl.ListHalfMessages(ctx, &api.ListHalfMessagesRequest{Topic: topic, ProducerGroup: group,
			OlderThanMs: olderThan.Milliseconds(), MaxMessages: uint32(max), FromOffset: from})
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]HalfMessage, 0, len(r.Messages))
	for _, h := range r.Messages {
		m := h.GetMessage()
		hm := HalfMessage{ID: m.GetId(), Offset: m.GetOffset(), Topic: m.GetTopic(), Queue: m.GetQueue(), Key: m.GetKey(), Tag: m.GetTag(),
			Properties: m.GetProperties(), Body: m.GetBody(), ProducerGroup: h.ProducerGroup}
		if h.StoredAtMs > 0 {
			hm.StoredAt = time.UnixMilli(h.StoredAtMs)
		}
		out = append(out, hm)
	}
	return out, r.Pending, nil
}
