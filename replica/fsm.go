package replica

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
)

// Errors returned by the FSM and its readers. The broker maps them to API
// errors; they never carry raft types.
var (
	ErrUnknownTopic   = errors.New("unknown topic")
	ErrTopicExists    = errors.New("topic exists")
	ErrInvalidName    = errors.New("invalid name")
	ErrInvalidQueue   = errors.New("invalid queue")
	ErrStaleSequence  = errors.New("producer sequence is older than the dedupe window")
	ErrCorruptCommand = errors.New("corrupt command")
	// ErrDamaged: this node met a damaged committed entry and stopped
	// applying; it holds no state at or after that entry. The entry is
	// committed on the group, so a producer retries it (same producer id
	// and sequence) on a healthy leader.
	ErrDamaged = errors.New("this node stopped applying at a damaged log entry")
	// ErrSequenceReused: a request came with a (producer id, sequence)
	// that a request with other content (another digest or message count)
	// already used. Nothing of it is stored and the remembered result stays.
	ErrSequenceReused = errors.New("producer sequence already used by another request")
)

// Limits of the replicated state.
const (
	MaxQueues      = 1024
	MaxNameLen     = 127
	DedupeWindow   = 1024  // sequences remembered per producer
	MaxProducers   = 65536 // producers remembered, least recently used evicted
	DefaultQueues  = 4
	maxSkipPerRec  = 1 << 16
	snapshotFormat = 2 // 2: remembered results carry the request's digest and message counts
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._%-]+$`)

// ValidateName checks a topic or consumer group name.
func ValidateName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalidName, kind)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %s name is %d bytes, at most %d", ErrInvalidName, kind, len(name), MaxNameLen)
	case !nameRE.MatchString(name):
		return fmt.Errorf("%w: %s name %q may only hold letters, digits and . _ %% -", ErrInvalidName, kind, name)
	}
	return nil
}

// record is one index record: the messages of one queue inside one Raft
// entry. skip lists the request numbers of the entry that were not appended
// (duplicates, errors); it is nil in the common case, and a pointer so that
// a record takes 32 bytes, not 48 (the index grows by one record per entry
// and queue: TestRecordSize).
type record struct {
	base  uint64
	index uint64
	count uint32
	skip  *[]uint32
}

func (r *record) skipped() []uint32 {
	if r.skip == nil {
		return nil
	}
	return *r.skip
}

func skipPtr(s []uint32) *[]uint32 {
	if len(s) == 0 {
		return nil
	}
	return &s
}

type queue struct {
	records []record
	next    uint64 // offset of the next message
	min     uint64 // lowest retained offset
}

type topic struct {
	name   string
	queues []*queue
}

// FSM is the replicated state machine: topics, the per-queue index into the
// Raft log, consumer group offsets, the producer dedupe table and the node
// registry. Message bodies stay in the log; the FSM only points at them.
//
// Apply runs on raft's FSM goroutine; readers take the read lock. Snapshots
// copy the state under the read lock (index slices are append-only, so their
// headers are enough).
type FSM struct {
	log hclog.Logger

	mu        sync.RWMutex
	topics    map[string]*topic
	offsets   map[string]map[string]map[int32]uint64 // group -> topic -> queue -> offset
	producers map[string]*producer
	lru       *list.List // of *producer, least recently used first
	nodes     map[string]NodeInfo
	logFloor  uint64 // no message is stored below this log index (Retain)

	applied  atomic.Uint64
	damage   fsmDamage
	notifyMu sync.Mutex
	notify   chan struct{}
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// New returns an empty FSM.
func New(logger hclog.Logger) *FSM {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	f := &FSM{log: logger, notify: make(chan struct{})}
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
	f.mu.Lock()
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
	f.mu.Unlock()
	if last > 0 {
		f.applied.Store(last)
	}
	f.damage.tell()
	f.wake()
	return out
}

// fsmDamage is the damaged entry that stopped the FSM (at 0: none).
type fsmDamage struct {
	at     atomic.Uint64
	mu     sync.Mutex
	err    error
	notify func(index uint64, err error)
	told   bool
}

// OnDamaged registers fn to be called once, after the apply that met a
// damaged entry (on raft's FSM goroutine; it must not block). Register it
// before raft starts.
func (f *FSM) OnDamaged(fn func(index uint64, err error)) {
	f.damage.mu.Lock()
	f.damage.notify = fn
	f.damage.mu.Unlock()
}

// Damaged returns the damaged entry this FSM stopped at and why (0, nil:
// none).
func (f *FSM) Damaged() (uint64, error) {
	f.damage.mu.Lock()
	defer f.damage.mu.Unlock()
	return f.damage.at.Load(), f.damage.err
}

// markDamagedLocked stops the FSM at entry index.
func (f *FSM) markDamagedLocked(index uint64, err error) error {
	err = fmt.Errorf("entry %d: %w: %w", index, ErrDamaged, err)
	f.damage.mu.Lock()
	if f.damage.at.Load() == 0 {
		f.damage.at.Store(index)
		f.damage.err = err
	}
	f.damage.mu.Unlock()
	f.log.Error("stopped applying at a damaged log entry; this node no longer serves, leads or snapshots",
		"index", index, "error", err)
	return err
}

func (d *fsmDamage) tell() {
	if d.at.Load() == 0 {
		return
	}
	d.mu.Lock()
	if d.told || d.notify == nil {
		d.mu.Unlock()
		return
	}
	d.told = true
	at, err, fn := d.at.Load(), d.err, d.notify
	d.mu.Unlock()
	fn(at, err)
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
		return f.applyMetaLocked(cmd)
	default:
		// raftmq writes no other command type: a damaged type byte.
		return f.markDamagedLocked(index, fmt.Errorf("%w: type %d", ErrCorruptCommand, data[0]))
	}
}

// CheckCommand validates the encoding of any raftmq command without applying
// it (used to verify a log at start).
func CheckCommand(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty", ErrCorruptCommand)
	}
	switch raftlog.CommandType(data[0]) {
	case raftlog.CmdBatch:
		b, err := raftlog.ParseBatch(data)
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

// QueueBase is the offset given to the first message of a request in one
// queue, and how many of the request's messages that queue got (0 when
// unknown: a result restored from a format-1 snapshot).
type QueueBase struct {
	Queue uint32
	Count uint32
	Base  uint64
}

// ProduceResult is what the FSM answers for one request of a batch.
type ProduceResult struct {
	Err       error
	Duplicate bool
	// legacy marks a result restored from a format-1 snapshot, which holds
	// neither the digest nor the counts. (Next to Duplicate: the dedupe
	// table holds up to DedupeWindow results per producer, and here it
	// costs no padding.)
	legacy   bool
	LogIndex uint64
	Ordinal  uint32 // ordinal of the request's first message in its entry
	Count    uint32 // messages of the request
	Digest   uint64 // raftlog.RequestView.Digest of the request (0 without a producer id)
	Bases    []QueueBase
}

// Ack is the acknowledgement of one message.
type Ack struct {
	Queue  uint32
	Offset uint64
	ID     string
}

// ErrMismatchedRetry: the queues given to Acks are not those of the request
// the result is for, so some ack would name an offset that holds another
// message. The FSM refuses such a retry itself (ErrSequenceReused); this is
// the last check before an ack leaves.
var ErrMismatchedRetry = errors.New("retry does not match the request appended under its producer id and sequence")

// Acks turns a result into one ack per message, given each message's queue in
// request order. It refuses, rather than naming an offset that holds another
// message, when the queues do not match the request the result is for: a
// queue the result does not know, more messages for a queue than the request
// put there, or another message count.
func (r *ProduceResult) Acks(queues []uint32) ([]Ack, error) {
	if !r.legacy && len(queues) != int(r.Count) {
		return nil, fmt.Errorf("%w: %d messages, the appended request had %d", ErrMismatchedRetry, len(queues), r.Count)
	}
	acks := make([]Ack, len(queues))
	next := make(map[uint32]int, len(r.Bases)) // queue -> index in left and off
	left := make([]uint32, len(r.Bases))
	off := make([]uint64, len(r.Bases))
	for i, b := range r.Bases {
		next[b.Queue] = i
		left[i], off[i] = b.Count, b.Base
	}
	for i, q := range queues {
		bi, ok := next[q]
		if !ok {
			return nil, fmt.Errorf("%w: message %d is for queue %d, the appended request used queues %v", ErrMismatchedRetry, i, q, r.Bases)
		}
		if !r.legacy {
			if left[bi] == 0 {
				return nil, fmt.Errorf("%w: message %d is one more for queue %d than the %d the appended request put there", ErrMismatchedRetry, i, q, r.Bases[bi].Count)
			}
			left[bi]--
		}
		acks[i] = Ack{Queue: q, Offset: off[bi], ID: raftlog.MessageID(r.LogIndex, r.Ordinal+uint32(i))}
		off[bi]++
	}
	return acks, nil
}

// applyBatchLocked assigns offsets to every request of the entry and records
// one index record per queue touched.
func (f *FSM) applyBatchLocked(index uint64, data []byte) interface{} {
	b, err := raftlog.ParseBatch(data)
	if err != nil {
		return f.markDamagedLocked(index, err)
	}
	results := make([]*ProduceResult, 0, b.Requests())
	type qkey struct {
		t *topic
		q uint32
	}
	recs := map[qkey]*record{}
	var order []qkey
	var ordinal uint32
	var skipped []uint32
	err = b.Each(func(i int, rv *raftlog.RequestView) bool {
		res := &ProduceResult{LogIndex: index, Ordinal: ordinal, Count: uint32(rv.Count)}
		ordinal += uint32(rv.Count)
		var digest uint64 // computed by dedupeLocked when the request has a producer id
		results = append(results, res)
		t := f.topics[rv.Topic]
		if t == nil {
			res.Err = fmt.Errorf("%w: %q", ErrUnknownTopic, rv.Topic)
		} else if prev, err := f.dedupeLocked(t, rv, &digest); err != nil {
			res.Err = err
		} else if prev != nil {
			*res = *prev
			res.Duplicate = true
		}
		if res.Err == nil && !res.Duplicate {
			rv.Messages(func(_ int, m *raftlog.MessageView) bool {
				if int(m.Queue) >= len(t.queues) {
					res.Err = fmt.Errorf("%w: queue %d of topic %q with %d queues", ErrInvalidQueue, m.Queue, t.name, len(t.queues))
					return false
				}
				return true
			})
		}
		if res.Err != nil || res.Duplicate {
			skipped = append(skipped, uint32(i))
			return true
		}
		rv.Messages(func(_ int, m *raftlog.MessageView) bool {
			k := qkey{t, m.Queue}
			r := recs[k]
			if r == nil {
				q := t.queues[m.Queue]
				r = &record{base: q.next, index: index}
				recs[k] = r
				order = append(order, k)
			}
			bi := -1
			for j := range res.Bases {
				if res.Bases[j].Queue == m.Queue {
					bi = j
					break
				}
			}
			if bi < 0 {
				bi = len(res.Bases)
				res.Bases = append(res.Bases, QueueBase{Queue: m.Queue, Base: r.base + uint64(r.count)})
			}
			res.Bases[bi].Count++
			r.count++
			return true
		})
		if rv.ProducerID != "" {
			res.Digest = digest
			f.rememberLocked(rv.ProducerID, rv.Seq, index, res)
		}
		return true
	})
	if err != nil {
		// The CRC matched, so this is an encoder bug, not disk rot: every
		// node holds these bytes and rejects the whole entry alike, so
		// offsets stay the same everywhere. Not a skip of a damaged entry.
		f.log.Error("rejecting malformed batch", "index", index, "error", err)
		return fmt.Errorf("entry %d: %w", index, err)
	}
	for _, k := range order {
		r := recs[k]
		r.skip = skipPtr(skipped)
		q := k.t.queues[k.q]
		q.records = append(q.records, *r)
		q.next += uint64(r.count)
	}
	return results
}

// NodeInfo is a node's addresses as registered in the replicated state.
type NodeInfo struct {
	ID         string `json:"id"`
	ClientAddr string `json:"client_addr"`
	PeerAddr   string `json:"peer_addr"`
	HTTPAddr   string `json:"http_addr"`
}

func (f *FSM) applyMetaLocked(c *metaCmd) interface{} {
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
		t := &topic{name: c.Topic, queues: make([]*queue, c.Queues)}
		for i := range t.queues {
			t.queues[i] = &queue{}
		}
		f.topics[c.Topic] = t
		return nil
	case opCommitOffsets:
		if err := ValidateName("group", c.Group); err != nil {
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
		f.retainLocked(c.Below)
		return nil
	default:
		return fmt.Errorf("%w: unknown op %q", ErrCorruptCommand, c.Op)
	}
}

// producer is the dedupe state of one producer id.
type producer struct {
	id      string
	results map[uint64]*ProduceResult
	ring    []uint64 // sequences in the order they were remembered
	head    int
	floor   uint64 // highest sequence forgotten; older ones are refused
	elem    *list.Element
}

// dedupeLocked looks a request up in the dedupe table. It returns the
// remembered result when the request is a retry of the one remembered under
// its (producer id, sequence): same digest and message count. Another
// request under a remembered (producer id, sequence) gets ErrSequenceReused.
// It sets *digest to the request's digest when the request has a producer id.
func (f *FSM) dedupeLocked(t *topic, rv *raftlog.RequestView, digest *uint64) (*ProduceResult, error) {
	id, seq := rv.ProducerID, rv.Seq
	if id == "" {
		return nil, nil
	}
	*digest = rv.Digest()
	p := f.producers[id]
	if p == nil {
		return nil, nil
	}
	if r, ok := p.results[seq]; ok {
		if r.legacy {
			if err := fitsLegacy(t, r, rv); err != nil {
				return nil, err
			}
			return r, nil
		}
		switch {
		case uint32(rv.Count) != r.Count:
			return nil, fmt.Errorf("%w: producer %q sequence %d held %d messages (entry %d), this request holds %d; nothing of it was stored",
				ErrSequenceReused, id, seq, r.Count, r.LogIndex, rv.Count)
		case *digest != r.Digest:
			return nil, fmt.Errorf("%w: producer %q sequence %d held other content (entry %d): topic, queues, keys, tags, properties or bodies differ (digest %016x, this request %016x); nothing of it was stored",
				ErrSequenceReused, id, seq, r.LogIndex, r.Digest, *digest)
		}
		return r, nil
	}
	if len(p.ring) == DedupeWindow && seq <= p.floor {
		return nil, fmt.Errorf("%w: producer %q sequence %d, window starts after %d", ErrStaleSequence, id, seq, p.floor)
	}
	return nil, nil
}

// fitsLegacy checks a request against a result restored from a format-1
// snapshot, which holds neither digest nor counts. The request is taken as
// a retry when each of its messages goes to a queue the remembered request
// used and, counted from the remembered base, stays within what that entry
// appended to the queue of this topic: every ack then names an offset the
// same entry wrote, never one of a later entry or one not yet written. The
// content itself cannot be compared. Refusing every request under such a
// sequence would be wrong the other way: a true retry of a request that was
// stored would be told, for good, that nothing was stored, and a producer
// that then sends it under a new sequence stores it twice. Results of this
// kind leave the table as the producer's window moves on (DedupeWindow
// later sequences); every node stores nothing for the request either way.
func fitsLegacy(t *topic, r *ProduceResult, rv *raftlog.RequestView) error {
	end := make(map[uint32]uint64, len(r.Bases)) // queue -> next offset of the request
	for _, b := range r.Bases {
		end[b.Queue] = b.Base
	}
	var err error
	rv.Messages(func(j int, m *raftlog.MessageView) bool {
		off, ok := end[m.Queue]
		if !ok {
			err = fmt.Errorf("%w: producer %q sequence %d used queues %v (entry %d), message %d of this request is for queue %d; nothing of it was stored",
				ErrSequenceReused, rv.ProducerID, rv.Seq, r.Bases, r.LogIndex, j, m.Queue)
			return false
		}
		end[m.Queue] = off + 1
		return true
	})
	if err != nil {
		return err
	}
	for _, b := range r.Bases {
		if !entryHolds(t, b.Queue, r.LogIndex, end[b.Queue]) {
			return fmt.Errorf("%w: producer %q sequence %d: entry %d holds fewer messages in queue %d of topic %q than this request has; nothing of it was stored",
				ErrSequenceReused, rv.ProducerID, rv.Seq, r.LogIndex, b.Queue, t.name)
		}
	}
	return nil
}

// entryHolds tells whether the record of entry index in queue q of t ends at
// or after offset end.
func entryHolds(t *topic, q uint32, index, end uint64) bool {
	if int(q) >= len(t.queues) {
		return false
	}
	recs := t.queues[q].records
	i := sort.Search(len(recs), func(i int) bool { return recs[i].index >= index })
	return i < len(recs) && recs[i].index == index && end <= recs[i].base+uint64(recs[i].count)
}

func (f *FSM) rememberLocked(id string, seq, index uint64, res *ProduceResult) {
	p := f.producers[id]
	if p == nil {
		if len(f.producers) >= MaxProducers {
			old := f.lru.Remove(f.lru.Front()).(*producer)
			delete(f.producers, old.id)
		}
		p = &producer{id: id, results: map[uint64]*ProduceResult{}}
		p.elem = f.lru.PushBack(p)
		f.producers[id] = p
	} else {
		f.lru.MoveToBack(p.elem)
	}
	stored := &ProduceResult{LogIndex: res.LogIndex, Ordinal: res.Ordinal, Count: res.Count, Digest: res.Digest, Bases: res.Bases}
	if len(p.ring) < DedupeWindow {
		p.ring = append(p.ring, seq)
	} else {
		old := p.ring[p.head]
		delete(p.results, old)
		p.floor = max(p.floor, old)
		p.ring[p.head] = seq
		p.head = (p.head + 1) % DedupeWindow
	}
	p.results[seq] = stored
}

// Location points at the messages of one queue in one Raft entry.
type Location struct {
	Base     uint64   // queue offset of the first message of the queue in the entry
	LogIndex uint64   // Raft index of the entry
	Count    uint32   // messages of the queue in the entry
	Skip     []uint32 // request numbers in the entry that were not appended
}

// retainLocked drops the index records of every entry below index below and
// moves each queue's minimum offset to its first remaining message (to its
// end when none remains).
func (f *FSM) retainLocked(below uint64) {
	if below <= f.logFloor {
		return
	}
	f.logFloor = below
	for _, t := range f.topics {
		for _, q := range t.queues {
			i := sort.Search(len(q.records), func(i int) bool { return q.records[i].index >= below })
			if i == 0 {
				continue
			}
			// A copy, not a reslice: the dropped records' memory is freed.
			// (Snapshots share the old array, which nobody writes again.)
			q.records = append([]record(nil), q.records[i:]...)
			if len(q.records) > 0 {
				q.min = max(q.min, q.records[0].base)
			} else {
				q.min = q.next
			}
		}
	}
}

// LogFloor is the log index below which retention has dropped every message
// (0: nothing dropped). A node may delete its log below it once a snapshot
// covers it.
func (f *FSM) LogFloor() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.logFloor
}

// QueueRange is the retained range of a queue: [Min, Max).
type QueueRange struct {
	Min, Max uint64
}

// Locate returns up to limit locations covering offsets from offset on, and
// the queue's range as this node has applied it.
func (f *FSM) Locate(topicName string, q int32, offset uint64, limit int) ([]Location, QueueRange, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[topicName]
	if t == nil {
		return nil, QueueRange{}, fmt.Errorf("%w: %q", ErrUnknownTopic, topicName)
	}
	if q < 0 || int(q) >= len(t.queues) {
		return nil, QueueRange{}, fmt.Errorf("%w: queue %d of topic %q with %d queues", ErrInvalidQueue, q, topicName, len(t.queues))
	}
	qu := t.queues[q]
	rng := QueueRange{Min: qu.min, Max: qu.next}
	if offset < qu.min || offset >= qu.next {
		return nil, rng, nil
	}
	recs := qu.records
	i := sort.Search(len(recs), func(i int) bool { return recs[i].base+uint64(recs[i].count) > offset })
	var out []Location
	for ; i < len(recs) && len(out) < limit; i++ {
		r := recs[i]
		out = append(out, Location{Base: r.base, LogIndex: r.index, Count: r.count, Skip: r.skipped()})
	}
	return out, rng, nil
}

// TopicInfo describes a topic as this node has applied it.
type TopicInfo struct {
	Name   string
	Queues []QueueRange
}

// Topic returns one topic.
func (f *FSM) Topic(name string) (TopicInfo, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[name]
	if t == nil {
		return TopicInfo{}, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return t.infoLocked(), nil
}

func (t *topic) infoLocked() TopicInfo {
	ti := TopicInfo{Name: t.name, Queues: make([]QueueRange, len(t.queues))}
	for i, q := range t.queues {
		ti.Queues[i] = QueueRange{Min: q.min, Max: q.next}
	}
	return ti
}

// Topics lists every topic, sorted by name.
func (f *FSM) Topics() []TopicInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]TopicInfo, 0, len(f.topics))
	for _, t := range f.topics {
		out = append(out, t.infoLocked())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// QueueCount returns the number of queues of a topic, or 0 when unknown.
func (f *FSM) QueueCount(name string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if t := f.topics[name]; t != nil {
		return len(t.queues)
	}
	return 0
}

// Offsets returns a group's committed offsets for a topic (queue -> offset).
func (f *FSM) Offsets(group, topicName string) map[int32]uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := map[int32]uint64{}
	for q, o := range f.offsets[group][topicName] {
		out[q] = o
	}
	return out
}

// Groups lists the consumer groups with committed offsets, sorted.
func (f *FSM) Groups() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.offsets))
	for g := range f.offsets {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// GroupTopics lists the topics a group has committed offsets for, sorted.
func (f *FSM) GroupTopics(group string) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	for t := range f.offsets[group] {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Node returns a registered node.
func (f *FSM) Node(id string) (NodeInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.nodes[id]
	return n, ok
}

// Nodes returns every registered node.
func (f *FSM) Nodes() map[string]NodeInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]NodeInfo, len(f.nodes))
	for k, v := range f.nodes {
		out[k] = v
	}
	return out
}

// Snapshot captures the metadata; message bodies stay in the log.
//
// A damaged FSM (see ApplyBatch) refuses: raft labels a snapshot with the
// index of the last entry it handed to the FSM, which this state does not
// hold, and a restart from it would lose the entries after the damage.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if at, err := f.Damaged(); at != 0 {
		return nil, fmt.Errorf("snapshot refused: %w", err)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{state: f.captureLocked()}, nil
}

// Restore replaces the state with a snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.mu.Lock()
	f.reset()
	f.loadLocked(st)
	f.mu.Unlock()
	// Raft applies the entries after the snapshot next; until one comes,
	// the node has applied what the snapshot holds.
	f.applied.Store(st.Applied)
	f.wake()
	return nil
}
