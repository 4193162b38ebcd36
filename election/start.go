package election

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/tlsconf"
)

// Node is a running Raft member.
type Node struct {
	cfg    Config
	fsm    StateMachine // closed once raft has stopped
	raft   *raft.Raft
	trans  *gatedTransport // closed on shutdown, also when cfg.Transport gave it
	log    hclog.Logger
	obsCh  chan raft.Observation
	obs    *raft.Observer
	stop   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool

	noCampaign    atomic.Bool   // NeverCampaign: vote requests of this node fail
	recovering    atomic.Bool   // after an unclean start: neither campaign nor vote (recover.go)
	readyTerm     atomic.Uint64 // term whose barrier completed
	leaderChanges atomic.Uint64
	roleChanges   atomic.Uint64

	mu        sync.Mutex
	listeners []*listener
}

// RaftStores are raft's three stores; raftlog opens them.
type RaftStores struct {
	Log       raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	// Unclean says the previous process ended without closing the log
	// (raftlog.Stores.Unclean): the node recovers before it votes
	// (recover.go) and then calls Recovered, when set.
	Unclean   bool
	Recovered func()
}

// StateMachine is what the node applies committed entries to. The node
// hands it to raft and never reads its answers: the package that owns the
// state machine is the one that types them.
type StateMachine interface {
	raft.FSM
	// Close releases what the state machine holds open. The node calls it
	// once raft has stopped, and when Start fails.
	Close() error
}

// Start creates the transport (unless cfg.Transport brings one) and raft
// over fsm. When the stores hold no state it bootstraps cfg.Peers, or a
// group of this node alone without them, or with cfg.Join waits to be
// added. The node
// owns fsm from then on: it closes it when it shuts down, or when Start
// fails.
func Start(cfg Config, fsm StateMachine, st RaftStores) (_ *Node, err error) {
	closeFSM := true // until raft runs; then shutdown closes it
	defer func() {
		if err != nil && closeFSM {
			fsm.Close()
		}
	}()
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
	trans := cfg.Transport
	if trans == nil {
		tcp, err := newTCPTransport(cfg, logger)
		if err != nil {
			return nil, err
		}
		trans = tcp
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
		closeTransport(trans)
		return nil, fmt.Errorf("raft config: %w", err)
	}
	hasState, err := raft.HasExistingState(st.Log, st.Stable, st.Snapshots)
	if err != nil {
		closeTransport(trans)
		return nil, fmt.Errorf("check existing raft state: %w", err)
	}
	if cfg.NewGroup {
		if !hasState {
			closeTransport(trans)
			return nil, ErrNothingToRecover
		}
		rec, err := rewriteAsNewGroup(st, cfg.ID, cfg.AdvertiseAddr, cfg.NewGroupDone)
		if err != nil {
			closeTransport(trans)
			return nil, fmt.Errorf("recover as a new group: %w", err)
		}
		if rec.Index == 0 {
			logger.Warn("recover as a new group: this node already is the only voter; nothing changed", "id", cfg.ID, "raft_address", cfg.AdvertiseAddr)
		} else {
			logger.Warn("RECOVERED AS A NEW GROUP: this node is now the only voter of its group; the old members no longer count for elections or commits",
				"id", cfg.ID, "raft_address", cfg.AdvertiseAddr, "config_index", rec.Index, "config_term", rec.Term,
				"previous_members", describeServers(rec.Previous))
		}
	}
	n := &Node{cfg: cfg, log: logger, stop: make(chan struct{}),
		obsCh: make(chan raft.Observation, 64), fsm: fsm}
	gt := newGatedTransport(trans, &n.noCampaign, &n.recovering, cfg.HeartbeatTimeout)
	gt.commitBound = cfg.CommitBound
	n.trans = gt
	n.recovering.Store(st.Unclean)
	r, err := raft.NewRaft(rc, fsm, st.Log, recoveringStable{StableStore: st.Stable, recovering: &n.recovering}, st.Snapshots, gt.raftTransport())
	if err != nil {
		close(n.stop)
		n.wg.Wait()
		closeTransport(trans)
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	gt.quiet.raft.Store(r)
	closeFSM = false
	n.obs = raft.NewObserver(n.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.RaftState, raft.LeaderObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(n.obs)
	n.goFunc(n.observe)

	peers := cfg.Peers
	if len(peers) == 0 && !cfg.Join {
		peers = []Peer{{ID: cfg.ID, Addr: cfg.AdvertiseAddr}}
	}
	switch {
	case hasState:
		if cfg.Join {
			logger.Info("--join ignored: this node has data and restarts as the member it is")
		}
		logger.Info("rejoining with existing state", "last_index", r.LastIndex())
	case cfg.Join:
		n.goFunc(func() { n.awaitAdded(cfg) })
	default:
		var servers []raft.Server
		for _, p := range peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		f := r.BootstrapCluster(raft.Configuration{Servers: servers})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.Close()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		logger.Info("bootstrapped new group", "peers", len(servers))
		if len(servers) == 1 {
			logger.Info("a group of one node, this one: to grow it, start each new node with --join and run `raftmq member add ID@RAFTADDR` for it against this node")
		}
	}
	if n.recovering.Load() {
		if voters(r) <= 1 { // nobody else could hold what it lost
			n.recovering.Store(false)
			if st.Recovered != nil {
				st.Recovered()
			}
		} else {
			timeout := cfg.RecoveryTimeout
			if timeout <= 0 {
				timeout = DefaultRecoveryTimeout
			}
			logger.Warn("started after an unclean shutdown: not voting or campaigning until caught up with a leader",
				"at_most_without_a_leader", timeout)
			n.goFunc(func() { n.awaitCatchUp(timeout, st.Recovered) })
		}
	}
	return n, nil
}

// newTCPTransport is raft's TCP transport on cfg.BindAddr.
func newTCPTransport(cfg Config, logger hclog.Logger) (*raft.NetworkTransport, error) {
	adv, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
	if err != nil {
		return nil, fmt.Errorf("raft advertise address %q: %w", cfg.AdvertiseAddr, err)
	}
	tc := &raft.NetworkTransportConfig{
		// No pipelining: with it, a follower's single failed append can stall
		// replication to that follower for good (hashicorp/raft#612;
		// TestRegressionPipelineStallsAfterFailedAppend in integration/chaos).
		// raft's own docs say pipelining brings little with batching.
		// gatedTransport refuses pipelines on any transport for the same reason.
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
	if cfg.TLS.On() {
		if adv.IP == nil || adv.IP.IsUnspecified() { // what raft's TCP transport refuses too
			return nil, fmt.Errorf("raft advertise address %q: not one other nodes can dial (set --raft-advertise)", cfg.AdvertiseAddr)
		}
		l, err := net.Listen("tcp", cfg.BindAddr)
		if err != nil {
			return nil, fmt.Errorf("raft transport on %s: %w", cfg.BindAddr, err)
		}
		tc.Stream = &tlsStream{Listener: cfg.TLS.Listen(l, true), tls: cfg.TLS, adv: adv}
		return raft.NewNetworkTransportWithConfig(tc), nil
	}
	trans, err := raft.NewTCPTransportWithConfig(cfg.BindAddr, adv, tc)
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.BindAddr, err)
	}
	return trans, nil
}

// tlsStream is raft's stream layer over TLS: it accepts through the
// node's TLS listener (a certificate the cluster CA signed is required;
// plaintext only in permissive mode) and dials with the node's
// certificate, so a node the cluster CA did not certify can neither send
// raft RPCs (votes, appends) nor receive them.
type tlsStream struct {
	net.Listener
	tls *tlsconf.Node
	adv net.Addr
}

var _ raft.StreamLayer = (*tlsStream)(nil)

func (s *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.tls.Dial(ctx, "tcp", string(addr))
}

// Addr is the address advertised to the other nodes.
func (s *tlsStream) Addr() net.Addr { return s.adv }

// closeTransport closes t if it can be closed (raft.WithClose).
func closeTransport(t raft.Transport) {
	if c, ok := t.(raft.WithClose); ok {
		c.Close()
	}
}

// voters counts the voters of the latest configuration.
func voters(r *raft.Raft) int {
	f := r.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
}

// gatedTransport wraps the node's transport so that this node's own vote
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
//
// It also fails the node's own vote requests while it recovers from an
// unclean start (recover.go).
//
// It refuses pipelined appends on every transport (see newTCPTransport) and
// passes Close through (raft.WithClose: raft closes the transport when it
// shuts down). raft type-asserts only that and raft.WithPreVote on its
// transport; gatedPreVote adds RequestPreVote when the wrapped transport has
// it, so raft pre-votes exactly when it would without the wrapper.
type gatedTransport struct {
	raft.Transport
	noCampaign *atomic.Bool
	recovering *atomic.Bool
	// campaignAnyway, when set, lets a node that does not campaign
	// (noCampaign) do so while it reports true (Node.CampaignWhen).
	campaignAnyway atomic.Pointer[func() bool]
	patience       *patience // appends to a node that is down wait for it (patience.go)
	quiet          *quiet    // appends that repeat what a follower has wait while idle (quiet.go)
	// commitBound bounds the commit index of appends (Config.CommitBound); nil: none.
	commitBound func() uint64
}

// gatedPreVote is a gatedTransport over a transport that pre-votes.
type gatedPreVote struct {
	*gatedTransport
	pre raft.WithPreVote
}

var (
	_ raft.WithClose   = (*gatedTransport)(nil)
	_ raft.WithPreVote = gatedPreVote{}
)

func newGatedTransport(t raft.Transport, noCampaign, recovering *atomic.Bool, heartbeatTimeout time.Duration) *gatedTransport {
	p := newPatience()
	return &gatedTransport{Transport: t, noCampaign: noCampaign, recovering: recovering, patience: p, quiet: newQuiet(p.stop, heartbeatTimeout)}
}

// raftTransport is what raft is given: t, with RequestPreVote when the
// wrapped transport has it.
func (t *gatedTransport) raftTransport() raft.Transport {
	if pre, ok := t.Transport.(raft.WithPreVote); ok {
		return gatedPreVote{gatedTransport: t, pre: pre}
	}
	return t
}

// AppendEntriesPipeline makes raft send appends one at a time.
func (t *gatedTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// Close closes the wrapped transport when it can be closed.
func (t *gatedTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

func (t *gatedTransport) campaigns() bool {
	if t.recovering.Load() {
		return false
	}
	if !t.noCampaign.Load() {
		return true
	}
	anyway := t.campaignAnyway.Load()
	return anyway != nil && (*anyway)()
}

func (t *gatedTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if !t.campaigns() {
		return errNoCampaign
	}
	return t.Transport.RequestVote(id, target, args, resp)
}

func (t gatedPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if !t.campaigns() {
		return errNoCampaign
	}
	return t.pre.RequestPreVote(id, target, args, resp)
}

// NeverCampaign stops this node from ever being elected (until it
// restarts, or while CampaignWhen's function reports true): its vote
// requests fail, so it stays a follower that votes for
// others and acknowledges appends. raft pre-votes first, so its failed
// campaigns do not raise the group's term. A leader calls it after handing
// leadership away (a leader sends no vote requests: it only takes effect
// once it steps down). A damaged node calls it.
func (n *Node) NeverCampaign() {
	if !n.noCampaign.Swap(true) {
		n.log.Warn("this node will not campaign for leadership again until it restarts")
	}
}

// CampaignWhen lets a node that NeverCampaign was called for campaign while
// ok reports true. A damaged node whose log holds entries the healthy
// voters lack refuses them its vote (raft's rule): once the leader is gone
// no one else can be elected, and it must lead, only to hand leadership
// over at once. Its entries are checked as they are read for replication,
// so a damaged one is never sent.
func (n *Node) CampaignWhen(ok func() bool) {
	n.trans.campaignAnyway.Store(&ok)
}

func (n *Node) goFunc(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// awaitAddedEvery is how often a node that waits to be added says so.
const awaitAddedEvery = 30 * time.Second

// awaitAdded says, at start and then every awaitAddedEvery until a leader
// has added it, why a node started with --join and without data does
// nothing yet, and the two ways on.
func (n *Node) awaitAdded(cfg Config) {
	tick := time.NewTicker(awaitAddedEvery)
	defer tick.Stop()
	for {
		if n.LeaderID() != "" {
			return
		}
		n.log.Warn("--join and no data: waiting to be added to a group; run `raftmq member add " + cfg.ID + "@" + cfg.AdvertiseAddr +
			"` against the group, or start this node without --join to begin a new group of its own")
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
	}
}
