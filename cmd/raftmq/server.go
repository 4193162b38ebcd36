package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker"
	brokerremoting "github.com/raftmq/raftmq/broker/remoting"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/raftlog"
)

func serverCommand() *cli.Command {
	d := server.DefaultConfig()
	return &cli.Command{
		Name:  "server",
		Usage: "run a node of a broker group",
		Description: "Start the three nodes of a group with the same --peers list; a node bootstraps the group\n" +
			"only when its data directory is empty, and rejoins with its data otherwise.\n\n" +
			"   raftmq server --id n1 --data /tmp/g/n1 --raft 127.0.0.1:7001 --listen 127.0.0.1:9001 \\\n" +
			"       --http 127.0.0.1:8001 --peers n1@127.0.0.1:7001,n2@127.0.0.1:7002,n3@127.0.0.1:7003\n\n" +
			"A node started without --peers on an empty data directory begins a group of one node, itself,\n" +
			"and logs how to grow it. A node to be added to a group with `raftmq member add` is started\n" +
			"with --join instead: it waits until the group's leader adds it. member add refuses a node that\n" +
			"began a group of its own (started without --join by mistake).\n\n" +
			"To restore a group from a copy of one node's data directory, start that copy once with\n" +
			"--recover-as-new-group (the node's own --id, any --raft and --listen): it becomes the only\n" +
			"voter of its group, keeping every message of its log. Then add nodes with `raftmq member add`\n" +
			"and restart it without the flag (docs/operations.md, \"Backup and restore\").",
		Flags: append(configFileFlags(),
			&cli.StringFlag{Name: "id", Usage: "unique node id (required)"},
			&cli.StringFlag{Name: "data", Usage: "data directory (required)"},
			&cli.StringFlag{Name: "broker-name", Aliases: []string{"group"}, EnvVars: []string{"RAFTMQ_BROKER_NAME"}, Value: d.Broker.Group, Usage: "the group's name: RocketMQ's brokerName, registered with the name servers and shown by status; every node of a group gives the same one, and no two groups of a cluster share one (--group is an alias; RAFTMQ_GROUP is not read, it is the consumer group of other commands)"},
			&cli.StringFlag{Name: "raft", Value: "127.0.0.1:7001", Usage: "Raft listen address"},
			&cli.StringFlag{Name: "raft-advertise", Usage: "Raft address other nodes dial (default: --raft)"},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:9001", Usage: "client API (gRPC) listen address: the internal listener, for the other nodes and the clients on their network"},
			&cli.StringFlag{Name: "advertise", Usage: "client API address told to clients connected through --listen (default: --listen)"},
			&cli.StringFlag{Name: "peer-advertise", Usage: "client API address other nodes use (default: --advertise)"},
			&cli.StringFlag{Name: "listen-external", Usage: "a second client API listen address, the external listener (a port published outside the nodes' network, e.g. on a Docker host); its clients are told every node's --advertise-external (empty: none)"},
			&cli.StringFlag{Name: "advertise-external", Usage: "client API address told to clients connected through --listen-external (default: --listen-external)"},
			&cli.StringFlag{Name: "http", Value: "127.0.0.1:8001", Usage: "HTTP address for the web console (/), /metrics, /healthz, /readyz and /debug/pprof (empty: off)"},
			&cli.StringFlag{Name: "http-advertise", Usage: "HTTP address shown by status (default: --http)"},
			&cli.StringFlag{Name: "peers", Usage: "initial voters as ID@RAFTADDR,... (must include this node)"},
			&cli.BoolFlag{Name: "single", Usage: "with an empty --data, begin a group of one node, this one (the same as --peers ID@RAFT-ADVERTISE); the default without --peers and --join, kept for existing scripts"},
			&cli.BoolFlag{Name: "join", Usage: "with an empty --data, wait to be added to a group with raftmq member add run against it, instead of beginning a group of one; with data it is ignored (the node restarts as the member it is). Not with --peers, --single or --recover-as-new-group"},
			&cli.BoolFlag{Name: "recover-as-new-group", Usage: "start the existing data of --data (a copy of a node's data directory) as a new group whose only voter is this node at --id and its raft address (--raft-advertise, default --raft); every message of the log is kept, the old members no longer count. Refused with an empty --data or with --peers. Give it for one start, then grow the group with raftmq member add and restart this node without it"},
			&cli.StringFlag{Name: "log-store", Value: d.LogStore, Usage: "Raft log store: wal (raft-wal) or bolt (raft-boltdb)"},
			&cli.DurationFlag{Name: "heartbeat-timeout", Value: d.Raft.HeartbeatTimeout, Usage: "Raft heartbeat timeout"},
			&cli.DurationFlag{Name: "election-timeout", Value: d.Raft.ElectionTimeout, Usage: "Raft election timeout"},
			&cli.DurationFlag{Name: "commit-timeout", Value: d.Raft.CommitTimeout, Usage: "Raft commit timeout (follower visibility)"},
			&cli.StringFlag{Name: "preferred-leader", Usage: "hand leadership to this node id whenever it is healthy and caught up"},
			&cli.BoolFlag{Name: "auto-create-topics", Value: d.Broker.AutoCreateTopics, Usage: "create unknown topics on first produce"},
			&cli.IntFlag{Name: "default-queues", Value: d.Broker.DefaultQueues, Usage: "queues of auto-created topics"},
			&cli.IntFlag{Name: "max-message-bytes", Value: d.Broker.MaxMessageBytes, Usage: "largest accepted message body"},
			&cli.IntFlag{Name: "max-request-bytes", Value: d.Broker.MaxRequestBytes, Usage: "largest produce request as the log encodes it (bodies, keys, tags, properties); one request is one Raft entry, at most " + strconv.Itoa(broker.MaxRequestLimit)},
			&cli.IntFlag{Name: "max-batch-bytes", Value: d.Broker.MaxBatchBytes, Usage: "group commit closes a Raft entry at this size"},
			&cli.IntFlag{Name: "max-inflight", Value: d.Broker.MaxInflight, Usage: "group-commit entries handed to raft and not yet applied"},
			&cli.IntFlag{Name: "max-pending-mb", Value: d.Broker.MaxPendingBytes >> 20, Usage: "MiB of produce requests a node holds (queued or in raft); under a flood it holds less, what it commits in 0.5 s; beyond it requests wait their turn (at most 1 s, as many bytes again), and past that producers are told to retry shortly"},
			&cli.Uint64Flag{Name: "cold-read-bytes", Value: d.Broker.ColdReadBytes, DefaultText: "40% of RAM", Usage: "a consumer further behind than this is sent to a follower"},
			&cli.Float64Flag{Name: "load-threshold", Value: d.Broker.LoadThreshold, Usage: "leader load (max of: share of its CPU budget used, produce queue fill, raft pipeline fill, read rate/200k msg/s) at or above which consumers go to followers"},
			&cli.Float64Flag{Name: "cpu-budget", Usage: "cores the load signal counts as this node's (0: min of GOMAXPROCS, the cgroup quota, cores / nodes of the group on this host)"},
			&cli.Uint64Flag{Name: "max-follower-lag", Value: d.Broker.MaxFollowerLag, Usage: "log entries a follower may lag before it sends consumers to the leader"},
			&cli.DurationFlag{Name: "retention", Value: d.Broker.RetentionAge, Usage: "delete messages older than this, by whole log segments (0: keep forever)"},
			&cli.IntFlag{Name: "retention-mb", Usage: "keep at most about this many MiB of log per node, deleting the oldest whole segments (0: no limit)"},
			&cli.DurationFlag{Name: "retention-check", Value: d.Broker.RetentionCheck, Usage: "how often the leader checks the retention limits"},
			&cli.DurationFlag{Name: "max-delay", Value: mq.DefaultMaxDelay, Usage: "how far ahead a delayed message's delivery time may be (produce --deliver-at, --delay)"},
			&cli.DurationFlag{Name: "retention-grace", Value: d.Broker.RetentionGrace, Usage: "a cut waits this long for a follower that stopped answering (a restart) to catch up, so it keeps its log"},
			&cli.Uint64Flag{Name: "snapshot-threshold", Value: d.Raft.SnapshotThreshold, Usage: "log entries between FSM snapshots (bounds restart replay)"},
			&cli.StringFlag{Name: "raft-dial", Hidden: true, Usage: "fault injection only: ID=ADDR,... dial these addresses for those peers"},
			&cli.DurationFlag{Name: "lock-timeout", Value: d.LockTimeout, Usage: "wait this long for another process to release the data directory, then refuse to start, naming it"},
			&cli.BoolFlag{Name: "chaos-lazyfs", Hidden: true, Usage: "fault injection only: raft-wal writes reach its files only at fsync, and DATA/CHAOS_FSYNC_DELAY delays every fsync (sets RAFTMQ_CHAOS_LAZYFS=1)"},
			&cli.StringFlag{Name: "peer-dial", Hidden: true, Usage: "fault injection only: PEERADDR=ADDR,... dial ADDR for the node-to-node API calls to the peer whose API address is PEERADDR"},
			&cli.StringFlag{Name: "verify-log", Value: string(d.VerifyLog), Usage: "check the log's checksums: background (before start the entries raft replays and the unsynced tail, the rest after start at --verify-log-mbps), sync (the whole log before start: start time grows with the log), off; true/false mean background/off. A damaged entry found before start refuses the start, one found later marks the node damaged"},
			&cli.IntFlag{Name: "verify-log-mbps", Value: d.VerifyLogMBps, Usage: "pace of the background log check in MB/s (0: unpaced)"},
			&cli.StringFlag{Name: "durability", Value: d.Durability.Mode, Usage: "when this node's log appends count as stored, so when a quorum of them acknowledges an entry: quorum-fsync (fsynced, the default) or quorum-memory (written to the log file, fsynced within --sync-interval or --sync-bytes; a simultaneous machine crash of a majority may lose what was acknowledged since, docs/durability.md). Give every node of a group the same; needs --log-store wal"},
			&cli.DurationFlag{Name: "sync-interval", Value: d.Durability.SyncInterval, Usage: "with --durability quorum-memory: fsync the log at most this long after its first unsynced write"},
			&cli.Int64Flag{Name: "sync-bytes", Value: d.Durability.SyncBytes, Usage: "with --durability quorum-memory: fsync the log as soon as this many bytes are unsynced (a write past it waits for that fsync)"},
			&cli.IntFlag{Name: "segment-mb", Value: d.SegmentMB, Usage: "size of one raft-wal log segment file in MiB"},
			&cli.IntFlag{Name: "memory-limit-mb", Value: defaultMemoryLimitMB, Usage: "soft memory limit of the Go heap in MiB: the garbage collector works harder near it (0: none; the GOMEMLIMIT environment variable overrides it)"},
			&cli.StringFlag{Name: "remoting", Usage: "serve RocketMQ's remoting protocol on this address (RocketMQ's broker port is 10911; empty: off)"},
			&cli.StringFlag{Name: "remoting-advertise", Usage: "remoting address registered with the name servers, handed out by their internal listener (default: --remoting)"},
			&cli.StringFlag{Name: "remoting-advertise-external", Usage: "remoting address for clients outside the nodes' network (a published port), handed out by the name servers' external listener"},
			&cli.StringFlag{Name: "namesrv", Usage: "name servers to register with, ADDR[;ADDR...] (without --remoting: the client API addresses only, for raftmq's CLI and SDK)"},
			&cli.DurationFlag{Name: "register-period", Value: brokerremoting.DefaultConfig().RegisterPeriod, Usage: "renew the registration with the name servers this often (a role change registers at once); keep it well below the name servers' --expiry"},
			&cli.StringFlag{Name: "cluster", EnvVars: []string{"RAFTMQ_CLUSTER"}, Value: brokerremoting.DefaultConfig().Cluster, Usage: "the cluster this group belongs to: RocketMQ's brokerClusterName, registered with the name servers"},
			&cli.BoolFlag{Name: "remoting-reads-on-followers", Aliases: []string{"remoting-tail-on-followers"}, Value: brokerremoting.DefaultConfig().ReadsOnFollowers, Usage: "RocketMQ consumers read from followers whenever one has the data, at the tail (long polls) and behind it: a pull in flight to a killed leader stalls its queue for the client's 30 s pull timeout (the client does not fail requests of a closed connection), one on a follower goes on once a new leader commits; the leader keeps a consumer only when no follower has its data; false: consumers read from the leader unless it is loaded or they read cold data (the read routing of the gRPC API). Also --remoting-tail-on-followers"},
			&cli.BoolFlag{Name: "remoting-write-via-followers", Value: brokerremoting.DefaultConfig().WriteViaFollowers, Usage: "while a follower, register as a write-only broker <group>~<id> of the group's topics too: RocketMQ producers spread sends over the leader and the followers, which forward them (one more hop for those sends: about +0.6 ms median and a quarter less throughput with many in flight, measured on one 2-core machine, docs/BENCHMARKS.md), and when the leader dies they keep sending through the followers as soon as a new leader is elected instead of after their next route poll (up to 30 s); false: producers send to the leader only"},
			&cli.DurationFlag{Name: "txn-timeout", Value: brokerremoting.DefaultTxnTimeout, Usage: "a transactional half message undecided this long (or its CHECK_IMMUNITY_TIME_IN_SECONDS) is checked back with its RocketMQ producer group (CHECK_TRANSACTION_STATE)"},
			&cli.DurationFlag{Name: "txn-check-interval", Value: brokerremoting.DefaultTxnCheckInterval, Usage: "check an undecided half message back again this often"},
			&cli.IntFlag{Name: "txn-check-max", Value: brokerremoting.DefaultTxnCheckMax, Usage: "after this many check-backs an undecided half message is discarded into TRANS_CHECK_MAX_TIME_TOPIC"},
			logLevelFlag(), logFormatFlag(),
			&cli.StringFlag{Name: "tls-mode", Value: string(tlsconf.Disabled), EnvVars: []string{"RAFTMQ_SERVER_TLS_MODE"}, Usage: "TLS on every port (client API, raft, node-to-node, HTTP, remoting): disabled; permissive (each port takes TLS and plaintext, peers are dialed with TLS and plaintext only if they do not speak it: the step of a node-by-node move); enforcing (plaintext refused; nodes need a certificate the --tls-ca signed). docs/security.md"},
			&cli.StringFlag{Name: "auth", Value: "disabled", EnvVars: []string{"RAFTMQ_SERVER_AUTH"}, Usage: "authentication and permissions of RocketMQ remoting requests: disabled; permissive (serve everything, log and count in /metrics what enforcing would refuse: the step of a node-by-node move); enforcing (refuse NO_PERMISSION without a valid signature of a user holding the grant). docs/security.md"},
			&cli.StringFlag{Name: "auth-key-file", EnvVars: []string{"RAFTMQ_SERVER_AUTH_KEY_FILE"}, Usage: "file of at least 32 random bytes that seals user secrets in the log and snapshots; the same on every node of the group (needed unless --auth disabled)"},
			&cli.StringFlag{Name: "auth-admin-user", EnvVars: []string{"RAFTMQ_SERVER_AUTH_ADMIN_USER"}, Usage: "the first admin (an access key), written by the leader while the group has no user; there is no built-in one"},
			&cli.StringFlag{Name: "auth-admin-secret-file", EnvVars: []string{"RAFTMQ_SERVER_AUTH_ADMIN_SECRET_FILE"}, Usage: "file holding the first admin's secret key (a trailing newline is dropped)"},
			&cli.StringFlag{Name: "tls-cert", EnvVars: []string{"RAFTMQ_SERVER_TLS_CERT"}, Usage: "PEM certificate of this node, for serving and for dialing the other nodes; reloaded on SIGHUP and when the file changes"},
			&cli.StringFlag{Name: "tls-key", EnvVars: []string{"RAFTMQ_SERVER_TLS_KEY"}, Usage: "PEM private key of --tls-cert"},
			&cli.StringFlag{Name: "tls-ca", EnvVars: []string{"RAFTMQ_SERVER_TLS_CA"}, Usage: "PEM CA that signs the nodes' certificates (and clients' optional ones)"},
			&cli.DurationFlag{Name: "tls-reload", Value: tlsconf.DefaultReloadEvery, EnvVars: []string{"RAFTMQ_SERVER_TLS_RELOAD"}, Usage: "check the TLS files for changes this often (0: only on SIGHUP)"},
		),
		Before: applyConfigFile,
		Action: func(c *cli.Context) error {
			if c.Bool("print-config") {
				return printConfig(c)
			}
			return runServer(c)
		},
	}
}

// defaultMemoryLimitMB keeps a node's heap, and so its RSS, near 256 MiB
// under load: without a limit the heap doubles its live size between
// collections (GOGC=100) and a follower serving reads peaked at 452 MiB.
const defaultMemoryLimitMB = 256

func runServer(c *cli.Context) error {
	cfg := server.DefaultConfig()
	cfg.DataDir = c.String("data")
	cfg.LogStore = c.String("log-store")
	cfg.Listen = c.String("listen")
	cfg.HTTP = c.String("http")
	if cfg.LogStore != raftlog.KindWAL && cfg.LogStore != raftlog.KindBolt {
		return fmt.Errorf("--log-store %q: want wal or bolt", cfg.LogStore)
	}
	var err error
	if c.String("peers") != "" {
		if cfg.Raft.Peers, err = election.ParsePeers(c.String("peers")); err != nil {
			return fmt.Errorf("--peers: %w", err)
		}
	}
	if c.Bool("join") && (len(cfg.Raft.Peers) > 0 || c.Bool("single") || c.Bool("recover-as-new-group")) {
		return errors.New("--join: a joining node waits to be added with `raftmq member add`; give it without --peers, --single and --recover-as-new-group")
	}
	if c.Bool("single") && (len(cfg.Raft.Peers) > 0 || c.Bool("recover-as-new-group")) {
		return errors.New("--single: give it alone, not with --peers or --recover-as-new-group")
	}
	cfg.Raft.Join = c.Bool("join")
	if cfg.Raft.NewGroup = c.Bool("recover-as-new-group"); cfg.Raft.NewGroup && len(cfg.Raft.Peers) > 0 {
		return errors.New("--recover-as-new-group: the recovered node is the only voter of its group; drop --peers and add the other nodes with `raftmq member add`")
	}
	if cfg.Raft.DialOverrides, err = election.ParseDialOverrides(c.String("raft-dial")); err != nil {
		return fmt.Errorf("--raft-dial: %w", err)
	}
	if cfg.PeerDial, err = election.ParseDialOverrides(c.String("peer-dial")); err != nil {
		return fmt.Errorf("--peer-dial: %w", err)
	}
	if c.Bool("chaos-lazyfs") {
		os.Setenv("RAFTMQ_CHAOS_LAZYFS", "1")
	}
	if cfg.VerifyLog, err = server.ParseVerifyMode(c.String("verify-log")); err != nil {
		return err
	}
	if cfg.VerifyLogMBps = c.Int("verify-log-mbps"); cfg.VerifyLogMBps < 0 {
		return fmt.Errorf("--verify-log-mbps %d: want 0 (unpaced) or more", cfg.VerifyLogMBps)
	}
	if cfg.Durability.Mode, err = raftlog.ParseDurabilityMode(c.String("durability")); err != nil {
		return fmt.Errorf("--durability: %w", err)
	}
	cfg.Durability.SyncInterval, cfg.Durability.SyncBytes = c.Duration("sync-interval"), c.Int64("sync-bytes")
	if cfg.Durability.SyncInterval <= 0 {
		return fmt.Errorf("--sync-interval %s: want more than 0", cfg.Durability.SyncInterval)
	}
	if cfg.Durability.SyncBytes <= 0 {
		return fmt.Errorf("--sync-bytes %d: want more than 0", cfg.Durability.SyncBytes)
	}
	if cfg.Durability.Mode == raftlog.QuorumMemory && cfg.LogStore != raftlog.KindWAL {
		return fmt.Errorf("--durability %s: needs --log-store wal", cfg.Durability.Mode)
	}
	if cfg.LockTimeout = c.Duration("lock-timeout"); cfg.LockTimeout < 0 {
		return fmt.Errorf("--lock-timeout %s: want 0 (do not wait) or more", cfg.LockTimeout)
	}
	if cfg.SegmentMB = c.Int("segment-mb"); cfg.SegmentMB < 1 || cfg.SegmentMB > 2047 {
		return fmt.Errorf("--segment-mb %d: want 1 to 2047 (raft-wal's limit is 2 GiB)", cfg.SegmentMB)
	}
	if mb := c.Int("memory-limit-mb"); mb < 0 {
		return fmt.Errorf("--memory-limit-mb %d: want 0 (none) or more", mb)
	} else if mb > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(mb) << 20)
	}
	cfg.Raft.ID = c.String("id")
	cfg.Raft.BindAddr = c.String("raft")
	cfg.Raft.AdvertiseAddr = c.String("raft-advertise")
	if c.Bool("single") {
		addr := cfg.Raft.AdvertiseAddr
		if addr == "" {
			addr = cfg.Raft.BindAddr
		}
		cfg.Raft.Peers = []election.Peer{{ID: cfg.Raft.ID, Addr: addr}}
	}
	cfg.Raft.HeartbeatTimeout = c.Duration("heartbeat-timeout")
	cfg.Raft.ElectionTimeout = c.Duration("election-timeout")
	cfg.Raft.CommitTimeout = c.Duration("commit-timeout")
	cfg.Raft.SnapshotThreshold = c.Uint64("snapshot-threshold")
	cfg.Raft.LeaderLeaseTimeout = cfg.Raft.HeartbeatTimeout
	cfg.Broker.Group = c.String("broker-name")
	cfg.Broker.ClientAddr = c.String("advertise")
	if cfg.Broker.ClientAddr == "" {
		cfg.Broker.ClientAddr = cfg.Listen
	}
	cfg.Broker.PeerAddr = c.String("peer-advertise")
	cfg.ListenExternal = c.String("listen-external")
	cfg.Broker.ExternalAddr = c.String("advertise-external")
	if cfg.Broker.ExternalAddr != "" && cfg.ListenExternal == "" {
		return fmt.Errorf("--advertise-external %s: set --listen-external too, the address that listener binds", cfg.Broker.ExternalAddr)
	}
	if host, _, err := net.SplitHostPort(cfg.ListenExternal); cfg.ListenExternal != "" && err != nil {
		return fmt.Errorf("--listen-external %q: %w", cfg.ListenExternal, err)
	} else if ip := net.ParseIP(host); cfg.ListenExternal != "" && (host == "" || (ip != nil && ip.IsUnspecified())) && cfg.Broker.ExternalAddr == "" {
		return fmt.Errorf("--listen-external %s listens on every address, and clients would be told that: set --advertise-external HOST:PORT, the address they reach", cfg.ListenExternal)
	}
	cfg.Broker.HTTPAddr = c.String("http-advertise")
	if cfg.Broker.HTTPAddr == "" {
		cfg.Broker.HTTPAddr = cfg.HTTP
	}
	cfg.Broker.PreferredLeader = c.String("preferred-leader")
	cfg.Broker.AutoCreateTopics = c.Bool("auto-create-topics")
	cfg.Broker.DefaultQueues = c.Int("default-queues")
	cfg.Broker.MaxMessageBytes = c.Int("max-message-bytes")
	cfg.Broker.MaxRequestBytes = c.Int("max-request-bytes")
	cfg.Broker.MaxBatchBytes = c.Int("max-batch-bytes")
	cfg.Broker.MaxInflight = c.Int("max-inflight")
	cfg.Broker.MaxPendingBytes = c.Int("max-pending-mb") << 20
	cfg.Broker.ColdReadBytes = c.Uint64("cold-read-bytes")
	cfg.Broker.LoadThreshold = c.Float64("load-threshold")
	cfg.Broker.CPUBudget = c.Float64("cpu-budget")
	cfg.Broker.MaxFollowerLag = c.Uint64("max-follower-lag")
	cfg.Broker.RetentionAge = c.Duration("retention")
	cfg.Broker.RetentionBytes = int64(c.Int("retention-mb")) << 20
	cfg.Broker.RetentionCheck = c.Duration("retention-check")
	cfg.Broker.RetentionGrace = c.Duration("retention-grace")
	cfg.Broker.MaxDelay = c.Duration("max-delay")
	if cfg.Broker.RetentionAge < 0 || cfg.Broker.RetentionBytes < 0 {
		return fmt.Errorf("--retention %s, --retention-mb %d: want 0 (off) or more", cfg.Broker.RetentionAge, c.Int("retention-mb"))
	}
	boltNoRetention := false
	if cfg.LogStore != raftlog.KindWAL {
		if (c.IsSet("retention") && cfg.Broker.RetentionAge > 0) || cfg.Broker.RetentionBytes > 0 {
			return fmt.Errorf("--retention and --retention-mb delete whole raft-wal segments: they need --log-store wal")
		}
		boltNoRetention, cfg.Broker.RetentionAge = cfg.Broker.RetentionAge > 0, 0
	}
	if mb := int64(cfg.SegmentMB); cfg.Broker.RetentionBytes > 0 && cfg.Broker.RetentionBytes < 2*mb<<20 {
		return fmt.Errorf("--retention-mb %d: want at least two segments (2 x --segment-mb = %d)", c.Int("retention-mb"), 2*mb)
	}
	cfg.Remoting = c.String("remoting")
	cfg.RemotingConfig = brokerremoting.DefaultConfig()
	cfg.RemotingConfig.Addr = c.String("remoting-advertise")
	cfg.RemotingConfig.ExternalAddr = c.String("remoting-advertise-external")
	if cfg.RemotingConfig.ExternalAddr != "" && c.String("remoting") == "" {
		return fmt.Errorf("--remoting-advertise-external %s: set --remoting too", cfg.RemotingConfig.ExternalAddr)
	}
	cfg.RemotingConfig.Cluster = c.String("cluster")
	cfg.RemotingConfig.WriteViaFollowers = c.Bool("remoting-write-via-followers")
	cfg.RemotingConfig.ReadsOnFollowers = c.Bool("remoting-reads-on-followers")
	if cfg.RemotingConfig.RegisterPeriod = c.Duration("register-period"); cfg.RemotingConfig.RegisterPeriod <= 0 {
		return fmt.Errorf("--register-period %s: want > 0", cfg.RemotingConfig.RegisterPeriod)
	}
	cfg.RemotingConfig.NameServers = namesrv.SplitAddrs(c.String("namesrv"))
	cfg.RemotingConfig.TxnTimeout, cfg.RemotingConfig.TxnCheckInterval = c.Duration("txn-timeout"), c.Duration("txn-check-interval")
	cfg.RemotingConfig.TxnCheckMax = c.Int("txn-check-max")
	if cfg.RemotingConfig.TxnTimeout <= 0 || cfg.RemotingConfig.TxnCheckInterval <= 0 || cfg.RemotingConfig.TxnCheckMax <= 0 {
		return fmt.Errorf("--txn-timeout %s, --txn-check-interval %s, --txn-check-max %d: want each > 0",
			cfg.RemotingConfig.TxnTimeout, cfg.RemotingConfig.TxnCheckInterval, cfg.RemotingConfig.TxnCheckMax)
	}
	if host, _, err := net.SplitHostPort(cfg.Remoting); cfg.Remoting != "" && err != nil {
		return fmt.Errorf("--remoting %q: %w", cfg.Remoting, err)
	} else if ip := net.ParseIP(host); cfg.Remoting != "" && (host == "" || (ip != nil && ip.IsUnspecified())) && cfg.RemotingConfig.Addr == "" {
		return fmt.Errorf("--remoting %s listens on every address, and the name servers would hand that to clients: set --remoting-advertise HOST:PORT, the address RocketMQ clients reach", cfg.Remoting)
	}
	if cfg.Remoting == "" && c.IsSet("remoting-advertise") {
		return fmt.Errorf("--remoting-advertise %s: set --remoting too", c.String("remoting-advertise"))
	}
	mode, err := tlsconf.ParseMode(c.String("tls-mode"))
	if err != nil {
		return err
	}
	cfg.TLS = tlsconf.Config{Mode: mode, CertFile: c.String("tls-cert"), KeyFile: c.String("tls-key"), CAFile: c.String("tls-ca"),
		ReloadEvery: c.Duration("tls-reload")}
	if cfg.TLS.ReloadEvery == 0 {
		cfg.TLS.ReloadEvery = -1 // SIGHUP only
	}
	if err := cfg.TLS.Validate(); err != nil {
		return err
	}
	authMode, err := acl.ParseMode(c.String("auth"))
	if err != nil {
		return fmt.Errorf("--auth: %w", err)
	}
	cfg.Auth = server.AuthConfig{Mode: authMode, KeyFile: c.String("auth-key-file"), AdminUser: c.String("auth-admin-user"),
		AdminSecretFile: c.String("auth-admin-secret-file")}
	if err := cfg.Auth.Validate(); err != nil {
		return err
	}
	if cfg.Logger, err = newLogger(c, cfg.Raft.ID); err != nil {
		return err
	}
	if boltNoRetention {
		cfg.Logger.Warn("retention is off: it deletes whole raft-wal segments, and --log-store bolt has none; messages are kept until the disk is full")
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP) // before Start: a SIGHUP must never kill a node
	defer signal.Stop(hup)
	s, err := server.Start(cfg)
	if err != nil {
		return err
	}
wait:
	for {
		select {
		case <-hup:
			cfg.Logger.Info("SIGHUP: reloading the TLS certificate, key and CA")
			s.ReloadTLS() // logs the outcome; a broken file keeps the old ones
		case <-c.Context.Done():
			break wait
		}
	}
	cfg.Logger.Info("signal received: stopping (a leader hands over leadership first)")
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		fmt.Fprintln(os.Stderr, "raftmq: shutdown took longer than 15s; exiting")
		return nil
	}
}
