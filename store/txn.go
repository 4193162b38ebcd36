package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Transactional half messages (docs/semantics.md, "Transactions") are
// ordinary produce requests into the half topic, queue TxnHalfQueue, with
// their real topic and queue in properties. Each is decided once:
//
//   - commit: a produce request from the reserved producer id of the half
//     queue (TxnProducer) whose sequence is the half message's offset in
//     it, holding the one message to store in its real topic (or, for a
//     half message the check-back gave up on, in TxnDiscardTopic);
//   - rollback: the txn_rollback command naming the half offset.
//
// The state machine applies either only while the offset is held by the
// half queue and undecided, and marks it decided in the same entry: a
// repeated or late decision, from whichever node or leader, is a no-op.
// The decided offsets are kept as a cursor below which every offset is
// decided plus the decided offsets above it, so the state grows with the
// transactions outstanding, not with the messages retained.
const (
	// TxnHalfTopic is RocketMQ's half topic (api and mq use the same name).
	TxnHalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	// TxnHalfQueue is the half topic's only queue, as in RocketMQ.
	TxnHalfQueue uint32 = 0
	// TxnDiscardTopic receives half messages whose producer never decided
	// them within the check-back's limit (RocketMQ's
	// TRANS_CHECK_MAX_TIME_TOPIC).
	TxnDiscardTopic = "TRANS_CHECK_MAX_TIME_TOPIC"

	txnProducerPrefix = "%TXN%"
	opTxnRollback     = "txn_rollback"
	// maxTxnDecided bounds the decided offsets kept above a half queue's
	// cursor (an entry past it is refused, never half applied).
	maxTxnDecided = 1 << 20
)

// ErrTxnDecided: a commit or rollback of a half message that is already
// decided (or was never stored); it is a no-op.
var ErrTxnDecided = errors.New("transaction already decided")

// TxnProducer is the reserved producer id of commits out of half queue q.
func TxnProducer(q uint32) string { return txnProducerPrefix + strconv.Itoa(int(q)) }

// IsTxnProducer reports whether id is reserved for commits; users may not
// produce under such an id.
func IsTxnProducer(id string) bool { return strings.HasPrefix(id, txnProducerPrefix) }

func parseTxnProducer(id string) (uint32, bool) {
	if !IsTxnProducer(id) {
		return 0, false
	}
	q, err := strconv.Atoi(id[len(txnProducerPrefix):])
	if err != nil || q != int(TxnHalfQueue) {
		return 0, false
	}
	return uint32(q), true
}

// txnState is the replicated decision state of the half queue.
type txnState struct {
	below   uint64              // every half offset below is decided
	decided map[uint64]struct{} // decided half offsets at or above below
}

// txnCheckLocked decides whether half offset off of queue q may be decided
// now: nil when it is held and undecided.
func (f *FSM) txnCheckLocked(q uint32, off uint64) error {
	var next uint64
	if t := f.topics[TxnHalfTopic]; t != nil && int(q) < len(t.queues) {
		next = t.queues[q].next
	}
	if off >= next {
		return fmt.Errorf("%w: half queue %d holds offsets below %d, not %d", ErrTxnDecided, q, next, off)
	}
	if _, ok := f.txn.decided[off]; ok || off < f.txn.below {
		return fmt.Errorf("%w: half message %d", ErrTxnDecided, off)
	}
	if len(f.txn.decided) >= maxTxnDecided {
		return fmt.Errorf("%w: %d decisions wait above undecided half message %d", ErrTooLarge, len(f.txn.decided), f.txn.below)
	}
	return nil
}

// txnDecideLocked marks half offset off decided, moves the cursor over the
// decided run it completes and drops the half queue's index files wholly
// below the cursor.
func (f *FSM) txnDecideLocked(q uint32, off uint64) {
	if f.txn.decided == nil {
		f.txn.decided = map[uint64]struct{}{}
	}
	f.txn.decided[off] = struct{}{}
	moved := false
	for {
		if _, ok := f.txn.decided[f.txn.below]; !ok {
			break
		}
		delete(f.txn.decided, f.txn.below)
		f.txn.below++
		moved = true
	}
	t := f.topics[TxnHalfTopic]
	if !moved || t == nil || int(q) >= len(t.queues) {
		return
	}
	qu := t.queues[q]
	if err := qu.ix.DropBelowOffset(f.txn.below); err != nil {
		f.log.Warn("dropping decided half message index files failed", "queue", q, "error", err)
	}
	qu.min = max(qu.min, f.txn.below)
}

func (f *FSM) applyTxnRollbackLocked(c *metaCmd) interface{} {
	if c.Queues != int32(TxnHalfQueue) {
		return fmt.Errorf("%w: half queue %d", ErrInvalidQueue, c.Queues)
	}
	if err := f.txnCheckLocked(TxnHalfQueue, c.Below); err != nil {
		return err
	}
	f.txnDecideLocked(TxnHalfQueue, c.Below)
	return nil
}

// EncodeTxnRollback encodes a command that rolls back the half message at
// offset off of the half queue.
func EncodeTxnRollback(off uint64) []byte {
	return encodeMeta(&metaCmd{Op: opTxnRollback, Queues: int32(TxnHalfQueue), Below: off})
}

// TxnRollback rolls back the half message at offset off of the half
// queue; ErrTxnDecided when it is already decided.
func (s *Store) TxnRollback(ctx context.Context, off uint64) error {
	if err := s.applyMeta(ctx, EncodeTxnRollback(off)); err != nil {
		return fmt.Errorf("roll back half message %d: %w", off, err)
	}
	return nil
}

// TxnState is the decision state of the half queue.
type TxnState struct {
	// Below: every half offset below is decided.
	Below uint64
	// Next: the half queue's end.
	Next uint64
	// Decided: the decided offsets at or above Below, ascending.
	Decided []uint64
}

// Pending is the number of undecided half messages.
func (s TxnState) Pending() uint64 {
	if s.Next <= s.Below {
		return 0
	}
	return s.Next - s.Below - uint64(len(s.Decided))
}

// IsDecided reports whether half offset off is decided (or never held).
func (s TxnState) IsDecided(off uint64) bool {
	if off < s.Below || off >= s.Next {
		return true
	}
	_, found := slices.BinarySearch(s.Decided, off)
	return found
}

// TxnState returns the decision state of the half queue.
func (f *FSM) TxnState() TxnState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := TxnState{Below: f.txn.below}
	if t := f.topics[TxnHalfTopic]; t != nil && int(TxnHalfQueue) < len(t.queues) {
		out.Next = t.queues[TxnHalfQueue].next
	}
	for o := range f.txn.decided {
		out.Decided = append(out.Decided, o)
	}
	slices.Sort(out.Decided)
	return out
}

// TxnFloor is the lowest log index holding an undecided half message
// (0: none). Retention never cuts above it.
func (f *FSM) TxnFloor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[TxnHalfTopic]
	if t == nil || int(TxnHalfQueue) >= len(t.queues) {
		return 0
	}
	qu := t.queues[TxnHalfQueue]
	c := max(f.txn.below, qu.min)
	if c >= qu.next {
		return 0
	}
	recs, err := qu.ix.Find(c, 1)
	if err != nil {
		f.log.Warn("half queue index lookup failed", "offset", c, "error", err)
	}
	if len(recs) == 0 {
		return 0
	}
	return recs[0].Index
}

// TxnState returns the decision state of the half queue.
func (s *Store) TxnState() TxnState { return s.fsm.TxnState() }

// TxnFloor is the lowest log index holding an undecided half message.
func (s *Store) TxnFloor() uint64 { return s.fsm.TxnFloor() }

// snapTxn is the decision state in a snapshot (absent while no half
// message was decided).
type snapTxn struct {
	Below   uint64
	Decided []uint64
}

func (s *txnState) snap() *snapTxn {
	if s.below == 0 && len(s.decided) == 0 {
		return nil
	}
	out := &snapTxn{Below: s.below}
	for o := range s.decided {
		out.Decided = append(out.Decided, o)
	}
	slices.Sort(out.Decided)
	return out
}

// clone copies s for a snapshot capture.
func (s *txnState) clone() txnState {
	out := txnState{below: s.below}
	if len(s.decided) > 0 {
		out.decided = make(map[uint64]struct{}, len(s.decided))
		for o := range s.decided {
			out.decided[o] = struct{}{}
		}
	}
	return out
}

// load replaces s with a snapshot's decision state.
func (s *txnState) load(st *snapTxn) error {
	*s = txnState{}
	if st == nil {
		return nil
	}
	if len(st.Decided) > maxTxnDecided {
		return fmt.Errorf("%w: snapshot has %d decided half messages above the cursor", ErrCorruptCommand, len(st.Decided))
	}
	s.below = st.Below
	s.decided = make(map[uint64]struct{}, len(st.Decided))
	for _, o := range st.Decided {
		if o < st.Below {
			return fmt.Errorf("%w: snapshot has decided half message %d below the cursor %d", ErrCorruptCommand, o, st.Below)
		}
		s.decided[o] = struct{}{}
	}
	return nil
}
