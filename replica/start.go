package replica

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Errors of this package. Callers never see raft's own errors.
var (
	// ErrNotLeader: this node is not the leader; nothing was appended.
	ErrNotLeader = errors.New("not the leader")
	// ErrUnknownOutcome: leadership was lost while the command was in
	// flight; it may or may not be committed. Retry with the same producer
	// id and sequence.
	ErrUnknownOutcome = errors.New("leadership lost while committing: outcome unknown")
	// ErrTimeout: the command was not accepted in time; nothing was appended.
	ErrTimeout = errors.New("timed out waiting for raft")
	// ErrShutdown: the node is shutting down.
	ErrShutdown = errors.New("node is shutting down")
	// ErrNoSuchServer names a server that is not in the configuration.
	ErrNoSuchServer = errors.New("no such server")
	// ErrRefused: a membership change that would hurt availability.
	ErrRefused = errors.New("refused")
)

// Peer is one voter of the initial configuration.
type Peer struct {
	ID   string
	Addr string
}

// ParsePeers parses "id@host:port,id@host:port".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "@")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want ID@HOST:PORT", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: address: %w", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %q appears twice", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

// CheckAddr checks that addr is a HOST:PORT another node can dial: the port
// a number in 1..65535, the host non-empty and resolvable (bounded by ctx
// and two seconds).
func CheckAddr(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want HOST:PORT: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q: no host; other nodes cannot dial it", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("address %q: port %q: want 1 to 65535", addr, port)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		return fmt.Errorf("address %q: host %q does not resolve: %w", addr, host, err)
	}
	return nil
}

// Config is the Raft side of a node.
type Config struct {
	ID            string
	BindAddr      string // raft TCP listen address
	AdvertiseAddr string // address the other nodes dial; defaults to BindAddr
	// Peers is the initial voter set. It is used only to bootstrap a node
	// with no state; it must contain this node.
	Peers []Peer
	// DialOverrides maps server ids to the address this node dials for them
	// instead of the configured one. Fault-injection tests put a proxy per
	// direction between nodes this way; production leaves it empty.
	DialOverrides map[string]string

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	MaxAppendEntries   int
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration

	Logger hclog.Logger
}

// DefaultConfig holds the timeouts measured to fail over in well under a
// second on loopback and in containers.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout: 250 * time.Millisecond,
		ElectionTimeout:  250 * time.Millisecond,
		// A lease as long as the heartbeat timeout: at half of it, leaders on
		// a loaded 2-core machine stepped down dozens of times a minute
		// (docs/BENCHMARKS.md). A dead leader is replaced just as fast.
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      5 * time.Millisecond,
		MaxAppendEntries:   128,
		SnapshotThreshold:  32768,
		SnapshotInterval:   30 * time.Second,
	}
}

// Validate names the field and value of the first problem.
func (c *Config) Validate() error {
	if c.ID == "" {
		return errors.New("id: empty; every node needs a unique id")
	}
	if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
		return fmt.Errorf("raft address %q: %w", c.BindAddr, err)
	}
	if c.HeartbeatTimeout < 5*time.Millisecond {
		return fmt.Errorf("heartbeat-timeout %s: must be at least 5ms", c.HeartbeatTimeout)
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return fmt.Errorf("election-timeout %s: must be at least heartbeat-timeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout <= 0 || c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return fmt.Errorf("leader lease %s: must be in (0, heartbeat-timeout %s]", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.CommitTimeout < time.Millisecond {
		return fmt.Errorf("commit-timeout %s: must be at least 1ms", c.CommitTimeout)
	}
	if c.MaxAppendEntries < 1 || c.MaxAppendEntries > 1024 {
		return fmt.Errorf("max-append-entries %d: must be 1..1024", c.MaxAppendEntries)
	}
	if len(c.Peers) > 0 {
		found := false
		for _, p := range c.Peers {
			if p.ID == c.ID {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("peers: this node %q is not in the list %v", c.ID, c.Peers)
		}
	}
	return nil
}

// Role is a node's Raft role.
type Role string

// Roles.
const (
	Leader    Role = "leader"
	Follower  Role = "follower"
	Candidate Role = "candidate"
	Shutdown  Role = "shutdown"
)

// Event is a role or leader change.
type Event struct {
	Role Role
	// Term is exact for Leader events. When a node becomes a candidate or
	// steps down, raft announces the new role before it stores the new
	// term, so Term may still be the previous one there.
	Term     uint64
	LeaderID string
	// Ready is true once a new leader's barrier has applied every earlier
	// entry; leader-only work may start then.
	Ready bool
}

// Node is a running Raft member.
type Node struct {
	cfg    Config
	raft   *raft.Raft
	trans  *raft.NetworkTransport
	log    hclog.Logger
	obsCh  chan raft.Observation
	obs    *raft.Observer
	stop   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool

	noCampaign    atomic.Bool   // NeverCampaign: vote requests of this node fail
	readyTerm     atomic.Uint64 // term whose barrier completed
	leaderChanges atomic.Uint64
	roleChanges   atomic.Uint64

	mu        sync.Mutex
	listeners []func(Event)
}

// Stores are raft's three stores; raftlog opens them.
type Stores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
}

// Start creates the transport and raft, bootstrapping the peers when the
// stores hold no state.
func Start(cfg Config, fsm raft.FSM, st Stores) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = cfg.BindAddr
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
	if err != nil {
		return nil, fmt.Errorf("raft advertise address %q: %w", cfg.AdvertiseAddr, err)
	}
	tc := &raft.NetworkTransportConfig{
		// No pipelining: with it, a follower's single failed append can stall
		// replication to that follower for good (hashicorp/raft#612; chaos
		// finding "repl-stall", TestRegressionPipelineStallsAfterFailedAppend).
		// raft's own docs say pipelining brings little with batching.
		MaxRPCsInFlight: 1,
		MaxPool:         3,
		Timeout:         5 * time.Second,
		Logger:          logger.Named("transport"),
	}
	if len(cfg.DialOverrides) > 0 {
		d := dialOverrides{cfg.ID: cfg.AdvertiseAddr} // no warning for looking up itself
		for id, a := range cfg.DialOverrides {
			d[id] = a
		}
		tc.ServerAddressProvider = d
	}
	trans, err := raft.NewTCPTransportWithConfig(cfg.BindAddr, adv, tc)
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.BindAddr, err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = logger.Named("raft")
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.MaxAppendEntries = cfg.MaxAppendEntries
	rc.BatchApplyCh = true
	rc.TrailingLogs = math.MaxUint64 // the log is the message store: raft never compacts it
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if err := raft.ValidateConfig(rc); err != nil {
		trans.Close()
		return nil, fmt.Errorf("raft config: %w", err)
	}
	hasState, err := raft.HasExistingState(st.Log, st.Stable, st.Snapshots)
	if err != nil {
		trans.Close()
		return nil, fmt.Errorf("check existing raft state: %w", err)
	}
	n := &Node{cfg: cfg, trans: trans, log: logger, stop: make(chan struct{}),
		obsCh: make(chan raft.Observation, 64)}
	r, err := raft.NewRaft(rc, fsm, st.Log, st.Stable, st.Snapshots, &gatedTransport{NetworkTransport: trans, noCampaign: &n.noCampaign})
	if err != nil {
		trans.Close()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	n.obs = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.RaftState, raft.LeaderObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(n.obs)
	n.goFunc(n.observe)

	if !hasState && len(cfg.Peers) > 0 {
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		f := r.BootstrapCluster(raft.Configuration{Servers: servers})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.Close()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		logger.Info("bootstrapped new group", "peers", len(servers))
	} else if hasState {
		logger.Info("rejoining with existing state", "last_index", r.LastIndex())
	}
	return n, nil
}

// gatedTransport is raft's transport, except that this node's own vote
// requests (pre-vote and vote) fail once NeverCampaign was called: the
// node never gets elected, yet it keeps answering other nodes' vote
// requests and appends, so it still counts for a quorum.
//
// raft v1.7.2 has no setting for this. A very long election timeout (via
// ReloadConfig) would stop campaigns too, but raft clears a follower's
// known leader only when that timeout expires, and a follower that knows a
// leader rejects every vote request: after the leader died the node would
// refuse to vote for anyone, and a 3-node group with one damaged node
// could not elect a new leader.
type gatedTransport struct {
	*raft.NetworkTransport
	noCampaign *atomic.Bool
}

var errNoCampaign = errors.New("this node does not campaign: its log or state machine is damaged")

func (t *gatedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t.noCampaign.Load() {
		return errNoCampaign
	}
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

func (t *gatedTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if t.noCampaign.Load() {
		return errNoCampaign
	}
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}

// NeverCampaign stops this node from ever being elected (until it
// restarts): its vote requests fail, so it stays a follower that votes for
// others and acknowledges appends. raft pre-votes first, so its failed
// campaigns do not raise the group's term. A leader calls it after handing
// leadership away (a leader sends no vote requests: it only takes effect
// once it steps down). A damaged node calls it.
func (n *Node) NeverCampaign() {
	if !n.noCampaign.Swap(true) {
		n.log.Warn("this node will not campaign for leadership again until it restarts")
	}
}

type dialOverrides map[string]string

func (d dialOverrides) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a, ok := d[string(id)]; ok {
		return raft.ServerAddress(a), nil
	}
	return "", fmt.Errorf("no dial override for %s", id) // the transport then dials the configured address
}

// ParseDialOverrides parses "id=host:port,id=host:port".
func ParseDialOverrides(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("dial override %q: want ID=HOST:PORT", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("dial override %q: %w", part, err)
		}
		out[id] = addr
	}
	return out, nil
}

func (n *Node) goFunc(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// OnChange registers fn to be called (on one goroutine, in order) at every
// role or leader change, and once more when a new leader becomes ready.
func (n *Node) OnChange(fn func(Event)) {
	n.mu.Lock()
	n.listeners = append(n.listeners, fn)
	n.mu.Unlock()
}

func (n *Node) emit(ev Event) {
	n.mu.Lock()
	ls := append([]func(Event){}, n.listeners...)
	n.mu.Unlock()
	for _, fn := range ls {
		fn(ev)
	}
}

func (n *Node) observe() {
	var lastLeader string
	var lastRole Role
	for {
		select {
		case <-n.stop:
			return
		case o := <-n.obsCh:
			switch d := o.Data.(type) {
			case raft.RaftState:
				role := roleOf(d)
				if role == lastRole {
					continue
				}
				lastRole = role
				n.roleChanges.Add(1)
				term := n.raft.CurrentTerm()
				if role == Leader {
					n.log.Info("role changed", "role", role, "term", term)
				} else {
					// The term may not be updated yet (see Event.Term);
					// "leader changed" reports it once it is.
					n.log.Info("role changed", "role", role)
				}
				n.emit(Event{Role: role, Term: term, LeaderID: n.LeaderID()})
				if role == Leader {
					n.goFunc(func() { n.barrier(term) })
				}
			case raft.LeaderObservation:
				id := string(d.LeaderID)
				if id == lastLeader {
					continue
				}
				lastLeader = id
				if id != "" {
					n.leaderChanges.Add(1)
				}
				n.log.Info("leader changed", "leader", id, "addr", d.LeaderAddr, "term", n.raft.CurrentTerm())
				n.emit(Event{Role: n.Role(), Term: n.raft.CurrentTerm(), LeaderID: id})
			}
		}
	}
}

// barrier makes sure every entry of earlier terms is applied before the new
// leader serves leader-only work (RocketMQ trap: a new master must rebuild
// its queue offsets first).
func (n *Node) barrier(term uint64) {
	for n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term && !n.closed.Load() {
		start := time.Now()
		if err := n.raft.Barrier(10 * time.Second).Error(); err != nil {
			n.log.Warn("barrier failed", "term", term, "error", err)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		n.readyTerm.Store(term)
		n.log.Info("leader ready", "term", term, "barrier", time.Since(start))
		n.emit(Event{Role: Leader, Term: term, LeaderID: n.cfg.ID, Ready: true})
		return
	}
}

func roleOf(s raft.RaftState) Role {
	switch s {
	case raft.Leader:
		return Leader
	case raft.Candidate:
		return Candidate
	case raft.Follower:
		return Follower
	default:
		return Shutdown
	}
}

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Role is this node's current role.
func (n *Node) Role() Role { return roleOf(n.raft.State()) }

// Ready is true on a leader whose barrier for the current term completed.
func (n *Node) Ready() bool {
	return n.raft.State() == raft.Leader && n.readyTerm.Load() == n.raft.CurrentTerm()
}

// LeaderID is the id of the current leader as this node knows it ("" if none).
func (n *Node) LeaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// Stats are this node's raft figures.
type Stats struct {
	Role          Role
	Term          uint64
	LeaderID      string
	CommitIndex   uint64
	AppliedIndex  uint64
	LastIndex     uint64
	LastContact   time.Time
	LeaderChanges uint64
	RoleChanges   uint64
}

// Stats returns current raft figures without blocking on raft's loops.
func (n *Node) Stats() Stats {
	return Stats{
		Role:          n.Role(),
		Term:          n.raft.CurrentTerm(),
		LeaderID:      n.LeaderID(),
		CommitIndex:   n.raft.CommitIndex(),
		AppliedIndex:  n.raft.AppliedIndex(),
		LastIndex:     n.raft.LastIndex(),
		LastContact:   n.raft.LastContact(),
		LeaderChanges: n.leaderChanges.Load(),
		RoleChanges:   n.roleChanges.Load(),
	}
}

// Snapshot takes a snapshot of the FSM now (unless nothing was applied since
// the last one) and returns the last log index a snapshot covers.
func (n *Node) Snapshot() (uint64, error) {
	if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	return n.LastSnapshotIndex(), nil
}

// LastSnapshotIndex is the last log index the newest snapshot covers (0:
// none yet).
func (n *Node) LastSnapshotIndex() uint64 {
	i, _ := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64)
	return i
}

// Apply replicates cmd and returns the FSM's answer once the entry is
// committed and applied on this node. ctx's deadline bounds the wait.
func (n *Node) Apply(ctx context.Context, cmd []byte) (interface{}, uint64, error) {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, 0, ErrTimeout
		}
	}
	return n.ApplyAsync(cmd, timeout).Wait()
}

// Pending is a command handed to raft whose outcome is not known yet.
type Pending struct{ f raft.ApplyFuture }

// ApplyAsync hands cmd to raft without waiting. raft keeps the order of
// commands, so pending commands complete in the order they were handed over.
func (n *Node) ApplyAsync(cmd []byte, timeout time.Duration) Pending {
	return Pending{n.raft.Apply(cmd, timeout)}
}

// Wait blocks until the command is committed and applied (or failed) and
// returns the FSM's answer and the entry's index.
func (p Pending) Wait() (interface{}, uint64, error) {
	if err := p.f.Error(); err != nil {
		return nil, 0, translate(err)
	}
	return p.f.Response(), p.f.Index(), nil
}

func translate(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		return ErrUnknownOutcome
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrTimeout
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	case errors.Is(err, raft.ErrNotVoter):
		return ErrNotLeader
	}
	return err
}

// Server is one member of the configuration.
type Server struct {
	ID    string
	Addr  string
	Voter bool
}

// Servers returns the current configuration, sorted by id.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, translate(err)
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Transfer hands leadership to the server with the given id, or to the most
// caught-up follower when id is empty. It returns once a new leader exists.
func (n *Node) Transfer(id string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		srv, err := n.server(id)
		if err != nil {
			return err
		}
		if !srv.Voter {
			return fmt.Errorf("%w: %s is not a voter", ErrRefused, id)
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(srv.Addr))
	}
	if err := f.Error(); err != nil {
		return fmt.Errorf("leadership transfer: %w", translate(err))
	}
	return nil
}

func (n *Node) server(id string) (Server, error) {
	servers, err := n.Servers()
	if err != nil {
		return Server{}, err
	}
	for _, s := range servers {
		if s.ID == id {
			return s, nil
		}
	}
	return Server{}, fmt.Errorf("%w: %q", ErrNoSuchServer, id)
}

// Reachable dials the raft address this node would use for server id at
// addr (a dial override first), as the transport does, and hangs up. It
// tells whether anything listens there, bounded by ctx and two seconds.
func (n *Node) Reachable(ctx context.Context, id, addr string) error {
	if a, ok := n.cfg.DialOverrides[id]; ok {
		addr = a
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// AddNonvoter adds a server that receives the log but does not vote.
func (n *Node) AddNonvoter(id, addr string) error {
	return translate(n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second).Error())
}

// Promote turns a (caught-up) non-voter into a voter.
func (n *Node) Promote(id, addr string) error {
	return translate(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second).Error())
}

// Remove removes a server. Unless force is set it refuses to remove the
// leader itself or to leave fewer voters than a quorum of the current ones
// needs to stay available.
func (n *Node) Remove(id string, force bool) error {
	servers, err := n.Servers()
	if err != nil {
		return err
	}
	var target *Server
	voters := 0
	for i, s := range servers {
		if s.Voter {
			voters++
		}
		if s.ID == id {
			target = &servers[i]
		}
	}
	if target == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchServer, id)
	}
	if !force {
		if id == n.cfg.ID {
			return fmt.Errorf("%w: %s is the leader; run `raftmq leader transfer` first or pass --force", ErrRefused, id)
		}
		if target.Voter && voters-1 < 3 {
			return fmt.Errorf("%w: removing %s leaves %d voter(s), which cannot survive any failure; pass --force to do it anyway", ErrRefused, id, voters-1)
		}
	}
	return translate(n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second).Error())
}

// Close shuts raft down. A leader first hands leadership to the most
// caught-up follower so clients see a pause of milliseconds, not an
// election. Close is idempotent.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	if n.raft.State() == raft.Leader {
		start := time.Now()
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer before shutdown failed", "error", err)
		} else {
			n.log.Info("handed over leadership before shutdown", "took", time.Since(start), "leader", n.LeaderID())
		}
	}
	return n.shutdown()
}

// Kill shuts raft down without handing over leadership (tests only: it
// simulates a crash as closely as a process can).
func (n *Node) Kill() error {
	if n.closed.Swap(true) {
		return nil
	}
	return n.shutdown()
}

func (n *Node) shutdown() error {
	err := n.raft.Shutdown().Error()
	n.raft.DeregisterObserver(n.obs)
	close(n.stop)
	n.wg.Wait()
	n.trans.Close()
	return err
}
