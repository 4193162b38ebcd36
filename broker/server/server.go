// Package server assembles one raftmq node from its parts: the raftlog
// stores, the state machine (store) and the raft node applying it
// (election), the broker service, its gRPC API and the HTTP endpoints (/metrics, /healthz, /readyz, and the
// web console at /: broker/console). The CLI's
// `raftmq server` and the in-process test clusters both start nodes here.
//
// It owns start-up order and shutdown order and nothing else.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/broker/console"
	"github.com/raftmq/raftmq/broker/grpcapi"
	brokerremoting "github.com/raftmq/raftmq/broker/remoting"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Config is everything a node needs.
type Config struct {
	DataDir  string
	LogStore string // raftlog.KindWAL or raftlog.KindBolt
	Listen   string // client API bind address (the internal listener)
	// ListenExternal, when set, is the bind address of a second client API
	// listener, the external one: clients connected through it are told
	// Broker.ExternalAddr (default: this address) for every node, those
	// of Listen Broker.ClientAddr.
	ListenExternal string
	HTTP           string // "" disables
	Raft           election.Config
	Broker         broker.Config
	Logger         hclog.Logger
	SegmentMB      int
	// VerifyLog is how the node checks its log's checksums (docs/logstore.md
	// "Checking the log at start"): VerifyBackground (the default) checks
	// before start only what start-up replays or what could be torn, and
	// the rest after start, paced at VerifyLogMBps; VerifySync checks the
	// whole log before start; VerifyOff checks neither. Every mode refuses
	// to start on a damaged entry it checks before start, and every read
	// checks the entry it reads.
	VerifyLog VerifyMode
	// VerifyLogMBps paces the background check, in MB (10^6 bytes) of log
	// entries a second; 0: unpaced.
	VerifyLogMBps int
	// Durability says when this node's log appends count as stored
	// (docs/durability.md); every node of a group should use the same.
	Durability raftlog.DurabilityConfig
	// LockTimeout is how long Start waits for another process to release
	// the data directory's lock (one that is still exiting) before it
	// refuses to start, naming that process.
	LockTimeout time.Duration
	// OnFatal is called when the node can no longer work and only a restart
	// helps (a stuck log store). Nil: log the error and exit the process
	// with status 70, so that a supervisor restarts it.
	OnFatal func(error)
	// PeerDial, for fault injection only, maps a peer's API address to the
	// address to dial instead (forwarding, state polling, registration).
	PeerDial map[string]string
	// Remoting, when set, is the address RocketMQ's remoting protocol is
	// served on (RocketMQ's broker port is 10911); RemotingConfig.Addr is
	// the address registered with the name servers (default: Remoting).
	Remoting       string
	RemotingConfig brokerremoting.Config
	// TLS is the node's TLS on every port it serves and dials (client API,
	// node-to-node API, raft, HTTP, remoting): docs/security.md. Its zero
	// value is disabled: plaintext everywhere.
	TLS tlsconf.Config
	// Auth authenticates RocketMQ remoting requests and checks their
	// permissions (auth.go); its zero value is disabled.
	Auth AuthConfig
}

// DefaultConfig returns a config with every default set; callers fill in
// the node id, addresses, peers and data directory.
func DefaultConfig() Config {
	return Config{LogStore: raftlog.DefaultKind, Raft: election.DefaultConfig(), Broker: broker.DefaultConfig(), VerifyLog: VerifyBackground,
		VerifyLogMBps: DefaultVerifyLogMBps, SegmentMB: 64, Durability: raftlog.DefaultDurabilityConfig(),
		LockTimeout: 3 * time.Second}
}

// VerifyMode is how a node checks its log (Config.VerifyLog).
type VerifyMode string

// The modes of Config.VerifyLog.
const (
	// VerifyBackground checks the entries after the snapshot raft
	// restores, and the tail not known to be synced, before start (a
	// range bounded by the snapshot threshold, not by the log), and the
	// older entries after start, in the background.
	VerifyBackground VerifyMode = "background"
	// VerifySync checks every entry before start: start-up time grows
	// with the log (1.2-2.3 s per GB measured here, docs/BENCHMARKS.md).
	VerifySync VerifyMode = "sync"
	// VerifyOff checks nothing at start; reads still check every entry
	// they read from disk, but raft panics at start on a damaged entry
	// it replays.
	VerifyOff VerifyMode = "off"
)

// DefaultVerifyLogMBps is the default pace of the background check: about
// an eighth of what the disk and a core here read and check (about
// 250 MB/s), so 100 GB take about 52 minutes.
const DefaultVerifyLogMBps = 32

// ParseVerifyMode parses a --verify-log value: background, sync or off,
// and true (background) or false (off), what the flag took before it had
// modes.
func ParseVerifyMode(v string) (VerifyMode, error) {
	switch m := VerifyMode(strings.ToLower(strings.TrimSpace(v))); m {
	case VerifyBackground, VerifySync, VerifyOff:
		return m, nil
	case "true", "":
		return VerifyBackground, nil
	case "false":
		return VerifyOff, nil
	}
	return "", fmt.Errorf("--verify-log %q: want background, sync or off", v)
}

// Server is a running node.
type Server struct {
	cfg    Config
	log    hclog.Logger
	stores *raftlog.Stores
	node   *election.Node
	store  *store.Store
	broker *broker.Broker
	peers  *grpcapi.Peers
	grpc   *grpc.Server
	lis    net.Listener
	extLis net.Listener // the external client API listener, or nil
	http   *http.Server
	lock   *dirLock
	rmq    *brokerremoting.Adapter
	rmqLis net.Listener
	rmqOff func() // removes the adapter's role-change listener
	// cluster answers the console's cluster overview (nil without name
	// servers).
	cluster *clusterView
	// console serves the web console at / on the HTTP port (nil without
	// HTTP); consoleOff removes its role-change listener.
	console    *console.Console
	consoleOff func()
	tls        *tlsconf.Node
	// replies hands the Reply service (replies another node could not
	// push) to the remoting adapter once it starts.
	replies grpcapi.ReplyRelay
	// auth.go: the Authorizer, the sealer of user secrets, and the first
	// admin's bootstrap (authMu guards authStopped and the wg.Add of its
	// goroutines against stop).
	auth        *auth.Authorizer
	sealer      *acl.Sealer
	authOff     func()
	authMu      sync.Mutex
	authStopped bool
	authStop    chan struct{}
	wg          sync.WaitGroup
	once        sync.Once
}

// Start opens the data directory and starts the node. On error nothing is
// left running.
func Start(cfg Config) (_ *Server, err error) {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if cfg.DataDir == "" {
		return nil, errors.New("data directory: empty (--data)")
	}
	if cfg.Raft.ID == "" {
		return nil, errors.New("node id: empty (--id)")
	}
	if err := cfg.Raft.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.TLS.Validate(); err != nil {
		return nil, err
	}
	if _, err := ParseVerifyMode(string(cfg.VerifyLog)); err != nil {
		return nil, fmt.Errorf("config VerifyLog: %w", err)
	}
	if cfg.VerifyLogMBps < 0 {
		return nil, fmt.Errorf("config VerifyLogMBps %d: want 0 (unpaced) or more", cfg.VerifyLogMBps)
	}
	if err := cfg.Durability.Validate(); err != nil {
		return nil, fmt.Errorf("config Durability: %w", err)
	}
	if cfg.Durability.Mode == raftlog.QuorumMemory && cfg.LogStore != raftlog.KindWAL {
		return nil, fmt.Errorf("config Durability %s: needs LogStore %q, not %q", cfg.Durability.Mode, raftlog.KindWAL, cfg.LogStore)
	}
	if cfg.Raft.NewGroup {
		// Before anything creates the directory or files in it.
		if ents, err := os.ReadDir(cfg.DataDir); err != nil || len(ents) == 0 {
			return nil, fmt.Errorf("recover as a new group: data directory %s holds nothing to recover (%v): give it the copy of a node's data directory", cfg.DataDir, errOrEmpty(err))
		}
	}
	s := &Server{cfg: cfg, log: log}
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()
	// The lock comes before any port or store: a second process on the
	// directory must fail here, not hang in the stores' own locks.
	if s.lock, err = lockDataDir(cfg.DataDir, cfg.LockTimeout); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, s.lock.release)
	if err := claimDataDir(cfg.DataDir, cfg.Raft.ID); err != nil {
		return nil, err
	}
	tc := cfg.TLS
	tc.Logger = log.Named("tls")
	if s.tls, err = tlsconf.New(tc); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, s.tls.Close)

	s.lis, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("client API listen on %s: %w", cfg.Listen, err)
	}
	cleanup = append(cleanup, func() { s.lis.Close() })
	if cfg.ListenExternal != "" {
		if s.extLis, err = net.Listen("tcp", cfg.ListenExternal); err != nil {
			return nil, fmt.Errorf("external client API listen on %s: %w", cfg.ListenExternal, err)
		}
		cleanup = append(cleanup, func() { s.extLis.Close() })
	}
	bc := cfg.Broker
	bc.NodeID = cfg.Raft.ID
	if bc.ClientAddr == "" {
		bc.ClientAddr = s.lis.Addr().String()
	}
	bc.Logger = log.Named("broker")
	if bc.GroupIDFile == "" {
		bc.GroupIDFile = filepath.Join(cfg.DataDir, "GROUP_ID")
	}
	if bc.KeyIndexDir == "" {
		bc.KeyIndexDir = filepath.Join(cfg.DataDir, "keyindex")
	}
	if bc.PeerAddr == "" {
		bc.PeerAddr = bc.ClientAddr
	}
	if bc.ExternalAddr == "" && s.extLis != nil {
		bc.ExternalAddr = s.extLis.Addr().String()
	}
	if bc.ExternalAddr != "" && s.extLis == nil {
		return nil, fmt.Errorf("external client address %s: it needs an external listener (--listen-external)", bc.ExternalAddr)
	}
	if err := bc.Validate(); err != nil { // before any data is opened
		return nil, err
	}
	if err := cfg.Auth.Validate(); err != nil {
		return nil, err
	}

	onFatal := cfg.OnFatal
	if onFatal == nil {
		var once sync.Once
		onFatal = func(err error) {
			once.Do(func() {
				log.Error("fatal: exiting so that the node is restarted", "error", err)
				os.Exit(70)
			})
		}
	}
	onDamaged := func(index uint64, err error) {
		// The broker polls the stores and marks the node damaged within
		// a state period (broker/damage.go).
		log.Error("damaged log entry: it is not served or replicated from this node", "index", index, "error", err)
	}
	s.stores, err = raftlog.Open(cfg.DataDir, raftlog.Options{Kind: cfg.LogStore, SegmentSize: cfg.SegmentMB << 20, Durability: cfg.Durability,
		Logger: log.Named("raftlog"), OnFatal: onFatal, OnDamaged: onDamaged})
	if err != nil {
		if raftlog.NeedsRepair(err) {
			return nil, fmt.Errorf("%w\n%s", err, repairSteps(cfg))
		}
		return nil, err
	}
	cleanup = append(cleanup, func() { s.stores.Close() })
	// The background check covers first..bgTo (none when bgTo is 0).
	bgTo, err := s.checkLogAtStart()
	if err != nil {
		return nil, err
	}
	fsm, err := store.OpenFSM(log.Named("store"), filepath.Join(cfg.DataDir, "queueindex"), s.stores.Snapshots, onFatal)
	if err != nil {
		return nil, err
	}
	// A damaged queue index is rebuilt from this node's log.
	fsm.StartRebuilds(s.stores)
	s.stores.WatchApplied(fsm.Applied)
	// A leader's own appends return before their fsync (raftlog's
	// OverlapWhen, below): its state machine applies, and its followers
	// learn as committed, only what its log has fsynced.
	fsm.AwaitStoredBy(func(idx uint64) error { return s.stores.AwaitStored(idx, nil) })
	rc := cfg.Raft
	rc.CommitBound = s.stores.Stored
	rc.Logger = log.Named("election")
	rc.TLS = s.tls
	// The node closes fsm from here on, also when it fails to start.
	marker := filepath.Join(cfg.DataDir, newGroupMarker)
	if rc.NewGroup {
		_, err := os.Stat(marker)
		rc.NewGroupDone = err == nil
	}
	s.node, err = election.Start(rc, fsm, election.RaftStores{Log: s.stores.Log, Stable: s.stores.Stable, Snapshots: s.stores.Snapshots,
		Unclean: s.stores.Unclean(), Recovered: s.stores.Recovered})
	if errors.Is(err, election.ErrRecoveredBefore) {
		return nil, fmt.Errorf("%w\nStart it without --recover-as-new-group. To recover this data as a new group once more (a copy of it, its group gone), delete %s first", err, marker)
	}
	if err != nil {
		return nil, err
	}
	if rc.NewGroup && !rc.NewGroupDone {
		if err := os.WriteFile(marker, []byte(newGroupMarkerText), 0o644); err != nil {
			log.Warn("could not record the recovery as a new group; a later start with the flag would leave added members out", "file", marker, "error", err)
		}
	}
	cleanup = append(cleanup, func() { s.node.Kill() })
	s.stores.OverlapWhen(s.node.Leads)
	s.store = store.New(fsm, s.node)
	s.peers = grpcapi.NewPeers(cfg.Raft.ID, cfg.PeerDial, s.tls)
	cleanup = append(cleanup, func() { s.peers.Close() })
	s.broker, err = broker.New(bc, broker.ReplicaOf(s.store, s.node), s.stores, s.peers)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { s.broker.Close() })
	if err := s.startAuth(); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, s.stopAuth)

	if cfg.HTTP != "" {
		hl, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			return nil, fmt.Errorf("http listen on %s: %w", cfg.HTTP, err)
		}
		hl = s.tls.Listen(hl, false)
		ccfg := console.Config{Status: s.broker.Status, Metrics: s.broker.Registry(), Broker: s.broker, Auth: s.auth}
		if len(cfg.RemotingConfig.NameServers) > 0 {
			s.cluster = &clusterView{b: s.broker, peers: s.peers}
			ccfg.Cluster = s.cluster.Groups
		}
		s.console = console.New(ccfg)
		s.consoleOff = s.node.OnChange(func(e election.Event) { s.console.LeaderChanged(e.LeaderID, e.Term) })
		if id := s.node.LeaderID(); id != "" { // an election before the listener: the events then win
			s.console.LeaderChanged(id, s.node.Stats().Term)
		}
		s.http = &http.Server{Handler: s.httpHandler(), ReadHeaderTimeout: 5 * time.Second}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.http.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server", "error", err)
			}
		}()
	}
	gopts := grpcapi.ServerOptions(s.broker)
	if s.tls.On() {
		gopts = append(gopts, grpc.Creds(s.tls.GRPCCredentials()))
	}
	if s.tls.Mode() == tlsconf.Enforcing {
		gopts = append(gopts, grpcapi.PeerCertRequired(s.auth.Mode() == acl.Enforcing)...)
	}
	gopts = append(gopts, grpcapi.AuthOptions(s.auth)...)
	s.grpc = grpc.NewServer(gopts...)
	grpcapi.RegisterServices(s.grpc, s.broker, s.peers)
	grpcapi.RegisterReplyService(s.grpc, &s.replies)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(s.lis); err != nil {
			log.Error("grpc server", "error", err)
		}
	}()
	if s.extLis != nil {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.grpc.Serve(grpcapi.ExternalListener(s.extLis)); err != nil {
				log.Error("grpc server (external listener)", "error", err)
			}
		}()
	}
	if cfg.Remoting != "" || len(cfg.RemotingConfig.NameServers) > 0 {
		if err := s.startRemoting(); err != nil {
			s.grpc.Stop()
			return nil, err
		}
	}
	s.registerLogCheckMetrics()
	s.registerDiskMetrics()
	if bgTo > 0 {
		if err := s.stores.VerifyInBackground(raftlog.BackgroundCheck{From: s.stores.FirstIndex(), To: bgTo,
			BytesPerSecond: int64(cfg.VerifyLogMBps) * 1e6, CheckMeta: store.CheckCommand, Resume: true,
			Logger: log.Named("raftlog"), ProgressEvery: 10 * time.Second}); err != nil {
			s.grpc.Stop()
			return nil, err
		}
	}
	log.Info("node started", "id", cfg.Raft.ID, "raft", cfg.Raft.BindAddr, "client", bc.ClientAddr, "external", bc.ExternalAddr, "http", cfg.HTTP,
		"remoting", cfg.Remoting, "data", cfg.DataDir, "log_store", cfg.LogStore, "durability", cfg.Durability.Mode, "tls", s.tls.Mode())
	return s, nil
}

// startRemoting serves RocketMQ's remoting protocol beside the gRPC API and
// registers with the name servers; a role change is passed on at once.
// Without Remoting it only registers (the client API addresses, for
// raftmq's SDK and CLI).
func (s *Server) startRemoting() error {
	rc := s.cfg.RemotingConfig
	var l net.Listener
	if s.cfg.Remoting == "" {
		if rc.ExternalAddr != "" {
			return fmt.Errorf("external remoting address %s: it needs a remoting listener (--remoting)", rc.ExternalAddr)
		}
		rc.Addr, rc.RegisterOnly = s.broker.Config().ClientAddr, true
	} else {
		var err error
		if l, err = net.Listen("tcp", s.cfg.Remoting); err != nil {
			return fmt.Errorf("remoting listen on %s: %w", s.cfg.Remoting, err)
		}
		l = s.tls.Listen(l, false) // RocketMQ clients with tls.enable speak TLS on the same port
		if rc.Addr == "" {
			rc.Addr = l.Addr().String()
		}
	}
	rc.Logger = s.log.Named("remoting")
	rc.Auth = s.auth
	if s.tls.On() {
		rc.NameServerDial = func(ctx context.Context, addr string) (net.Conn, error) { return s.tls.Dial(ctx, "tcp", addr) }
	}
	if secret := s.sealer.NodeSecret(); len(secret) > 0 {
		rc.NodeSecret = secret
		rc.Users = func() []namesrv.User {
			users := s.store.Users()
			out := make([]namesrv.User, 0, len(users))
			for _, u := range users {
				out = append(out, namesrv.User{Name: u.Name, Sealed: u.Secret})
			}
			return out
		}
	}
	a, err := brokerremoting.New(rc, s.broker, s.peers)
	if err != nil {
		if l != nil {
			l.Close()
		}
		return err
	}
	s.rmq, s.rmqLis = a, l
	if s.cluster != nil {
		s.cluster.ns.Store(a)
	}
	a.RoleChanged()
	s.rmqOff = s.node.OnChange(func(election.Event) { a.RoleChanged() })
	if l == nil {
		return nil
	}
	s.replies.Set(a)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := a.Serve(l); err != nil {
			s.log.Error("remoting server", "error", err)
		}
	}()
	return nil
}

// RemotingAddr is the address the remoting protocol is served on ("" when
// it is off).
func (s *Server) RemotingAddr() string {
	if s.rmqLis == nil {
		return ""
	}
	return s.rmqLis.Addr().String()
}

// checkSnapshots checks every snapshot before raft restores one; it moves
// a damaged snapshot aside when an older one and the log still hold all it
// summarised, and refuses with the repair steps when they do not.
func (s *Server) checkSnapshots() (restoreIndex uint64, err error) {
	snaps, err := s.stores.CheckSnapshots(store.CheckSnapshot)
	if err != nil {
		if raftlog.NeedsRepair(err) {
			return 0, fmt.Errorf("%w\nthis node's data directory %s is damaged: the snapshots and log it holds do not hold all of the state it had; the other nodes of the group hold it.\n%s",
				err, s.cfg.DataDir, repairSteps(s.cfg))
		}
		return 0, err
	}
	restore := "none: the log from index 1"
	for _, sn := range snaps {
		if sn.Err == nil {
			restore, restoreIndex = sn.ID, sn.Index
			break
		}
	}
	for _, sn := range snaps {
		if sn.MovedTo != "" {
			s.log.Warn("damaged snapshot moved aside: the snapshot this node restores and its log hold everything the damaged one summarised",
				"snapshot", sn.ID, "index", sn.Index, "error", sn.Err, "moved_to", sn.MovedTo, "restores", restore,
				"log_first", s.stores.FirstIndex(), "log_last", s.stores.LastIndex())
		}
	}
	return restoreIndex, nil
}

// checkLogAtStart checks the log and the snapshots before raft opens them,
// as cfg.VerifyLog says, and returns the last index the background check
// is to cover (0: none). A damaged entry it finds refuses the start with
// the repair steps.
func (s *Server) checkLogAtStart() (bgTo uint64, err error) {
	mode, _ := ParseVerifyMode(string(s.cfg.VerifyLog))
	refuse := func(err error) error {
		damaged := ""
		if idx, _ := s.stores.Damaged(); idx != 0 {
			damaged = fmt.Sprintf("this node's log is damaged at log index %d; the other nodes of the group hold the entry.\n", idx)
		}
		return fmt.Errorf("%w\n%s%s", err, damaged, repairSteps(s.cfg))
	}
	start := time.Now()
	switch mode {
	case VerifySync:
		n, err := s.stores.Verify(store.CheckCommand)
		if err != nil {
			return 0, refuse(err)
		}
		s.log.Info("log verified", "entries", n, "took", time.Since(start))
		// Before raft restores one: raft skips a snapshot it cannot
		// restore and replays the log after an older one, which is only
		// the same state when the log holds every entry from there on.
		_, err = s.checkSnapshots()
		return 0, err
	case VerifyOff:
		_, err := s.checkSnapshots()
		return 0, err
	}
	// The snapshots first: the one raft restores decides what it replays.
	restore, err := s.checkSnapshots()
	if err != nil {
		return 0, err
	}
	snapsTook, start := time.Since(start), time.Now()
	from := s.stores.StartCheckFrom(restore)
	n, err := s.stores.VerifyRange(from, math.MaxUint64, store.CheckCommand)
	if err != nil {
		return 0, refuse(err)
	}
	first, last := s.stores.FirstIndex(), s.stores.LastIndex()
	s.log.Info("log tail verified: the entries raft replays and those not known to be synced; older entries are checked in the background",
		"entries", n, "from", from, "to", last, "snapshot", restore, "took", time.Since(start), "snapshots_checked_in", snapsTook)
	if first == 0 || from <= first {
		return 0, nil
	}
	return from - 1, nil
}

// repairSteps is what a node whose log is damaged or incomplete prints when
// it refuses to start: the steps that rebuild it from its group.
func repairSteps(cfg Config) string {
	addr := cfg.Raft.AdvertiseAddr
	if addr == "" {
		addr = cfg.Raft.BindAddr
	}
	return fmt.Sprintf("this node's log is damaged or incomplete and it will not start: it must not serve, replicate or vote with a damaged log.\n"+
		"To repair it from the group's healthy members:\n"+
		"  1. keep this node stopped\n"+
		"  2. raftmq member remove %[1]s --force -s ADDR   (ADDR: the client address of a healthy member)\n"+
		"  3. mv %[2]s %[2]s.damaged   (keep it for inspection, or delete it)\n"+
		"  4. start this node again with an empty --data %[2]s and --join (without --peers)\n"+
		"  5. raftmq member add %[1]s@%[3]s -s ADDR   (it joins as a non-voter and is promoted once caught up)",
		cfg.Raft.ID, cfg.DataDir, addr)
}

// claimDataDir refuses a data directory that belongs to another node.
// newGroupMarker, in the data directory, records that the node was
// recovered as a new group (--recover-as-new-group): a later start with the
// flag is refused once the group has other members.
const newGroupMarker = "RECOVERED_AS_NEW_GROUP"

const newGroupMarkerText = "This data was started with --recover-as-new-group. Starting it with the flag again is refused\n" +
	"once the group has other members; delete this file to recover a copy of it as a new group again.\n"

// errOrEmpty is err, or "empty" when it is nil.
func errOrEmpty(err error) any {
	if err == nil {
		return "empty"
	}
	return err
}

func claimDataDir(dir, id string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create data directory %s: %w", dir, err)
	}
	p := filepath.Join(dir, "NODE_ID")
	b, err := os.ReadFile(p)
	switch {
	case err == nil:
		if got := strings.TrimSpace(string(b)); got != id {
			return fmt.Errorf("data directory %s belongs to node %q, not %q; use that node's id or another directory", dir, got, id)
		}
		return nil
	case errors.Is(err, os.ErrNotExist):
		if err := os.WriteFile(p, []byte(id+"\n"), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		return nil
	default:
		return fmt.Errorf("read %s: %w", p, err)
	}
}

func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", s.console.Handler()) // the web console: the page, its assets, /console/events
	mux.Handle("/metrics", promhttp.HandlerFor(s.broker.Registry(), promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.broker.Damaged(); ok {
			http.Error(w, "damaged: "+s.broker.RepairSteps(), http.StatusServiceUnavailable)
			return
		}
		st := s.node.Stats()
		if err := s.broker.Readiness(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ok: %s, leader %s, term %d\n", st.Role, st.LeaderID, st.Term)
	})
	// Profiles of a running node (go tool pprof http://HTTP/debug/pprof/profile):
	// the http address is an operator's port, like /metrics; with --auth on
	// they answer only from the node's own host (pprofGuard).
	mux.HandleFunc("/debug/pprof/", s.pprofGuard(pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", s.pprofGuard(pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", s.pprofGuard(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", s.pprofGuard(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", s.pprofGuard(pprof.Trace))
	return mux
}

// ReloadTLS reads the certificate, key and CA files again (SIGHUP); new
// connections use them, open ones keep theirs. The files are also
// reloaded when they change (tlsconf.Config.ReloadEvery).
func (s *Server) ReloadTLS() error { return s.tls.Reload() }

// TLSCertificate is the certificate the node serves and dials with now
// (nil with TLS disabled).
func (s *Server) TLSCertificate() *tls.Certificate { return s.tls.Certificate() }

// Addr is the client API address this node listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ExternalAddr is the external client API listener's address, or "" when
// the node has none.
func (s *Server) ExternalAddr() string {
	if s.extLis == nil {
		return ""
	}
	return s.extLis.Addr().String()
}

// Broker is the node's broker service.
func (s *Server) Broker() *broker.Broker { return s.broker }

// Node is the node's raft member: role, leader, membership, snapshots.
func (s *Server) Node() *election.Node { return s.node }

// Store is the node's replicated state: what it applied, and the typed
// writes.
func (s *Server) Store() *store.Store { return s.store }

// RaftLog is the node's Raft log and raft's other stores (raftlog).
func (s *Server) RaftLog() *raftlog.Stores { return s.stores }

// Close stops the node gracefully: a leader first hands leadership over
// (clients see a pause of milliseconds), then the API stops taking requests,
// then raft and the stores close. It is idempotent.
func (s *Server) Close() error { return s.stop(true) }

// Kill stops the node without handing over leadership, like a crash of the
// raft side (tests).
func (s *Server) Kill() error { return s.stop(false) }

func (s *Server) stop(graceful bool) error {
	var err error
	s.once.Do(func() {
		if graceful && s.node.Role() == election.Leader {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, _, terr := s.broker.TransferLeader(ctx, "")
			cancel()
			if terr != nil {
				s.log.Warn("leadership transfer before shutdown", "error", terr)
			}
		}
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			s.grpc.Stop()
			<-done
		}
		s.stopAuth()
		if s.rmq != nil {
			s.rmqOff()
			s.rmq.Close()
		}
		if s.http != nil {
			s.consoleOff()
			s.console.Close() // ends the open event streams, which Shutdown would wait for
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			s.http.Shutdown(ctx)
			cancel()
		}
		s.broker.Close()
		if graceful {
			err = s.node.Close()
		} else {
			err = s.node.Kill()
		}
		s.peers.Close()
		s.wg.Wait()
		if cerr := s.stores.Close(); cerr != nil && err == nil {
			err = cerr
		}
		s.tls.Close()
		s.lock.release()
		s.log.Info("node stopped", "id", s.cfg.Raft.ID)
	})
	return err
}

// registerLogCheckMetrics exports the progress of the background log check
// (checkLogAtStart): with VerifySync every entry was checked before start,
// with VerifyOff none is.
func (s *Server) registerLogCheckMetrics() {
	mode, _ := ParseVerifyMode(string(s.cfg.VerifyLog))
	progress := func() raftlog.CheckProgress {
		if p, ok := s.stores.BackgroundProgress(); ok {
			return p
		}
		return raftlog.CheckProgress{Done: mode != VerifyOff}
	}
	reg := s.broker.Registry()
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "raftmq_log_verify_bytes_total",
			Help: "Bytes of log entries the background log check has read and checked since start."},
			func() float64 { return float64(progress().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "raftmq_log_verify_entries_total",
			Help: "Log entries the background log check has read and checked since start."},
			func() float64 { return float64(progress().Entries) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_log_verify_progress",
			Help: "Share of the log older than the start-time check that the background check has covered, 0 to 1."},
			func() float64 { return progress().Fraction() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_log_verify_done",
			Help: "1 once every entry the log held at start has been checked (before start, or by the background check, which also stops at a damaged entry: see raftmq_damaged)."},
			func() float64 {
				if progress().Done {
					return 1
				}
				return 0
			}),
	)
}
