package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/broker/batch"
	"github.com/raftmq/raftmq/broker/delay"
	"github.com/raftmq/raftmq/broker/groups"
	"github.com/raftmq/raftmq/broker/load"
	"github.com/raftmq/raftmq/broker/lookup"
	"github.com/raftmq/raftmq/broker/retention"
	"github.com/raftmq/raftmq/broker/retry"
	"github.com/raftmq/raftmq/broker/route"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Config of a broker node.
type Config struct {
	NodeID     string
	Group      string // name of the broker group, shown in status
	ClientAddr string // API address told to clients of the (internal) listener
	PeerAddr   string // API address other nodes use; defaults to ClientAddr
	HTTPAddr   string
	// ExternalAddr is the API address told to clients that connected
	// through the external listener (a port published outside the nodes'
	// network); empty: the node has no external listener.
	ExternalAddr string

	AutoCreateTopics bool
	DefaultQueues    int
	MaxMessageBytes  int // largest message body
	// MaxRequestBytes bounds one produce request as the log encodes it:
	// bodies, keys, tags, properties and every length and count. A request
	// is never split, so it must fit in one Raft entry (Validate checks).
	MaxRequestBytes int
	MaxBatchBytes   int // group commit closes an entry at this size
	MaxInflight     int // entries handed to raft and not yet applied
	// MaxPendingBytes bounds the produce requests this node holds (queued
	// or in raft); requests beyond it are refused with ErrBusy and the SDK
	// retries them, so a flood of producers waits on its side. Under a
	// flood the node holds less: what it answers in pendingTarget.
	MaxPendingBytes int
	WriteTimeout    time.Duration

	// Read routing.
	ColdReadBytes  uint64  // a consumer further behind than this reads from a follower
	LoadThreshold  float64 // load at or above this makes the leader "loaded"
	MaxFollowerLag uint64  // entries; a follower further behind sends consumers to the leader
	StatePeriod    time.Duration
	// CPUBudget is the CPU (cores) the load signal counts as this node's;
	// 0 computes it from GOMAXPROCS, the cgroup quota and the group's nodes
	// on this host (package load).
	CPUBudget float64

	// Consumer groups.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// LockLease is how long an orderly consumer's queue lock lasts
	// unrenewed (0: DefaultLockLease; locks.go).
	LockLease time.Duration

	// PreferredLeader, when set, makes the leader hand leadership to that
	// node once it is healthy and caught up.
	PreferredLeader string

	// Retention (0: off): messages older than RetentionAge, or beyond
	// RetentionBytes of log, are deleted by whole log segments; the leader
	// checks every RetentionCheck, and every node deletes its log after a
	// cut within that period.
	RetentionAge   time.Duration
	RetentionBytes int64
	RetentionCheck time.Duration
	// RetentionGrace: a cut waits for a follower that answered within this
	// long (it is restarting, or briefly cut off) to apply the entries below
	// it, so that it keeps its log instead of installing a snapshot.
	RetentionGrace time.Duration

	// GroupIDFile is where this node records its group's id once it has
	// applied it, so that it knows the id as soon as it restarts ("" keeps
	// no record; see GroupID).
	GroupIDFile string

	// KeyIndexDir holds this node's key index (package lookup; "" keeps none);
	// KeyIndexSlots and KeyIndexEntries shape its files (0: defaults).
	KeyIndexDir     string
	KeyIndexSlots   uint32
	KeyIndexEntries uint32

	// MaxDelay bounds how far ahead a delivery time may be (0:
	// api.DefaultMaxDelay).
	MaxDelay time.Duration

	Logger hclog.Logger
}

// pendingTarget bounds the produce requests a leader holds by time: at most
// what it answered in this long while requests queued (and as many may wait
// for room), so that an admitted request is answered within about twice
// this, well before the SDK's attempt timeout (2 s) or a RocketMQ client's
// send timeout (3 s), and a flood is refused busy at the door instead of
// timing out in the queue and being written twice.
const pendingTarget = 500 * time.Millisecond

// DefaultLoadThreshold makes a leader "loaded" (it sends readers to
// followers). Chosen from measurements of three co-located nodes, idle and
// under two producers (broker/DESIGN.md, "Load signal").
const DefaultLoadThreshold = 0.4

// DefaultConfig returns working defaults.
func DefaultConfig() Config {
	return Config{
		Group:             "raftmq",
		AutoCreateTopics:  true,
		DefaultQueues:     store.DefaultQueues,
		MaxMessageBytes:   4 << 20,
		MaxRequestBytes:   DefaultMaxRequestBytes,
		MaxBatchBytes:     256 << 10,
		MaxInflight:       32,
		MaxPendingBytes:   64 << 20,
		WriteTimeout:      10 * time.Second,
		ColdReadBytes:     defaultColdReadBytes(),
		LoadThreshold:     DefaultLoadThreshold,
		MaxFollowerLag:    10000,
		StatePeriod:       200 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: time.Second,
		RetentionAge:      72 * time.Hour, // RocketMQ's fileReservedTime
		RetentionCheck:    10 * time.Second,
		RetentionGrace:    2 * time.Minute,
	}
}

// Validate names the first bad field.
func (c *Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("node id: empty")
	case c.ClientAddr == "":
		return errors.New("client address: empty")
	case c.DefaultQueues < 1 || c.DefaultQueues > store.MaxQueues:
		return fmt.Errorf("default-queues %d: want 1..%d", c.DefaultQueues, store.MaxQueues)
	case c.MaxRequestBytes < 1024 || c.MaxRequestBytes > MaxRequestLimit:
		return fmt.Errorf("max-request-bytes %d: want 1024..%d (one request is one Raft entry, and the log store reads back entries of at most %d bytes)",
			c.MaxRequestBytes, MaxRequestLimit, raftlog.MaxEntryBytes)
	case c.MaxMessageBytes < 1 || c.MaxMessageBytes > c.MaxRequestBytes:
		return fmt.Errorf("max-message-bytes %d: want 1..%d (max-request-bytes)", c.MaxMessageBytes, c.MaxRequestBytes)
	case c.MaxBatchBytes < 1024 || c.MaxBatchBytes > MaxRequestLimit:
		return fmt.Errorf("max-batch-bytes %d: want 1024..%d (the log store reads back entries of at most %d bytes)",
			c.MaxBatchBytes, MaxRequestLimit, raftlog.MaxEntryBytes)
	case c.MaxInflight < 1:
		return fmt.Errorf("max-inflight %d: want at least 1", c.MaxInflight)
	case c.MaxPendingBytes < 1<<20:
		return fmt.Errorf("max-pending-mb: %d bytes, want at least 1 MiB", c.MaxPendingBytes)
	case c.LoadThreshold <= 0:
		return fmt.Errorf("load-threshold %v: want > 0", c.LoadThreshold)
	case c.CPUBudget < 0:
		return fmt.Errorf("cpu-budget %v: want >= 0 cores (0: computed)", c.CPUBudget)
	case c.StatePeriod <= 0:
		return fmt.Errorf("state period %s: want > 0", c.StatePeriod)
	case c.RetentionAge < 0 || c.RetentionBytes < 0:
		return fmt.Errorf("retention: %s and %d bytes: want >= 0 (0: off)", c.RetentionAge, c.RetentionBytes)
	case (c.RetentionAge > 0 || c.RetentionBytes > 0) && c.RetentionCheck <= 0:
		return fmt.Errorf("retention check period %s: want > 0", c.RetentionCheck)
	case c.MaxDelay < 0 || c.MaxDelay > MaxMaxDelay:
		return fmt.Errorf("max-delay %s: want 0 (the default, %s) up to %s", c.MaxDelay, mq.DefaultMaxDelay, MaxMaxDelay)
	case c.SessionTimeout <= c.HeartbeatInterval:
		return fmt.Errorf("session timeout %s: must exceed the heartbeat interval %s", c.SessionTimeout, c.HeartbeatInterval)
	}
	return nil
}

// Log is how the broker reads message bodies back out of the Raft log and
// deletes its head (retention). *raftlog.Stores implements it.
type Log interface {
	Read(index uint64) (raftlog.Entry, error)
	// ReadUncached is Read without the read cache (the key index).
	ReadUncached(index uint64) (raftlog.Entry, error)
	FirstIndex() uint64
	LastIndex() uint64
	Segments() ([]raftlog.Segment, error)
	AppendedAt(index uint64) (time.Time, error)
	DeleteBelow(index uint64) error
	// Damaged is the lowest index of a damaged entry found while reading
	// the log (0: none).
	Damaged() (uint64, error)
}

// PeerClient is how a node talks to the other nodes. The wire layer
// implements it.
type PeerClient interface {
	NodeState(ctx context.Context, addr string) (NodeState, error)
	Register(ctx context.Context, addr string, n store.NodeInfo) error
}

// Broker is one node's service.
type Broker struct {
	cfg   Config
	log   hclog.Logger
	w     Writer // replicated writes
	fsm   State  // what this node's state machine has applied
	node  node   // roles, members and snapshots
	rlog  Log
	peers PeerClient
	m     *metrics
	// served counts the messages served to consumers since start, by this
	// node's role (NodeState carries them to the others).
	served struct{ leader, follower atomic.Uint64 }

	batch    *batch.Batcher // group commit
	pending  batch.Budget   // bytes of produce requests held
	progress progress       // raft indexes over time, for Readiness
	rr       atomic.Uint64  // round-robin queue choice

	view *route.View
	pace *pace // the state loop's pace (pace.go)
	// batchUnheard: at the state loop's last round some member of the
	// group had not said which batch versions it reads (batchversion.go).
	batchUnheard atomic.Bool
	created      time.Time
	retention    *retention.Manager
	damage       atomic.Pointer[Damage] // set once: see damage.go
	caughtUp     atomic.Bool            // set once: see CaughtUp
	handingOver  atomic.Bool
	naming       atomic.Bool            // nameGroup runs
	knownGroup   atomic.Pointer[string] // the group id in cfg.GroupIDFile
	groups       *groups.Table
	load         *load.Meter
	keys         *lookup.Keys // nil without KeyIndexDir
	ids          *lookup.Reader
	sched        ScheduleState // nil: delayed messages are refused
	txn          TxnStore      // nil: transactional messages are refused
	scheduler    scheduler
	lacking      lackingHandOver // handOverFor
	delay        *delay.Scheduler
	retry        *retry.Policy

	// ctx ends when Close begins; every call's wait and every call to a
	// peer derives from it (callCtx), so none outlasts Close.
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{} // closed with ctx, for loops that select on it
	// mu orders goFunc against Close: once closed is set under it, no
	// goroutine starts, so Close's wait covers every one.
	mu       sync.Mutex
	wg       sync.WaitGroup
	closed   atomic.Bool
	unlisten func()       // removes onRoleChange from the replica's listeners
	leader   *leaderWatch // the leader this node knows, fed by onRoleChange
	users    usersOf      // the user table it manages (users.go)
}

// New starts a broker over a running replica and its log.
func New(cfg Config, rep Replica, rlog Log, peers PeerClient) (*Broker, error) {
	if cfg.PeerAddr == "" {
		cfg.PeerAddr = cfg.ClientAddr
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := rep.check(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	b := &Broker{
		cfg:   cfg,
		log:   cfg.Logger,
		w:     rep.Writer,
		fsm:   rep.State,
		node:  node{rep.Leadership, rep.Membership, rep.Snapshots},
		rlog:  rlog,
		peers: peers,
		stop:  make(chan struct{}),
		sched: rep.Schedule,
	}
	b.txn, _ = rep.Writer.(TxnStore)
	b.pending.Max = cfg.MaxPendingBytes
	b.pending.Target = pendingTarget
	b.pending.Floor = min(cfg.MaxPendingBytes, cfg.MaxBatchBytes*cfg.MaxInflight)
	b.ctx, b.cancel = context.WithCancel(context.Background())
	brokersInProcess.Add(1)
	b.batch = batch.New(b.w, batch.Config{MaxBatchBytes: cfg.MaxBatchBytes, MaxInflight: cfg.MaxInflight, QueueLen: 4096, WriteTimeout: cfg.WriteTimeout},
		batch.Hooks{
			Batched: func(requests, bytes int) {
				b.m.batchRequests.Observe(float64(requests))
				b.m.batchBytes.Observe(float64(bytes))
			},
			ReplicaErr: b.replicaErr,
		})
	b.view = route.NewView()
	b.pace = newPace()
	b.batchUnheard.Store(true) // until the state loop has asked the members
	b.created = time.Now()
	b.ids = lookup.NewReader(cfg.NodeID, b.fsm, b.rlog)
	b.load = load.New(cfg.CPUBudget, b.produceQueueFill, func() int { return int(brokersInProcess.Load()) })
	b.groups = groups.New(b.fsm, b.log, cfg.SessionTimeout)
	b.m = newMetrics(b)
	b.retention = b.newRetention()
	b.retry = retry.New(b.fsm)
	b.delay = b.newScheduler()
	b.leader = newLeaderWatch(b.node.LeaderID()) // before the events, which then win
	b.loadGroupID()
	b.unlisten = b.node.OnChange(b.onRoleChange)
	b.goFunc(b.batchLoop)
	b.goFunc(b.completeLoop)
	b.goFunc(b.stateLoop)
	b.goFunc(b.retentionLoop)
	if err := b.openKeyIndex(); err != nil {
		b.Close()
		return nil, fmt.Errorf("key index: %w", err)
	}
	return b, nil
}

// goFunc runs f on a goroutine Close waits for. After Close has begun it
// starts nothing and reports false.
func (b *Broker) goFunc(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// callCtx is ctx that also ends when Close begins: what a call waits on.
func (b *Broker) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(b.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// ID is this node's id.
func (b *Broker) ID() string { return b.cfg.NodeID }

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

// Close stops the broker's loops; callers close raft and the stores after.
// It ends every call's wait at once: pending produce requests fail with
// ErrShutdown (or, once handed to raft, ErrUnknownOutcome), long polls and
// leader waits with ErrShutdown, calls to peers are cancelled. It stops
// listening to role changes, starts no goroutine from then on and waits
// for those it started. Close is idempotent.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed.Load() {
		b.mu.Unlock()
		return nil
	}
	b.closed.Store(true)
	b.cancel()
	close(b.stop)
	b.mu.Unlock()
	if b.unlisten != nil {
		b.unlisten()
	}
	b.wg.Wait()
	brokersInProcess.Add(-1)
	return nil
}

func (b *Broker) onRoleChange(ev election.Event) {
	b.leader.set(ev.LeaderID)
	b.m.roleChanges.WithLabelValues(string(ev.Role)).Inc()
	if ev.Role == election.Leader {
		b.handOverIfLeader() // a damaged node that was handed leadership anyway
	}
	b.scheduleOnRoleChange(ev)
	if ev.Role == election.Leader && ev.Ready && b.damage.Load() == nil {
		b.groups.Reset(ev.Term)
		b.goFunc(func() { b.registerSelf() })
		b.goFunc(b.nameGroup)
	}
}

// info is this node's registry entry.
func (b *Broker) info() store.NodeInfo {
	return store.NodeInfo{ID: b.cfg.NodeID, ClientAddr: b.cfg.ClientAddr, PeerAddr: b.cfg.PeerAddr, HTTPAddr: b.cfg.HTTPAddr,
		ExternalAddr: b.cfg.ExternalAddr}
}

// registerSelf records this (leader) node's addresses in the replicated
// registry when they are missing or changed.
func (b *Broker) registerSelf() {
	if cur, ok := b.fsm.Node(b.cfg.NodeID); ok && cur == b.info() {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if err := b.register(ctx, b.info()); err != nil {
		b.log.Warn("register self", "error", err)
	}
}

// Register records a node's addresses (leader only).
func (b *Broker) Register(ctx context.Context, n store.NodeInfo) error {
	if n.ID == "" || n.ClientAddr == "" {
		return invalid("register: id and client address are required")
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	if cur, ok := b.fsm.Node(n.ID); ok && cur == n {
		return nil
	}
	return b.register(ctx, n)
}

func (b *Broker) register(ctx context.Context, n store.NodeInfo) error {
	if err := b.w.RegisterNode(ctx, n); err != nil {
		return b.replicaErr(err)
	}
	b.log.Info("registered node", "id", n.ID, "client", n.ClientAddr, "peer", n.PeerAddr, "external", n.ExternalAddr)
	return nil
}

// leaderCheck returns nil on a ready leader, else a NotLeaderError or
// ErrUnavailable.
func (b *Broker) leaderCheck() error {
	if b.closed.Load() {
		return ErrShutdown
	}
	if b.damage.Load() != nil && b.node.Role() == election.Leader {
		// Elected only to hand leadership over (handOverIfLeader): the
		// calls wait for the next leader.
		return fmt.Errorf("%w: this node is damaged and hands leadership over", ErrUnavailable)
	}
	if b.node.Ready() {
		return nil
	}
	if b.node.Role() == election.Leader {
		return fmt.Errorf("%w: new leader is still applying earlier entries", ErrUnavailable)
	}
	return b.notLeader()
}

func (b *Broker) notLeader() error {
	id := b.node.LeaderID()
	e := &NotLeaderError{LeaderID: id}
	if id != "" {
		if n, ok := b.fsm.Node(id); ok {
			e.PeerAddr, e.ClientAddr = n.PeerAddr, n.ClientAddr
		}
	}
	return e
}
