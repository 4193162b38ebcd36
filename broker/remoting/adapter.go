package remoting

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/broker/grpcapi"
	"github.com/raftmq/raftmq/namesrv"
	rmq "github.com/raftmq/raftmq/remoting"
)

// Config of the remoting face of a node.
type Config struct {
	// Addr is this node's remoting address as clients reach it; it is what
	// the node registers with the name servers (brokerAddr). ExternalAddr,
	// when set, is the address clients outside the nodes' network reach
	// (a published port); it is registered too, and a name server's
	// external listener hands it out instead of Addr.
	Addr         string
	ExternalAddr string
	// RegisterOnly: the adapter is not served (no remoting port); it only
	// registers the node with the name servers, for raftmq's SDK and CLI.
	// Addr is then the node's client API address (the registration's key)
	// and RocketMQ routes leave the node out.
	RegisterOnly bool
	Cluster      string   // RocketMQ clusterName
	NameServers  []string // registered with, each independently
	// RegisterPeriod: registrations are renewed this often (RocketMQ: 30 s)
	// and sent at once when this node's brokerId changes.
	RegisterPeriod time.Duration
	// ConsumerExpiry drops a client from its consumer groups when it has
	// not sent a heartbeat for this long (RocketMQ: 120 s); a closed
	// connection drops it at once.
	ConsumerExpiry time.Duration
	// MaxPullWait bounds how long a long-polling pull is held (the Go
	// client asks for 20 s with a 30 s timeout).
	MaxPullWait time.Duration
	// WriteViaFollowers: while a follower, this node registers as a
	// write-only pseudo-broker of the group's topics too (namesrv,
	// WritePath), so RocketMQ producers spread sends over the leader and
	// the followers (which forward them) and, when the leader dies, keep
	// sending through the followers without waiting for their next route
	// poll (up to 30 s). The cost is the forwarding hop on the sends that
	// go through a follower.
	WriteViaFollowers bool
	// TxnTimeout: a half message undecided this long (or its
	// CHECK_IMMUNITY_TIME_IN_SECONDS) is checked back with its producer
	// group; TxnCheckInterval spaces the checks of one half message;
	// after TxnCheckMax checks it is discarded (txncheck.go).
	TxnTimeout       time.Duration
	TxnCheckInterval time.Duration
	TxnCheckMax      int
	// ReadsOnFollowers: consumers read from followers whenever one has
	// the data: one that has read everything is held (long-polled) by a
	// follower, one behind the tail is served by a follower that has
	// applied what it reads next, and the leader keeps a consumer only
	// when no follower qualifies (route.Input.ReadsOnFollowers).
	// RocketMQ's clients do not fail a request whose connection closed,
	// so a pull in flight to a leader that is killed stalls its queue for
	// the client's 30 s pull timeout; on a follower, the queue goes on as
	// soon as a new leader commits.
	ReadsOnFollowers bool
	// Auth authenticates and authorizes every request before it is served
	// (authz.go); nil: nothing is checked.
	Auth *auth.Authorizer
	// NodeSecret, when set (the node has an --auth-key-file), signs the
	// node's registrations and its questions to the name servers with the
	// node credential (namesrv.SignNodeRequest); Users then returns the
	// group's users with their sealed secrets, registered along so that a
	// name server with the same key verifies clients' signatures.
	NodeSecret []byte
	Users      func() []namesrv.User
	// NameServerDial, when set, connects to a name server (the node's
	// TLS: registrations and route questions go over TLS as the node's
	// other calls do); nil: plain TCP.
	NameServerDial func(ctx context.Context, addr string) (net.Conn, error)
	Logger         hclog.Logger
}

// DefaultConfig returns RocketMQ's periods.
func DefaultConfig() Config {
	return Config{Cluster: "DefaultCluster", RegisterPeriod: 30 * time.Second, ConsumerExpiry: 120 * time.Second, MaxPullWait: 15 * time.Second,
		WriteViaFollowers: true, ReadsOnFollowers: true, TxnTimeout: DefaultTxnTimeout, TxnCheckInterval: DefaultTxnCheckInterval, TxnCheckMax: DefaultTxnCheckMax}
}

// Adapter is the remoting face of one broker node.
type Adapter struct {
	cfg       Config
	log       hclog.Logger
	b         *broker.Broker
	peers     *grpcapi.Peers
	srv       *rmq.Server
	store     netip.AddrPort
	consumers *clients
	producers *clients // for the check-back (txncheck.go) and replies (reply.go)
	notify    *notifier
	reg       *registrar
	commits   *committer
	runtime   *runtimeStats // GET_BROKER_RUNTIME_INFO's counters (runtime.go)
	retryMu   sync.Mutex
	retryMade map[string]bool // retry topics this node has seen created

	// requesters binds the client id of a request (REPLY_TO_CLIENT) to
	// the connection that sent it, for its reply (reply.go).
	requesters *clients

	requests    *prometheus.CounterVec
	connsClosed *prometheus.CounterVec
	undecodable prometheus.Counter
	replies     *prometheus.CounterVec // by how they went (reply.go)
	notified    prometheus.Counter     // NOTIFY_CONSUMER_IDS_CHANGED sent (notify.go)

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New returns the adapter of b; peers forwards to the leader.
func New(cfg Config, b *broker.Broker, peers *grpcapi.Peers) (*Adapter, error) {
	d := DefaultConfig()
	if cfg.Addr == "" {
		return nil, errors.New("remoting address: empty")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("remoting address %q: %w", cfg.Addr, err)
	}
	if _, _, err := net.SplitHostPort(cfg.ExternalAddr); cfg.ExternalAddr != "" && err != nil {
		return nil, fmt.Errorf("external remoting address %q: %w", cfg.ExternalAddr, err)
	}
	if cfg.Cluster == "" {
		cfg.Cluster = d.Cluster
	}
	if cfg.RegisterPeriod <= 0 {
		cfg.RegisterPeriod = d.RegisterPeriod
	}
	if cfg.ConsumerExpiry <= 0 {
		cfg.ConsumerExpiry = d.ConsumerExpiry
	}
	if cfg.MaxPullWait <= 0 {
		cfg.MaxPullWait = d.MaxPullWait
	}
	if cfg.TxnTimeout <= 0 {
		cfg.TxnTimeout = d.TxnTimeout
	}
	if cfg.TxnCheckInterval <= 0 {
		cfg.TxnCheckInterval = d.TxnCheckInterval
	}
	if cfg.TxnCheckMax <= 0 {
		cfg.TxnCheckMax = d.TxnCheckMax
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	a := &Adapter{cfg: cfg, log: cfg.Logger, b: b, peers: peers, stop: make(chan struct{}), retryMade: map[string]bool{}}
	a.store = storeHost(a.storeAddr())
	a.consumers = newClients(cfg.ConsumerExpiry)
	a.producers = newClients(cfg.ConsumerExpiry)
	a.notify = newNotifier()
	a.requesters = newClients(cfg.ConsumerExpiry)
	a.consumers.changed = a.notify.changed
	a.commits = newCommitter(a)
	a.runtime = newRuntimeStats()
	a.reg = newRegistrar(a)
	a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_remoting_requests_total",
		Help: "RocketMQ remoting requests served, by request code and response code."}, []string{"request", "response"})
	a.connsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_remoting_connections_closed_total",
		Help: "RocketMQ remoting connections closed, by reason: client_closed, cut_short (closed within a frame), frame_length (a frame that cannot be delimited), read_error, write_error, server_closed."},
		[]string{"reason"})
	a.undecodable = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_remoting_undecodable_frames_total",
		Help: "RocketMQ remoting frames whose header did not decode; answered SYSTEM_ERROR when their opaque could be read, the connection kept."})
	a.replies = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_remoting_replies_total",
		Help: "Request-reply replies (SEND_REPLY_MESSAGE), by result: pushed (on this node's connection to the requester), via_peer (another node of the group pushed it), not_found (no node holds the requester's connection), failed (the push failed)."},
		[]string{"result"})
	a.notified = prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_remoting_consumer_ids_changed_sent_total",
		Help: "NOTIFY_CONSUMER_IDS_CHANGED requests sent to consumer connections on this node."})
	for _, c := range []prometheus.Collector{a.requests, a.connsClosed, a.undecodable, a.replies, a.notified} {
		if err := b.Registry().Register(c); err != nil {
			return nil, fmt.Errorf("remoting metrics: %w", err)
		}
	}
	// A push consumer pulls every queue it owns on one connection, each
	// pull held up to MaxPullWait: room for many queues.
	a.srv = rmq.NewServer(rmq.ServerConfig{Handler: a.handle, Logger: a.log.Named("conn"), MaxFrame: rmq.MaxFrame, MaxInflight: 1024,
		OnClose:       func(reason string) { a.connsClosed.WithLabelValues(reason).Inc() },
		OnUndecodable: a.undecodable.Inc})
	if err := b.Registry().Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_remoting_connections",
		Help: "Open RocketMQ remoting connections."}, func() float64 { return float64(a.srv.Conns()) })); err != nil {
		return nil, fmt.Errorf("remoting metrics: %w", err)
	}
	a.goFunc(a.commits.loop)
	a.goFunc(a.reg.loop)
	a.goFunc(a.txnCheckLoop)
	a.goFunc(a.notifyLoop)
	a.goFunc(a.sampleLoop)
	return a, nil
}

// storeHost is the address written into pulled messages (and so into their
// offsetMsgId): this node's remoting address, or loopback with its port
// when the address is a name.
// storeAddr is the remoting address message ids and replies name as their
// store host: the external one when there is one (RocketMQ's admin tools
// that decode a message id run where its clients do, as the published
// address was all a node had before), else Addr.
func (a *Adapter) storeAddr() string {
	if a.cfg.ExternalAddr != "" {
		return a.cfg.ExternalAddr
	}
	return a.cfg.Addr
}

func storeHost(addr string) netip.AddrPort {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap
	}
	_, p, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(p)
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port))
}

func (a *Adapter) goFunc(f func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
}

// Serve serves the protocol on l until Close.
func (a *Adapter) Serve(l net.Listener) error { return a.srv.Serve(l) }

// RoleChanged makes the registrar look at this node's role now, not at its
// next period.
func (a *Adapter) RoleChanged() { a.reg.kickNow() }

// Close stops serving, unregisters from the name servers and stops the
// adapter's goroutines. It is idempotent.
func (a *Adapter) Close() error {
	a.once.Do(func() {
		a.srv.Close()
		close(a.stop)
		a.wg.Wait()
		a.reg.unregister()
		a.reg.cl.Close()
	})
	return nil
}

func (a *Adapter) handle(ctx context.Context, conn *rmq.Conn, req *rmq.Command) *rmq.Command {
	resp := a.authorize(conn, req)
	if resp == nil {
		resp = a.dispatch(ctx, conn, req)
	}
	code := "none"
	if resp != nil {
		code = strconv.Itoa(int(resp.Code))
	}
	a.requests.WithLabelValues(strconv.Itoa(int(req.Code)), code).Inc()
	return resp
}

func (a *Adapter) dispatch(ctx context.Context, conn *rmq.Conn, req *rmq.Command) *rmq.Command {
	switch req.Code {
	case rmq.SendMessage, rmq.SendMessageV2, rmq.SendBatchMessage:
		return a.send(ctx, conn, req)
	case rmq.PullMessage, rmq.LitePullMessage:
		// LITE_PULL_MESSAGE (the Java 5.x lite pull consumer) has PULL's
		// header and answer; RocketMQ serves both with PullMessageProcessor.
		return a.pull(ctx, req)
	case rmq.SendReplyMessage, rmq.SendReplyMessageV2:
		return a.sendReply(ctx, conn, req)
	case rmq.EndTransaction:
		return a.endTransaction(ctx, req)
	case rmq.CheckClientConfig:
		return a.checkClientConfig(req)
	case rmq.GetEarliestMsgStoreTime:
		return a.earliestStoreTime(ctx, req)
	case rmq.HeartBeat:
		return a.heartbeat(ctx, conn, req)
	case rmq.UnregisterClient:
		a.consumers.unregister(req.Ext["clientID"])
		return rmq.Response(req, rmq.Success, "")
	case rmq.GetConsumerListByGroup:
		return a.consumerList(req)
	case rmq.QueryConsumerOffset:
		return a.queryOffset(req)
	case rmq.UpdateConsumerOffset:
		return a.updateOffset(ctx, req)
	case rmq.GetMaxOffset, rmq.GetMinOffset:
		return a.queueEnd(req)
	case rmq.SearchOffsetByTimestamp:
		return a.searchOffset(ctx, req)
	case rmq.UpdateAndCreateTopic:
		return a.createTopic(ctx, req)
	case rmq.DeleteTopicInBroker:
		return a.deleteTopic(ctx, req)
	case rmq.UpdateAndCreateSubscriptionGroup:
		return a.updateGroup(ctx, req)
	case rmq.GetAllSubscriptionGroupConfig:
		return a.allGroups(ctx, req)
	case rmq.DeleteSubscriptionGroup:
		return a.deleteGroup(ctx, req)
	case rmq.GetAllTopicConfig:
		return a.allTopicConfigs(req)
	case rmq.GetTopicStatsInfo:
		return a.topicStats(ctx, req)
	case rmq.GetConsumeStats:
		return a.consumeStats(ctx, req)
	case rmq.GetConsumerConnectionList:
		return a.consumerConnections(req)
	case rmq.GetProducerConnectionList:
		return a.producerConnections(req)
	case rmq.QueryTopicConsumeByWho:
		return a.topicConsumers(req)
	case rmq.GetBrokerRuntimeInfo:
		return a.runtimeInfo(req)
	case rmq.InvokeBrokerToResetOffset:
		return a.resetOffset(ctx, req)
	case rmq.GetConsumerRunningInfo:
		return a.consumerRunningInfo(ctx, req)
	case rmq.GetBrokerConfig:
		return a.brokerConfig(req)
	case rmq.UpdateBrokerConfig:
		return a.updateBrokerConfig(req)
	case rmq.GetRouteInfoByTopic:
		return a.route(ctx, req)
	case rmq.QueryMessage:
		return a.queryMessage(req)
	case rmq.ViewMessageByID:
		return a.viewMessage(ctx, req)
	case rmq.ConsumerSendMsgBack:
		return a.sendBack(ctx, req)
	case rmq.LockBatchMQ:
		return a.lockBatch(ctx, req)
	case rmq.UnlockBatchMQ:
		return a.unlockBatch(ctx, req)
	}
	return rmq.Response(req, rmq.RequestCodeNotSupported, fmt.Sprintf("request code %s is not supported by this broker (raftmq); docs/rocketmq.md lists the codes served", rmq.DescribeCode(req.Code)))
}

// forward runs call on the leader named by err when err is a NotLeader
// error naming one; otherwise it returns err. When that leader cannot be
// reached (it died and this node has not noticed yet, or it is not ready),
// forward waits within ctx for the group to have a leader again
// (awaitOtherLeader) and runs call there; when this node leads by then it
// returns errLeadsNow, on which onLeader runs the call here.
func (a *Adapter) forward(ctx context.Context, err error, call func(ctx context.Context, addr string) error) error {
	for {
		var nl *broker.NotLeaderError
		if !errors.As(err, &nl) || nl.PeerAddr == "" || nl.LeaderID == a.b.ID() {
			return err
		}
		ferr := a.callLeader(ctx, nl.LeaderID, nl.PeerAddr, call)
		if ferr == nil || !leaderUnreachable(ferr) {
			return ferr
		}
		a.log.Debug("leader unreachable; waiting for a leader", "leader", nl.LeaderID, "error", ferr)
		next := a.awaitOtherLeader(ctx, nl.LeaderID)
		if next == nil {
			return ferr
		}
		err = next
	}
}

// callLeader runs call on leader at addr, and gives it up as unreachable
// when this node learns of another leader meanwhile (grpcapi.CallLeader).
func (a *Adapter) callLeader(ctx context.Context, leader, addr string, call func(ctx context.Context, addr string) error) error {
	return grpcapi.CallLeader(ctx, a.b, leader, func(ctx context.Context) error { return call(ctx, addr) })
}

// errLeadsNow: while a call waited for a new leader, this node became it.
// It is ErrUnavailable (SERVICE_NOT_AVAILABLE, retried by clients) for a
// caller that does not run the call again here (onLeader does).
var errLeadsNow = fmt.Errorf("%w: this node became the leader while the call waited for one", broker.ErrUnavailable)

// leaderUnreachable reports whether a forwarded call failed without
// reaching a ready leader: the connection refused or lost, or the leader
// not ready (gRPC Unavailable), or no connection to it.
func leaderUnreachable(err error) bool {
	return status.Code(err) == codes.Unavailable || errors.Is(err, broker.ErrUnavailable)
}

// retryForwardEvery spaces the forwards to a leader that was unreachable
// while this node still names it (a blip, or a leader that is not ready).
const retryForwardEvery = 200 * time.Millisecond

// awaitOtherLeader waits until this node knows a leader other than dead, or
// dead again after retryForwardEvery (it may have been a blip), and
// returns the error naming it (errLeadsNow when this node leads and is
// ready); nil when ctx ends first. The broker's leader-only calls wait for
// an election themselves (up to 3 s each); ListTopics is the cheapest.
func (a *Adapter) awaitOtherLeader(ctx context.Context, dead string) error {
	since := time.Now()
	for {
		_, err := a.b.ListTopics(ctx)
		var nl *broker.NotLeaderError
		switch {
		case err == nil:
			return errLeadsNow
		case errors.As(err, &nl) && nl.LeaderID != "" && nl.PeerAddr != "" && (nl.LeaderID != dead || time.Since(since) >= retryForwardEvery):
			return nl
		case errors.Is(err, broker.ErrShutdown):
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// onLeader runs local here and, when another node leads, call on it
// (forward); when this node became the leader while forward waited for
// one, it runs local again.
func (a *Adapter) onLeader(ctx context.Context, local func(ctx context.Context) error, call func(ctx context.Context, addr string) error) error {
	err := a.forward(ctx, local(ctx), call)
	for i := 0; i < 3 && errors.Is(err, errLeadsNow) && ctx.Err() == nil; i++ {
		err = a.forward(ctx, local(ctx), call)
	}
	return err
}

// forwardAPI is forward with the leader's client API: call gets a client of
// it (a leader this node cannot reach is ErrUnavailable).
func (a *Adapter) forwardAPI(ctx context.Context, err error, call func(ctx context.Context, c api.BrokerClient) error) error {
	return a.forward(ctx, err, func(ctx context.Context, addr string) error {
		cc, cerr := a.peers.Conn(addr)
		if cerr != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, cerr)
		}
		return call(ctx, api.NewBrokerClient(cc))
	})
}
