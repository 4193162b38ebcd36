package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// fakeReplica is a one-node replica in memory: it implements every interface
// of replica.go, and Log, with no raft, no disk and no network. Produce
// applies at once, numbering entries 1, 2, ...; it keeps each entry's bytes
// so that Pull reads real batches, and answers like the real state machine
// (offsets per queue, dedupe by producer id and sequence, unknown topics).
// Tests set the role and inject errors.
type fakeReplica struct {
	id string

	mu              sync.Mutex
	role            election.Role
	ready           bool
	leaderID        string
	failWrite       error // every write fails with it (a raft error: nothing applied)
	topics          map[string][]*fakeQueue
	offsets         map[string]map[string]map[int32]uint64
	nodes           map[string]store.NodeInfo
	entries         map[uint64][]byte
	last            uint64
	batchMax        raftlog.BatchVersion
	groupID         string
	producerNumbers uint64
	damaged         uint64                         // damageAt
	seen            map[string]store.RequestResult // producer id/sequence -> first answer
	changed         chan struct{}
	listeners       []*func(election.Event)
	retry           fakeRetry // retry_fake_test.go
}

type fakeQueue struct {
	next uint64
	locs []store.Location
}

var (
	_ Writer      = (*fakeReplica)(nil)
	_ State       = (*fakeReplica)(nil)
	_ Leadership  = (*fakeReplica)(nil)
	_ Membership  = (*fakeReplica)(nil)
	_ Snapshotter = (*fakeReplica)(nil)
	_ Log         = (*fakeReplica)(nil)
)

func newFakeReplica(id string) *fakeReplica {
	return &fakeReplica{id: id, role: election.Leader, ready: true, leaderID: id,
		topics: map[string][]*fakeQueue{}, offsets: map[string]map[string]map[int32]uint64{},
		nodes: map[string]store.NodeInfo{}, entries: map[uint64][]byte{}, seen: map[string]store.RequestResult{},
		changed: make(chan struct{})}
}

// setRole changes the role and tells the broker, as raft's observer would.
func (f *fakeReplica) setRole(role election.Role, ready bool, leaderID string) {
	f.mu.Lock()
	f.role, f.ready, f.leaderID = role, ready, leaderID
	ls := slices.Clone(f.listeners)
	f.mu.Unlock()
	for _, fn := range ls {
		(*fn)(election.Event{Role: role, Term: 1, LeaderID: leaderID, Ready: ready})
	}
}

func (f *fakeReplica) fail(err error) {
	f.mu.Lock()
	f.failWrite = err
	f.mu.Unlock()
}

// appendLocked stores an entry and wakes long polls.
func (f *fakeReplica) appendLocked(data []byte) uint64 {
	f.last++
	f.entries[f.last] = data
	close(f.changed)
	f.changed = make(chan struct{})
	return f.last
}

func (f *fakeReplica) writeErrLocked() error {
	if f.failWrite != nil {
		return f.failWrite
	}
	if f.role != election.Leader {
		return store.ErrNotLeader
	}
	return nil
}

// Writer.

type fakeFuture struct {
	res   []store.RequestResult
	err   error
	bytes int
}

func (p fakeFuture) Wait() ([]store.RequestResult, error) { return p.res, p.err }
func (p fakeFuture) Bytes() int                           { return p.bytes }

func (f *fakeReplica) SetBatchVersion(v raftlog.BatchVersion) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batchMax = v
}

func (f *fakeReplica) BatchVersion() raftlog.BatchVersion {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(f.batchMax, raftlog.BatchV1)
}

func (f *fakeReplica) Produce(reqs []*raftlog.Request, sizeHint int, _ time.Duration) store.ProduceFuture {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return fakeFuture{err: err}
	}
	enc := raftlog.NewBatchBuilder(sizeHint, raftlog.SmallestVersion(f.batchMax, reqs))
	for _, r := range reqs {
		enc.Add(r)
	}
	data := enc.Finish()
	index := f.appendLocked(data)
	type qkey struct {
		topic string
		q     uint32
	}
	locs := map[qkey]*store.Location{}
	var order []qkey
	var skipped []uint32
	var ordinal uint32
	out := make([]store.RequestResult, len(reqs))
	for i, r := range reqs {
		first := ordinal
		ordinal += uint32(len(r.Messages))
		key := fmt.Sprintf("%s/%d", r.ProducerID, r.Seq)
		if prev, ok := f.seen[key]; ok && r.ProducerID != "" {
			prev.Duplicate = true
			out[i] = prev
			skipped = append(skipped, uint32(i))
			continue
		}
		qs := f.topics[r.Topic]
		if qs == nil {
			out[i].Err = fmt.Errorf("%w: %q", store.ErrUnknownTopic, r.Topic)
			skipped = append(skipped, uint32(i))
			continue
		}
		acks := make([]store.Ack, len(r.Messages))
		for j, m := range r.Messages {
			k := qkey{r.Topic, m.Queue}
			l := locs[k]
			if l == nil {
				l = &store.Location{Base: qs[m.Queue].next, LogIndex: index}
				locs[k] = l
				order = append(order, k)
			}
			acks[j] = store.Ack{Queue: m.Queue, Offset: qs[m.Queue].next, Index: index, Ordinal: first + uint32(j)}
			qs[m.Queue].next++
			l.Count++
		}
		out[i] = store.RequestResult{Acks: acks}
		if r.ProducerID != "" {
			f.seen[key] = out[i]
		}
	}
	for _, k := range order {
		l := locs[k]
		l.Skip = skipped
		q := f.topics[k.topic][k.q]
		q.locs = append(q.locs, *l)
	}
	return fakeFuture{res: out, bytes: len(data)}
}

func (f *fakeReplica) CreateTopic(_ context.Context, name string, queues int32, ifNotExists bool) (store.TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return store.TopicInfo{}, err
	}
	f.appendLocked(store.EncodeCreateTopic(name, queues, ifNotExists))
	if qs, ok := f.topics[name]; ok {
		if !ifNotExists || len(qs) != int(queues) {
			return store.TopicInfo{}, fmt.Errorf("create topic %q: %w: %q has %d queues", name, store.ErrTopicExists, name, len(qs))
		}
		return f.topicLocked(name), nil
	}
	qs := make([]*fakeQueue, queues)
	for i := range qs {
		qs[i] = &fakeQueue{}
	}
	f.topics[name] = qs
	return f.topicLocked(name), nil
}

func (f *fakeReplica) CommitOffsets(_ context.Context, group string, offsets []store.OffsetEntry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return err
	}
	f.appendLocked(store.EncodeCommitOffsets(group, offsets))
	g := f.offsets[group]
	if g == nil {
		g = map[string]map[int32]uint64{}
		f.offsets[group] = g
	}
	for _, o := range offsets {
		if g[o.Topic] == nil {
			g[o.Topic] = map[int32]uint64{}
		}
		g[o.Topic][o.Queue] = o.Offset
	}
	return nil
}

func (f *fakeReplica) RegisterNode(_ context.Context, n store.NodeInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writeErrLocked(); err != nil {
		return err
	}
	f.nodes[n.ID] = n
	return nil
}

func (f *fakeReplica) ForgetNode(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, id)
	return nil
}

func (f *fakeReplica) Retain(context.Context, uint64) error { return nil }

// State.

func (f *fakeReplica) Applied() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeReplica) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Damaged is the State's and the Log's: damage set by damageAt.
func (f *fakeReplica) Damaged() (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.damaged == 0 {
		return 0, nil
	}
	return f.damaged, errors.New("fake damage")
}

// damageAt makes the log report damage at index, as raft replacing
// entries this node applied does.
func (f *fakeReplica) damageAt(index uint64) {
	f.mu.Lock()
	f.damaged = index
	f.mu.Unlock()
}
func (f *fakeReplica) LogFloor() uint64 { return 0 }

func (f *fakeReplica) Locate(topic string, q int32, offset uint64, limit int) ([]store.Location, store.QueueRange, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	qs := f.topics[topic]
	if qs == nil {
		return nil, store.QueueRange{}, fmt.Errorf("%w: %q", store.ErrUnknownTopic, topic)
	}
	if q < 0 || int(q) >= len(qs) {
		return nil, store.QueueRange{}, fmt.Errorf("%w: queue %d", store.ErrInvalidQueue, q)
	}
	rng := store.QueueRange{Max: qs[q].next}
	var out []store.Location
	for _, l := range qs[q].locs {
		if l.Base+uint64(l.Count) > offset && len(out) < limit {
			out = append(out, l)
		}
	}
	return out, rng, nil
}

func (f *fakeReplica) topicLocked(name string) store.TopicInfo {
	qs := f.topics[name]
	ti := store.TopicInfo{Name: name, Queues: make([]store.QueueRange, len(qs))}
	for i, q := range qs {
		ti.Queues[i] = store.QueueRange{Max: q.next}
	}
	return ti
}

func (f *fakeReplica) Topic(name string) (store.TopicInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.topics[name] == nil {
		return store.TopicInfo{}, fmt.Errorf("%w: %q", store.ErrUnknownTopic, name)
	}
	return f.topicLocked(name), nil
}

func (f *fakeReplica) Topics() []store.TopicInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.TopicInfo
	for name := range f.topics {
		out = append(out, f.topicLocked(name))
	}
	return out
}

func (f *fakeReplica) QueueCount(topic string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.topics[topic])
}

func (f *fakeReplica) Offsets(group, topic string) map[int32]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int32]uint64{}
	for q, o := range f.offsets[group][topic] {
		out[q] = o
	}
	return out
}

func (f *fakeReplica) Groups() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for g := range f.offsets {
		out = append(out, g)
	}
	return out
}

func (f *fakeReplica) GroupTopics(group string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for t := range f.offsets[group] {
		out = append(out, t)
	}
	return out
}

func (f *fakeReplica) Node(id string) (store.NodeInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[id]
	return n, ok
}

// Leadership.

func (f *fakeReplica) Role() election.Role {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.role
}

func (f *fakeReplica) Ready() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.role == election.Leader && f.ready
}

func (f *fakeReplica) LeaderID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaderID
}

func (f *fakeReplica) Stats() election.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return election.Stats{Role: f.role, Term: 1, LeaderID: f.leaderID, CommitIndex: f.last, AppliedIndex: f.last, LastIndex: f.last}
}

func (f *fakeReplica) OnChange(fn func(election.Event)) (remove func()) {
	l := &fn
	f.mu.Lock()
	f.listeners = append(f.listeners, l)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.listeners = slices.DeleteFunc(f.listeners, func(x *func(election.Event)) bool { return x == l })
		f.mu.Unlock()
	}
}

func (f *fakeReplica) NeverCampaign() {}

func (f *fakeReplica) CampaignWhen(func() bool) {}

// Membership: a group of this node alone.

func (f *fakeReplica) Servers() ([]election.Server, error) {
	return []election.Server{{ID: f.id, Addr: "raft-" + f.id, Voter: true}}, nil
}

func (f *fakeReplica) Transfer(string) error { return election.ErrRefused }
func (f *fakeReplica) Reachable(context.Context, string, string) error {
	return errors.New("fake: no network")
}
func (f *fakeReplica) CheckJoiner(context.Context, string, string) error {
	return errors.New("fake: no network")
}
func (f *fakeReplica) AddNonvoter(string, string) error { return election.ErrRefused }
func (f *fakeReplica) Promote(string, string) error     { return election.ErrRefused }
func (f *fakeReplica) Remove(id string, _ bool) error {
	if id != f.id {
		return fmt.Errorf("%w: %q", election.ErrNoSuchServer, id)
	}
	return fmt.Errorf("%w: %s is the leader", election.ErrRefused, id)
}

// Snapshotter.

func (f *fakeReplica) Snapshot() (uint64, error) { return f.Applied(), nil }
func (f *fakeReplica) LastSnapshotIndex() uint64 { return 0 }

// Log: the entries Produce and the metadata calls appended.

func (f *fakeReplica) Read(index uint64) (raftlog.Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.entries[index]; ok {
		return raftlog.Entry{Data: d, At: time.Now().UnixMilli()}, nil
	}
	return raftlog.Entry{}, fmt.Errorf("entry %d: %w", index, raftlog.ErrBelowFloor)
}

func (f *fakeReplica) FirstIndex() uint64 { return 1 }
func (f *fakeReplica) LastIndex() uint64  { return f.Applied() }

func (f *fakeReplica) Segments() ([]raftlog.Segment, error) { return nil, nil }
func (f *fakeReplica) AppendedAt(uint64) (time.Time, error) { return time.Now(), nil }
func (f *fakeReplica) DeleteBelow(uint64) error             { return nil }
func (f *fakeReplica) NodeState(context.Context, string) (NodeState, error) {
	return NodeState{}, errors.New("fake: no network")
}
func (f *fakeReplica) Register(context.Context, string, store.NodeInfo) error {
	return errors.New("fake: no network")
}

// newFakeBroker starts a broker over a fake replica; the fake also serves as
// its log and its peer client.
func newFakeBroker(t *testing.T) (*Broker, *fakeReplica) {
	t.Helper()
	f := newFakeReplica("n1")
	cfg := DefaultConfig()
	cfg.NodeID = "n1"
	cfg.ClientAddr = "n1:9000"
	cfg.RetentionAge = 0
	b, err := New(cfg, Replica{Writer: f, State: f, Leadership: f, Membership: f, Snapshots: f}, f, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, f
}
