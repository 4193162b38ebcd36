package store

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/queueindex"
)

// FSM is the replicated state machine: topics, the per-queue index into the
// Raft log, consumer group offsets, the producer dedupe table, orderly
// locks and the node registry. Message bodies stay in the log; the FSM only points at them.
//
// Apply runs on raft's FSM goroutine; readers take the read lock. Snapshots
// copy the metadata under the lock; the index records stay on disk.
type FSM struct {
	log hclog.Logger
	idx *queueindex.Store // the queues' index records, on this node's disk
	// onFatal is told when this node's disk fails an index write (nil:
	// nobody is): only a restart, which indexes the log again, recovers.
	onFatal func(error)

	mu        sync.RWMutex
	topics    map[string]*topic
	offsets   map[string]map[string]map[int32]uint64 // group -> topic -> queue -> offset
	producers map[string]*producer
	lru       *list.List // of *producer, least recently used first
	nodes     map[string]NodeInfo
	logFloor  uint64 // no message is stored below this log index (Retain)
	sched     schedule
	txn       txnState // decisions of the half queue (txn.go)
	// maxReconsume: group -> max reconsume times, where set (groupsettings.go).
	maxReconsume map[string]int32
	locks        map[string]map[QueueRef]lockHolder // group -> queue -> holder (locks.go)
	users        map[string]*User                   // the user table (users.go)
	// producerNumbers is how many producer numbers the group has handed
	// out (producernumbers.go).
	producerNumbers uint64
	// groupID is the group's id (groupid.go), written under mu and read
	// without it: every client call checks it.
	groupID atomic.Pointer[string]

	applied atomic.Uint64
	damage  fsmDamage
	// awaitStored, when set, returns once the log's entries up to an index
	// are fsynced on this node (AwaitStoredBy).
	awaitStored func(idx uint64) error
	notifyMu    sync.Mutex
	notify      chan struct{}

	// appliedMu is the last entry applied to the state under mu (applied
	// is stored once mu is released): a rebuild reads it with the state.
	appliedMu uint64
	rb        *rebuilds // nil until StartRebuilds (rebuild.go)
	// startSnap is the index of the newest snapshot on disk when the node
	// opened (0: none): the one raft restores at start (rebuild.go).
	startSnap uint64
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
	// election.Start takes it and closes it once raft has stopped.
	_ election.StateMachine = (*FSM)(nil)
)

// newFSM returns an empty state machine over an index store (a memory one
// when idx is nil).
func newFSM(logger hclog.Logger, idx *queueindex.Store) *FSM {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if idx == nil {
		idx, _ = queueindex.Open("", queueindex.DefaultOptions())
	}
	f := &FSM{log: logger, idx: idx, notify: make(chan struct{})}
	f.reset()
	return f
}

func (f *FSM) reset() {
	f.topics = map[string]*topic{}
	f.offsets = map[string]map[string]map[int32]uint64{}
	f.producers = map[string]*producer{}
	f.lru = list.New()
	f.nodes = map[string]NodeInfo{}
	f.logFloor = 0
	f.sched = schedule{}
	f.txn = txnState{}
	f.maxReconsume = map[string]int32{}
	f.locks = map[string]map[QueueRef]lockHolder{}
	f.users = map[string]*User{}
	f.groupID.Store(nil)
}

// Applied is the index of the last entry applied to the FSM.
func (f *FSM) Applied() uint64 { return f.applied.Load() }

// Changed returns a channel that is closed at the next apply. Long polls grab
// it, check their condition, then wait on it.
func (f *FSM) Changed() <-chan struct{} {
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	return f.notify
}

func (f *FSM) wake() {
	f.notifyMu.Lock()
	close(f.notify)
	f.notify = make(chan struct{})
	f.notifyMu.Unlock()
}

// AwaitStoredBy makes ApplyBatch first wait until await returns for the
// batch's last index: the log's entries are then fsynced on this node
// (raftlog's Stores.AwaitStored, when a leader's appends return before
// their fsync). An error stops the FSM there as a damaged entry would.
// Call it before raft starts.
func (f *FSM) AwaitStoredBy(await func(idx uint64) error) { f.awaitStored = await }

// Apply applies one committed entry.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in order; raft calls it with up to
// MaxAppendEntries entries at a time.
//
// An entry whose checksum does not match (disk or memory rot on this node:
// the entry was checked when it was written) is never skipped: skipping it
// would shift every later offset on this node alone. The FSM stops there:
// it applies nothing at or after the entry, answers ErrDamaged for each,
// Applied stays below it and Snapshot fails (see MarkDamaged). It returns
// at once rather than blocking, so raft's follower loop goes on storing
// and acknowledging entries and the node still counts for a quorum.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	var last uint64
	var unstored error
	if await := f.awaitStored; await != nil && len(logs) > 0 {
		unstored = await(logs[len(logs)-1].Index)
	}
	f.mu.Lock()
	if unstored != nil && f.damage.at.Load() == 0 {
		// The log's fsync failed (the node is restarting): applying would
		// answer entries this node may not hold.
		f.markDamagedLocked(logs[0].Index, unstored)
	}
	for i, l := range logs {
		if at := f.damage.at.Load(); at != 0 {
			out[i] = fmt.Errorf("entry %d: %w (entry %d)", l.Index, ErrDamaged, at)
			continue
		}
		if l.Type == raft.LogCommand {
			out[i] = f.applyLocked(l.Index, l.Data)
		}
		if f.damage.at.Load() == 0 {
			last = l.Index
		}
	}
	if last > 0 {
		f.appliedMu = last
	}
	f.mu.Unlock()
	if last > 0 {
		f.applied.Store(last)
	}
	f.damage.tell()
	f.wake()
	return out
}

func (f *FSM) applyLocked(index uint64, data []byte) interface{} {
	if len(data) == 0 {
		return f.markDamagedLocked(index, fmt.Errorf("%w: empty command", ErrCorruptCommand))
	}
	switch raftlog.CommandType(data[0]) {
	case raftlog.CmdBatch:
		return f.applyBatchLocked(index, data)
	case raftlog.CmdMeta:
		cmd, err := decodeMeta(data)
		if errors.Is(err, raftlog.ErrCorrupt) { // the CRC does not match
			return f.markDamagedLocked(index, err)
		}
		if err != nil {
			// The CRC matched, so every node holds these bytes and
			// rejects them alike (an encoder bug): not a skip.
			f.log.Error("rejecting undecodable command", "index", index, "error", err)
			return fmt.Errorf("entry %d: %w", index, err)
		}
		return f.applyMetaLocked(index, cmd)
	default:
		// raftmq writes no other command type: a damaged type byte.
		return f.markDamagedLocked(index, fmt.Errorf("%w: type %d", ErrCorruptCommand, data[0]))
	}
}

// indexFailedLocked stops applying at entry index after this node's disk
// failed its index write (a full disk, an I/O error): the entry itself is
// sound, but going on would serve offsets the index does not hold. The
// node is told to restart (onFatal: the server exits so that its
// supervisor starts it again, and the restart indexes the log anew once
// the disk takes writes); until then it stops as at a damaged entry.
func (f *FSM) indexFailedLocked(index uint64, err error) interface{} {
	if f.onFatal != nil {
		f.onFatal(fmt.Errorf("entry %d: %w", index, err))
	}
	return f.markDamagedLocked(index, err)
}

// CheckCommand validates the encoding of any raftmq command without applying
// it (used to verify a log at start).
func CheckCommand(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty", ErrCorruptCommand)
	}
	switch raftlog.CommandType(data[0]) {
	case raftlog.CmdBatch:
		b, err := raftlog.ParseBatch(data, 0) // a check: no timestamp is read
		if err == nil {
			err = b.Each(func(int, *raftlog.RequestView) bool { return true })
		}
		return err
	case raftlog.CmdMeta:
		_, err := decodeMeta(data)
		return err
	}
	return fmt.Errorf("%w: type %d", ErrCorruptCommand, data[0])
}

func (f *FSM) applyMetaLocked(index uint64, c *metaCmd) interface{} {
	switch c.Op {
	case opCreateTopic:
		if err := ValidateName("topic", c.Topic); err != nil {
			return err
		}
		if c.Queues < 1 || c.Queues > MaxQueues {
			return fmt.Errorf("%w: topic %q: %d queues, want 1..%d", ErrInvalidQueue, c.Topic, c.Queues, MaxQueues)
		}
		if t, ok := f.topics[c.Topic]; ok {
			if c.IfNotExists && len(t.queues) == int(c.Queues) {
				return nil
			}
			return fmt.Errorf("%w: %q has %d queues", ErrTopicExists, c.Topic, len(t.queues))
		}
		t := &topic{name: c.Topic, created: index, queues: make([]*queue, c.Queues), perm: PermReadWrite}
		ixs, err := f.idx.CreateTopic(t.key(), len(t.queues))
		if err != nil {
			return f.indexFailedLocked(index, err)
		}
		for i := range t.queues {
			t.queues[i] = &queue{ix: ixs[i]}
		}
		f.topics[c.Topic] = t
		return nil
	case opCommitOffsets:
		if err := validateOffsetsKey(c.Group); err != nil { // a group or a broadcasting member (MemberKey)
			return err
		}
		g := f.offsets[c.Group]
		if g == nil {
			g = map[string]map[int32]uint64{}
			f.offsets[c.Group] = g
		}
		for _, o := range c.Offsets {
			t := f.topics[o.Topic]
			if t == nil {
				return fmt.Errorf("%w: %q", ErrUnknownTopic, o.Topic)
			}
			if o.Queue < 0 || int(o.Queue) >= len(t.queues) {
				return fmt.Errorf("%w: queue %d of topic %q", ErrInvalidQueue, o.Queue, o.Topic)
			}
		}
		for _, o := range c.Offsets {
			m := g[o.Topic]
			if m == nil {
				m = map[int32]uint64{}
				g[o.Topic] = m
			}
			m[o.Queue] = o.Offset
		}
		return nil
	case opRegisterNode:
		if c.Node == nil || c.Node.ID == "" {
			return fmt.Errorf("%w: register without a node", ErrCorruptCommand)
		}
		f.nodes[c.Node.ID] = *c.Node
		return nil
	case opForgetNode:
		delete(f.nodes, c.Node.ID)
		return nil
	case opRetain:
		f.retainLocked(c.Below, c.Mins)
		return nil
	case opSetMaxReconsume:
		return f.applySetMaxReconsumeLocked(c)
	case opSetGroupID:
		return f.applySetGroupIDLocked(c)
	case opNumberProducer:
		return f.applyNumberProducerLocked()
	case opTxnRollback:
		return f.applyTxnRollbackLocked(c)
	default:
		if res, ok := f.applyUserLocked(c); ok {
			return res
		}
		if res, ok := f.applyLifecycleLocked(c); ok {
			return res
		}
		if res, ok := f.applyLocksLocked(c); ok {
			return res
		}
		return fmt.Errorf("%w: unknown op %q", ErrCorruptCommand, c.Op)
	}
}
