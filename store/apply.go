package store

import (
	"context"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
)

// defaultApplyTimeout bounds a write whose context has no deadline.
const defaultApplyTimeout = 10 * time.Second

// RequestResult is the answer to one produce request of a batch.
type RequestResult struct {
	// Acks holds one ack per message, in request order.
	Acks []Ack
	// Duplicate: the request is a retry of one already stored under its
	// (producer id, sequence); Acks are the first attempt's.
	Duplicate bool
	// Err: the request was refused and nothing of it was stored
	// (ErrUnknownTopic, ErrInvalidQueue, ErrStaleSequence,
	// ErrSequenceReused, ErrMismatchedRetry, ErrDamaged).
	Err error
}

// ProduceFuture is a batch handed to raft whose outcome is not known yet.
type ProduceFuture interface {
	// Wait blocks until the entry is committed and applied on this node
	// (or failed) and returns one result per request, in the order given.
	// An error means no request has a result: ErrNotLeader and ErrTimeout
	// (nothing was appended), ErrUnknownOutcome, ErrShutdown, ErrTooLarge
	// (refused before raft), ErrDamaged.
	Wait() ([]RequestResult, error)
	// Bytes is the size of the entry the batch encoded to, handed to raft
	// or refused.
	Bytes() int
}

// SetBatchVersion sets the highest batch version Produce writes from now
// on. A node stops applying at the first entry it cannot decode, so the
// caller sets a version above raftlog.BatchV1 only while every member of
// the group reads it (raftlog.ReadByAll); until the first call Produce
// writes version 1.
func (s *Store) SetBatchVersion(v raftlog.BatchVersion) { s.batchMax.Store(uint32(v)) }

// BatchVersion is the highest batch version Produce writes now.
func (s *Store) BatchVersion() raftlog.BatchVersion {
	if v := raftlog.BatchVersion(s.batchMax.Load()); v > raftlog.BatchV1 {
		return v
	}
	return raftlog.BatchV1
}

// Produce encodes reqs as one Raft entry (a batch: the group commit) and
// hands it to raft without waiting; sizeHint is the sum of the requests'
// EncodedSize. The entry is in the smaller of the batch versions up to
// BatchVersion (raftlog.SmallestVersion), so it is never larger than
// raftlog.BatchOverhead + sizeHint. raft keeps the order of entries, so
// futures complete in the order they were handed over. An entry larger
// than the log store reads back (raftlog.MaxEntryBytes) is refused, never
// written: it would stop every later write.
func (s *Store) Produce(reqs []*raftlog.Request, sizeHint int, timeout time.Duration) ProduceFuture {
	enc := raftlog.NewBatchBuilder(sizeHint, raftlog.SmallestVersion(s.BatchVersion(), reqs))
	for _, r := range reqs {
		enc.Add(r)
	}
	if enc.Len() > raftlog.MaxEntryBytes {
		s.log.Error("refused an oversized entry", "requests", len(reqs), "bytes", enc.Len())
		return &produceFuture{bytes: enc.Len(), err: fmt.Errorf("%w: a batch of %d requests would encode to %d bytes, above the %d bytes the log store reads back; nothing was written",
			ErrTooLarge, len(reqs), enc.Len(), raftlog.MaxEntryBytes)}
	}
	data := enc.Finish()
	return &produceFuture{f: s.node.Apply(data, timeout), reqs: reqs, bytes: len(data)}
}

type produceFuture struct {
	f     election.ApplyFuture
	reqs  []*raftlog.Request
	bytes int
	err   error // refused before raft
}

func (p *produceFuture) Bytes() int { return p.bytes }

func (p *produceFuture) Wait() ([]RequestResult, error) {
	if p.err != nil {
		return nil, p.err
	}
	if err := p.f.Error(); err != nil {
		return nil, err
	}
	switch resp := p.f.Response().(type) {
	case []*ProduceResult:
		if len(resp) != len(p.reqs) {
			return nil, fmt.Errorf("internal: the state machine answered %d results for a batch of %d requests", len(resp), len(p.reqs))
		}
		out := make([]RequestResult, len(resp))
		for i, r := range resp {
			if r.Err != nil {
				out[i].Err = r.Err
				continue
			}
			acks, err := r.Acks(queuesOf(p.reqs[i]))
			out[i] = RequestResult{Acks: acks, Duplicate: r.Duplicate, Err: err}
		}
		return out, nil
	case error:
		return nil, resp // a damaged or malformed entry: every request alike
	default:
		return nil, fmt.Errorf("internal: the state machine answered %T for a batch of %d requests", resp, len(p.reqs))
	}
}

func queuesOf(r *raftlog.Request) []uint32 {
	qs := make([]uint32, len(r.Messages))
	for i := range r.Messages {
		qs[i] = r.Messages[i].Queue
	}
	return qs
}

// CreateTopic creates a topic with the given number of queues and returns
// it as this node applied it. With ifNotExists an existing topic of that
// queue count is no error.
func (s *Store) CreateTopic(ctx context.Context, name string, queues int32, ifNotExists bool) (TopicInfo, error) {
	if err := s.applyMeta(ctx, EncodeCreateTopic(name, queues, ifNotExists)); err != nil {
		return TopicInfo{}, fmt.Errorf("create topic %q: %w", name, err)
	}
	return s.fsm.Topic(name)
}

// CommitOffsets sets a group's committed offsets.
func (s *Store) CommitOffsets(ctx context.Context, group string, offsets []OffsetEntry) error {
	if err := s.applyMeta(ctx, EncodeCommitOffsets(group, offsets)); err != nil {
		return fmt.Errorf("commit offsets of group %q: %w", group, err)
	}
	return nil
}

// RegisterNode records a node's addresses in the replicated registry.
func (s *Store) RegisterNode(ctx context.Context, info NodeInfo) error {
	if err := s.applyMeta(ctx, EncodeRegisterNode(info)); err != nil {
		return fmt.Errorf("register node %q: %w", info.ID, err)
	}
	return nil
}

// ForgetNode drops a removed node's addresses from the registry.
func (s *Store) ForgetNode(ctx context.Context, id string) error {
	if err := s.applyMeta(ctx, EncodeForgetNode(id)); err != nil {
		return fmt.Errorf("forget node %q: %w", id, err)
	}
	return nil
}

// Retain drops every message stored in a log entry below index below: each
// queue's minimum offset moves past them, to where this node's index puts
// it (FSM.RetainMins: the command carries the minimums, so that every node
// moves them alike), and every node may then delete that part of its log
// once a snapshot covers it (LogFloor).
func (s *Store) Retain(ctx context.Context, below uint64) error {
	if err := s.applyMeta(ctx, EncodeRetainMins(below, s.fsm.RetainMins(below))); err != nil {
		return fmt.Errorf("retain below %d: %w", below, err)
	}
	return nil
}

// applyMeta replicates a metadata command and returns the state machine's
// error once the entry is committed and applied here; ctx's deadline
// bounds the wait.
func (s *Store) applyMeta(ctx context.Context, cmd []byte) error {
	resp, err := s.applyMetaAnswer(ctx, cmd)
	if err == nil && resp != nil {
		err = fmt.Errorf("internal: the state machine answered %T", resp)
	}
	return err
}

// applyMetaAnswer is applyMeta for a command whose answer is not only an
// error (a lock's grant): it returns the state machine's answer when that
// is not an error.
func (s *Store) applyMetaAnswer(ctx context.Context, cmd []byte) (interface{}, error) {
	if len(cmd) > raftlog.MaxEntryBytes {
		return nil, fmt.Errorf("%w: command encodes to %d bytes, above the %d bytes the log store reads back; nothing was written",
			ErrTooLarge, len(cmd), raftlog.MaxEntryBytes)
	}
	timeout := defaultApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		if timeout = time.Until(dl); timeout <= 0 {
			return nil, ErrTimeout
		}
	}
	_, resp, err := s.ApplyAsync(cmd, timeout).answer()
	return resp, err
}

// Pending is a command handed to raft whose outcome is not known yet.
type Pending struct{ f election.ApplyFuture }

// ApplyAsync hands an encoded command (see the Encode functions) to raft
// as it is, without the checks of the typed calls: tests use it to write
// entries no broker would.
func (s *Store) ApplyAsync(cmd []byte, timeout time.Duration) Pending {
	return Pending{s.node.Apply(cmd, timeout)}
}

// Wait blocks until the command is committed and applied (or failed) and
// returns the entry's index and the state machine's error for it (nil for a
// batch entry, whose answers are per request: see Produce).
func (p Pending) Wait() (uint64, error) {
	index, resp, err := p.answer()
	switch resp.(type) {
	case nil, []*ProduceResult, *lockGrant:
		return index, err
	default:
		return index, fmt.Errorf("internal: the state machine answered %T", resp)
	}
}

// answer is Wait with the state machine's answer when it is not an error.
func (p Pending) answer() (uint64, interface{}, error) {
	if err := p.f.Error(); err != nil {
		return 0, nil, err
	}
	if err, ok := p.f.Response().(error); ok {
		return p.f.Index(), nil, err
	}
	return p.f.Index(), p.f.Response(), nil
}
