package history

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
)

// Outcome is what a client was told about one produce operation.
type Outcome string

// Outcomes of an operation.
const (
	// OutcomeOK: acknowledged, with queue, offset and id per message.
	OutcomeOK Outcome = "ok"
	// OutcomeFail: a definite error (InvalidArgument, NotFound, ...): the
	// group refused the request, so none of its messages may appear.
	OutcomeFail Outcome = "fail"
	// OutcomeUnknown: a timeout, Unavailable after retries, a deadline: the
	// messages may appear, each at most once.
	OutcomeUnknown Outcome = "unknown"
)

// Classify is what the error of a produce request told its client:
// client.Classify's verdict, and for requests sent without the SDK also
// gRPC's refusal of a message over its size limit ("received message
// larger than max" from the node, "trying to send message larger than
// max" from the client), which the SDK reports as ErrRequestTooLarge: it
// comes before any handler reads the request, so nothing of it can be
// stored. Like every definite failure it is still checked: none of its
// messages may be in the log (failed-present).
func Classify(err error) Outcome {
	switch client.Classify(err) {
	case client.Acknowledged:
		return OutcomeOK
	case client.Failed:
		return OutcomeFail
	}
	if api.OverSizeLimit(err) {
		return OutcomeFail
	}
	return OutcomeUnknown
}

// SentMessage is one message of a produce operation.
type SentMessage struct {
	// Body is the message's unique name ("w3-000017-1"); the body on the
	// wire is Body, optionally followed by "|" and padding.
	Body string `json:"body"`
	// Hash is BodyHash of the full body bytes.
	Hash uint64 `json:"hash"`
	Key  string `json:"key,omitempty"`
	Tag  string `json:"tag,omitempty"`
	// Props is PropsHash of the message's properties (0: none).
	Props uint64 `json:"props,omitempty"`
	// Queue is the queue the producer named, -1 when the broker picks.
	Queue int32 `json:"queue"`
}

// Ack is the position an acknowledgement reported for one message.
type Ack struct {
	Queue  int32  `json:"queue"`
	Offset uint64 `json:"offset"`
	ID     string `json:"id"`
	// DeliverAt is when a delayed message is delivered (unix ms): its
	// offset is assigned then, so Offset is 0 and ID names the staged
	// message, which its delivered copy names in LogEntry.Staged.
	DeliverAt int64 `json:"deliver_at_ms,omitempty"`
}

// Op is one produce request (one or more messages, appended atomically)
// and what its client was told.
type Op struct {
	Worker   string        `json:"worker"`
	Producer string        `json:"producer"`
	Seq      uint64        `json:"seq"` // the worker's op number; ops of a worker never overlap
	Invoke   time.Duration `json:"invoke_ns"`
	Complete time.Duration `json:"complete_ns"`
	Messages []SentMessage `json:"messages"`
	Outcome  Outcome       `json:"outcome"`
	Error    string        `json:"error,omitempty"`
	Acks     []Ack         `json:"acks,omitempty"`
	// Duplicate is the broker's answer that the request was a retry of one
	// it had appended (raw requests only; the SDK does not say).
	Duplicate bool `json:"duplicate,omitempty"`
	// Delayed: the request's messages were sent with a delay (all of a
	// request are delayed or none). They appear in the topic only at their
	// time, at an offset assigned then, so neither key order nor real-time
	// order applies to them.
	Delayed bool `json:"delayed,omitempty"`
	// Txn, for a message sent in a transaction (one per op), is what the
	// client decided; its ack names the half message (its queue in the
	// topic, its half queue offset and id), so its place in the topic is
	// known only from the log, and neither key order nor real-time order
	// applies.
	Txn *TxnOp `json:"txn,omitempty"`
	// Kind marks hand-made requests: KindOverLimit (must be refused with a
	// definite error, nothing of it stored), KindAtLimit (just within the
	// request bound: must not be refused) and KindReusedSeq (a producer
	// sequence reused with different content).
	Kind string `json:"kind,omitempty"`
}

// TxnOp is a transaction's decisions as its client made them.
type TxnOp struct {
	// Local is what the local transaction answered: commit, rollback or
	// unknown.
	Local string `json:"local"`
	// Final is the client's decision, whichever way it reaches the group:
	// commit or rollback (Local, or for unknown the check-back's answer,
	// which the client decided before sending).
	Final string `json:"final"`
	// AckAt is when the half message's acknowledgement reached the client
	// (the local transaction runs then); Op.Complete is after the decision
	// was sent.
	AckAt time.Duration `json:"ack_at_ns,omitempty"`
	// CommitAt is when the local transaction answered commit, just before
	// the decision was sent (0: it did not).
	CommitAt time.Duration `json:"commit_at_ns,omitempty"`
	// EndError is the error of sending the local decision after the half
	// message was acknowledged: the check-back then decides.
	EndError string `json:"end_error,omitempty"`
}

// TxnCheck is one answer of a producer's check-back.
type TxnCheck struct {
	Body   string        `json:"body"`
	Answer string        `json:"answer"`
	At     time.Duration `json:"at_ns"` // when it answered, before the decision was sent
}

// Transaction decisions as TxnOp and TxnCheck name them.
const (
	TxnCommit   = "commit"
	TxnRollback = "rollback"
	TxnUnknown  = "unknown"
)

// Kinds of hand-made requests (Op.Kind).
const (
	KindOverLimit = "over-limit"
	KindAtLimit   = "at-limit"
	KindReusedSeq = "reused-seq"
)

// Delivery is one message a consumer received while the faults ran.
type Delivery struct {
	Consumer       string        `json:"consumer"`
	Queue          int32         `json:"queue"`
	Offset         uint64        `json:"offset"`
	ID             string        `json:"id"`
	Body           string        `json:"body"`
	Hash           uint64        `json:"hash"`
	ServedBy       string        `json:"served_by"`
	ServedByLeader bool          `json:"served_by_leader"`
	At             time.Duration `json:"at_ns"`
}

// LogEntry is one message of a queue as read back after healing.
type LogEntry struct {
	Offset uint64 `json:"offset"`
	ID     string `json:"id"`
	Body   string `json:"body"`
	Hash   uint64 `json:"hash"`
	Key    string `json:"key,omitempty"`
	Tag    string `json:"tag,omitempty"`
	Props  uint64 `json:"props,omitempty"`
	// Timestamp is the message's timestamp (unix ms) as served.
	Timestamp int64 `json:"ts,omitempty"`
	// Staged is the id of the staged message a delivered delayed message
	// stands for (its produce ack's id); "" for an ordinary message.
	Staged string `json:"staged,omitempty"`
	// Origin and Reconsume are, on a copy a consumer sent back, the id of
	// the message it stands for and its reconsume count (properties
	// ORIGIN_MESSAGE_ID and RECONSUME_TIME).
	Origin    string `json:"origin,omitempty"`
	Reconsume string `json:"reconsume,omitempty"`
}

// SendBack is a consumer's "consume later" of a message it received, and
// what the broker answered.
type SendBack struct {
	Consumer string        `json:"consumer"`
	Group    string        `json:"group"`
	ID       string        `json:"id"` // the message sent back
	Body     string        `json:"body"`
	Hash     uint64        `json:"hash"`
	DLQ      bool          `json:"dlq,omitempty"` // asked to dead-letter it at once
	Invoke   time.Duration `json:"invoke_ns"`
	Complete time.Duration `json:"complete_ns"`
	Outcome  Outcome       `json:"outcome"`
	Error    string        `json:"error,omitempty"`
	// The answer: the copy's id (its staged id when delayed), topic, and
	// when it is due (unix ms; 0 for a dead letter).
	CopyID       string `json:"copy_id,omitempty"`
	CopyTopic    string `json:"copy_topic,omitempty"`
	DeadLettered bool   `json:"dead_lettered,omitempty"`
	DeliverAt    int64  `json:"deliver_at_ms,omitempty"`
}

// DiskMessage is one message as a node's log on disk holds it, read
// offline (ReadDiskLog), at the log index and ordinal its id names.
type DiskMessage struct {
	Producer  string `json:"producer"`
	Seq       uint64 `json:"seq"`
	Topic     string `json:"topic"`
	Queue     uint32 `json:"queue"`
	Body      string `json:"body"`
	Hash      uint64 `json:"hash"`
	Key       string `json:"key,omitempty"`
	Tag       string `json:"tag,omitempty"`
	Props     uint64 `json:"props,omitempty"`
	Timestamp int64  `json:"ts,omitempty"`
}

// QueueLog is every queue's messages in the order read: queue -> entries.
type QueueLog map[int32][]LogEntry

// Event is something the nemesis (or the runner) did.
type Event struct {
	At     time.Duration `json:"at_ns"`
	Kind   string        `json:"kind"`
	Detail string        `json:"detail"`
}

// History is everything a run recorded: the input of Check.
type History struct {
	Seed  int64  `json:"seed"`
	Topic string `json:"topic"`
	// Start is when the run's clock (Recorder.Now) started, in unix ms:
	// delivery times of delayed messages are compared with it.
	Start  int64 `json:"start_unix_ms,omitempty"`
	Queues int32 `json:"queues"`
	// FaultStart and FaultEnd bound the phase in which faults ran; the
	// unavailability figures look at acks in it.
	FaultStart time.Duration `json:"fault_start_ns"`
	FaultEnd   time.Duration `json:"fault_end_ns"`

	Ops        []Op       `json:"ops"`
	Deliveries []Delivery `json:"deliveries"`
	Events     []Event    `json:"events"`
	// Retention says the group ran with --retention-mb: Min is then every
	// queue's lowest offset the broker reports at the end, where the reads
	// start, and a node's log may be a suffix of the group's (see Nodes).
	// Without retention Min is 0 for every queue. Min decides nothing: what
	// may be missing is what Cut allows.
	Retention bool             `json:"retention,omitempty"`
	Min       map[int32]uint64 `json:"min,omitempty"`
	// Cut is the highest retention cut the group announced (the Below of the
	// last retain command found in the nodes' logs on disk): messages of log
	// entries below it may be gone, nothing else.
	Cut uint64 `json:"cut,omitempty"`
	// DiskRead says Disk holds, for every acknowledged message id, the
	// message found at that id in the nodes' logs on disk (missing: no node
	// holds it); read offline after every node stopped.
	DiskRead bool                   `json:"disk_read,omitempty"`
	Disk     map[string]DiskMessage `json:"disk,omitempty"`
	// FollowerReads says some consumer read with follower reads on: a run
	// without a single follower-served delivery did not cover them.
	FollowerReads bool `json:"follower_reads,omitempty"`
	// Final is the log as a fresh consumer group read it from earliest.
	Final QueueLog `json:"final"`
	// SendBacks are the consumers' send-backs; Retry and DeadLetters the
	// group's %RETRY% and %DLQ% topics as read from earliest at the end
	// (all queues together: one each).
	SendBacks []SendBack `json:"send_backs,omitempty"`
	// TxnChecks are the check-back answers of the transactional producers.
	TxnChecks []TxnCheck `json:"txn_checks,omitempty"`
	// TxnDisk is, for every body sent in a transaction, each distinct
	// message holding it in the nodes' logs on disk (the half message, and
	// the commit's copy), read offline with Disk.
	TxnDisk     map[string][]DiskMessage `json:"txn_disk,omitempty"`
	Retry       []LogEntry               `json:"retry,omitempty"`
	DeadLetters []LogEntry               `json:"dead_letters,omitempty"`
	// Nodes is the log as read from each node, pinned to it, from Min on;
	// it starts later where the node no longer holds the bodies (it
	// installed a snapshot).
	Nodes map[string]QueueLog `json:"nodes"`
	// NodeErrors are problems reading a node's log (it then counts as divergent).
	NodeErrors map[string]string `json:"node_errors,omitempty"`

	// Durability is the --durability every node ran with ("" is
	// raftlog.QuorumFsync). Under raftlog.QuorumMemory a simultaneous
	// machine crash of a majority (MajorityCrashes) may lose what was
	// acknowledged shortly before it; nothing else may be lost.
	Durability string `json:"durability,omitempty"`
	// MajorityCrashes are the simultaneous machine crashes of a majority of
	// the group's nodes that the run applied (SIGKILL under the lazy file
	// system: each node lost what it had not fsynced).
	MajorityCrashes []MajorityCrash `json:"majority_crashes,omitempty"`
	// Cuts are the times a node reported, in its own log, that raft
	// replaced log entries it had applied: until then, a node that kept
	// entries a majority crash took from the group may serve them.
	Cuts []NodeCut `json:"cuts,omitempty"`
}

// NodeCut is a node's report that raft replaced entries it had applied,
// on the run's clock.
type NodeCut struct {
	Node string        `json:"node"`
	At   time.Duration `json:"at_ns"`
}

// MajorityCrash is one simultaneous machine crash of a majority of a
// group's nodes, on the run's clock.
type MajorityCrash struct {
	Nodes []string      `json:"nodes"`
	At    time.Duration `json:"at_ns"` // when they were killed
	// Bound is how long before At a write may still have been unsynced on
	// the crashed nodes: the sync interval, the longest an fsync took
	// meanwhile, and a margin.
	Bound time.Duration `json:"bound_ns"`
	// Recovered is when the group had a leader again with the crashed
	// nodes restarted: what was acknowledged after it is safe again.
	Recovered time.Duration `json:"recovered_ns"`
}

// ackedAt is when the client learned that op was acknowledged: for a
// transaction, when its half message was.
func ackedAt(op *Op) time.Duration {
	if op.Txn != nil && op.Txn.AckAt > 0 {
		return op.Txn.AckAt
	}
	return op.Complete
}

// crashAllows returns the majority crash that may have lost a write
// acknowledged at ack, under QuorumMemory: the one whose window
// [At-Bound, Recovered] holds ack. Under QuorumFsync it returns nil.
func (h *History) crashAllows(ack time.Duration) *MajorityCrash {
	return h.crashOverlaps(ack, ack)
}

// crashOverlaps returns the majority crash of a QuorumMemory run whose
// window overlaps [from, to] (a request's invocation to its answer), or
// nil.
func (h *History) crashOverlaps(from, to time.Duration) *MajorityCrash {
	if h.Durability != raftlog.QuorumMemory {
		return nil
	}
	for i := range h.MajorityCrashes {
		c := &h.MajorityCrashes[i]
		if to >= c.At-c.Bound && from <= c.Recovered {
			return c
		}
	}
	return nil
}

// crashServed reports whether delivery d, of an entry the final log does
// not hold, may be of one a majority crash took from the group under
// QuorumMemory: served no earlier than the first write the crash may have
// lost, and before the serving node held the group's log again: until the
// crash's recovery, or, on a node that had applied entries the crash
// removed, until it reported their cut.
func (h *History) crashServed(d *Delivery) bool {
	if h.crashAllows(d.At) != nil {
		return true
	}
	if h.Durability != raftlog.QuorumMemory {
		return false
	}
	for _, c := range h.MajorityCrashes {
		if d.At < c.At-c.Bound {
			continue
		}
		if cut, ok := h.firstCut(d.ServedBy, c.At); ok && d.At <= cut {
			return true
		}
	}
	return false
}

// firstCut is when node first reported a cut at or after from.
func (h *History) firstCut(node string, from time.Duration) (time.Duration, bool) {
	var first time.Duration
	found := false
	for _, c := range h.Cuts {
		if c.Node == node && c.At >= from && (!found || c.At < first) {
			first, found = c.At, true
		}
	}
	return first, found
}

// BodyHash is the hash the history keeps of a message body.
func BodyHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// brokerProps are the properties the broker adds to a delayed message,
// staged or delivered, and those that mark a half message (TRAN_MSG, which
// its committed copy drops): not part of what the producer sent.
var brokerProps = map[string]bool{mq.PropDelay: true, mq.PropTimerDeliverMS: true, mq.PropRealTopic: true,
	mq.PropRealQueue: true, mq.PropStagedID: true, mq.PropSchedulePopMS: true, mq.PropTransactionPrepared: true}

// PropsHash is the hash the history keeps of a message's properties: of
// the sorted name=value pairs, leaving out those the broker adds to delayed
// messages (brokerProps); 0 for none.
func PropsHash(p map[string]string) uint64 {
	keys := make([]string, 0, len(p))
	for k := range p {
		if !brokerProps[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return 0
	}
	sort.Strings(keys)
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	for _, k := range keys {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write([]byte(k))
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p[k])))])
		h.Write([]byte(p[k]))
	}
	if s := h.Sum64(); s != 0 {
		return s
	}
	return 1
}

// BodyName returns the unique name at the start of a body (up to "|").
func BodyName(b []byte) string {
	s := string(b)
	if i := strings.IndexByte(s, '|'); i >= 0 {
		return s[:i]
	}
	return s
}

// Recorder collects a run's operations, deliveries and events; safe for
// concurrent use.
type Recorder struct {
	start time.Time

	mu         sync.Mutex
	ops        []Op
	deliveries []Delivery
	events     []Event
	sendBacks  []SendBack
	txnChecks  []TxnCheck
}

// AddTxnCheck records a check-back answer.
func (r *Recorder) AddTxnCheck(c TxnCheck) {
	r.mu.Lock()
	r.txnChecks = append(r.txnChecks, c)
	r.mu.Unlock()
}

// TxnBodies returns the name of every message sent in a transaction so far.
func (r *Recorder) TxnBodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, op := range r.ops {
		if op.Txn != nil {
			for _, m := range op.Messages {
				out = append(out, m.Body)
			}
		}
	}
	return out
}

// NewRecorder starts the run's clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the run started.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// AddSendBack records a completed send-back.
func (r *Recorder) AddSendBack(sb SendBack) {
	r.mu.Lock()
	r.sendBacks = append(r.sendBacks, sb)
	r.mu.Unlock()
}

// AddOp records a completed operation.
func (r *Recorder) AddOp(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// AddDelivery records a consumed message.
func (r *Recorder) AddDelivery(d Delivery) {
	r.mu.Lock()
	r.deliveries = append(r.deliveries, d)
	r.mu.Unlock()
}

// Event records a nemesis action.
func (r *Recorder) Event(kind, format string, args ...any) {
	e := Event{At: r.Now(), Kind: kind, Detail: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Events returns a copy of the events so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// AckedBodies returns up to n names of acknowledged messages from the
// older half of the acknowledgements so far, shuffled by rng: messages
// committed well before now.
func (r *Recorder) AckedBodies(rng *rand.Rand, n int) []string {
	return r.ackedBodies(rng, n, func(i, total int, _ uint64) bool { return i < total/2 })
}

// AckedBodiesIn is AckedBodies for messages acknowledged in log entries lo
// to hi (the index is the first half of a message id): with retention, the
// part of a node's log it still holds.
func (r *Recorder) AckedBodiesIn(rng *rand.Rand, n int, lo, hi uint64) []string {
	return r.ackedBodies(rng, n, func(_, _ int, idx uint64) bool { return idx >= lo && idx <= hi })
}

func (r *Recorder) ackedBodies(rng *rand.Rand, n int, keep func(i, total int, index uint64) bool) []string {
	type acked struct {
		body  string
		index uint64
	}
	r.mu.Lock()
	var all []acked
	for _, op := range r.ops {
		if op.Outcome == OutcomeOK {
			for j, m := range op.Messages {
				var idx uint64
				if j < len(op.Acks) {
					idx, _ = raftlog.MessageIndex(op.Acks[j].ID)
				}
				all = append(all, acked{m.Body, idx})
			}
		}
	}
	r.mu.Unlock()
	var out []string
	for i, a := range all {
		if keep(i, len(all), a.index) {
			out = append(out, a.body)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// AckedIDs returns the message id of every acknowledged message so far.
func (r *Recorder) AckedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, op := range r.ops {
		if op.Outcome == OutcomeOK {
			for _, a := range op.Acks {
				out = append(out, a.ID)
			}
		}
	}
	return out
}

// Fill copies what was recorded into h, ops sorted by invocation.
func (r *Recorder) Fill(h *History) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h.Ops = append([]Op(nil), r.ops...)
	sort.SliceStable(h.Ops, func(i, j int) bool { return h.Ops[i].Invoke < h.Ops[j].Invoke })
	h.Deliveries = append([]Delivery(nil), r.deliveries...)
	h.Events = append([]Event(nil), r.events...)
	h.SendBacks = append([]SendBack(nil), r.sendBacks...)
	h.TxnChecks = append([]TxnCheck(nil), r.txnChecks...)
	h.Start = r.start.UnixMilli()
}

// WriteJSON writes the history to path.
func (h *History) WriteJSON(path string) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// ReadHistory reads a history written by WriteJSON (to re-check it).
func ReadHistory(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("decode history %s: %w", path, err)
	}
	return &h, nil
}
