package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/remoting"
)

// Ext fields raftmq adds to REGISTER_BROKER (RocketMQ's brokers do not
// send them; a registration without a term counts as term 0).
const (
	ExtNodeID = "raftmqNodeId"
	ExtTerm   = "raftmqTerm"
	// ExtWriteVia "true": the node, while a follower, takes its group's
	// sends and is routed as a write-only pseudo-broker too.
	ExtWriteVia = "raftmqWriteVia"
	// ExtLive (a leader's registration): the followers it heard from
	// lately, comma-separated; only their write paths are routed.
	ExtLive = "raftmqLive"
	// ExtClientAddr is the node's raftmq client API (gRPC) address.
	ExtClientAddr = "raftmqClientAddr"
	// ExtMembers is the group's membership, "id@raftaddr,..." sorted: the
	// identity that tells two groups of one brokerName apart.
	ExtMembers = "raftmqMembers"
	// ExtExternalAddr and ExtExternalClientAddr are the node's remoting
	// and client API addresses for clients outside its network (published
	// ports): what the name server's external listener hands out.
	ExtExternalAddr       = "raftmqExternalAddr"
	ExtExternalClientAddr = "raftmqExternalClientAddr"
	// ExtNoRemoting "true": the node serves no remoting port; its
	// brokerAddr is only its registration's key (its client API address),
	// and RocketMQ routes leave it out. raftmq's SDK and CLI reach it
	// through raftmqClientAddr.
	ExtNoRemoting = "raftmqNoRemoting"
)

// ErrNameTaken: a registration claims a brokerName that another live
// group holds (another cluster, or other Raft members). The name server
// refuses it with a response remark that starts with this error's text.
var ErrNameTaken = errors.New("brokerName taken")

// DefaultExpiry is RocketMQ's BROKER_CHANNEL_EXPIRED_TIME.
const DefaultExpiry = 120 * time.Second

// Config of a name server.
type Config struct {
	Listen string // remoting address, RocketMQ's 9876
	// ListenExternal, when set, is a second remoting listener for clients
	// outside the nodes' network: its routes name the nodes' external
	// addresses (a node that registered none: its address). The routes of
	// Listen name the addresses nodes registered as brokerAddr and
	// raftmqClientAddr.
	ListenExternal string
	HTTP           string // /metrics and /healthz; "" disables
	Expiry         time.Duration
	// Auth is what the name server does with requests that do not
	// authenticate (auth.go): registrations need the node credential,
	// every other request a user's signature or the node credential.
	// Sealer (from the nodes' --auth-key-file) is required unless Auth is
	// acl.Disabled; Throttle bounds bad signatures per client address.
	Auth     acl.Mode
	Sealer   *acl.Sealer
	Throttle acl.ThrottleConfig
	// TLS serves both remoting listeners with TLS as a node's remoting
	// port does (permissive: TLS and plaintext; enforcing: TLS only); nil
	// or disabled: plaintext. A client certificate is verified when given,
	// never required (RocketMQ clients present none).
	TLS    *tlsconf.Node
	Logger hclog.Logger
}

// DefaultConfig listens on :9876 with RocketMQ's expiry.
func DefaultConfig() Config { return Config{Listen: ":9876", Expiry: DefaultExpiry} }

// Validate names the first bad field.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("listen: empty")
	case c.Expiry <= 0:
		return fmt.Errorf("expiry %s: want > 0", c.Expiry)
	case c.Auth != acl.Disabled && c.Sealer == nil:
		return fmt.Errorf("auth %s: needs the nodes' auth key (--auth-key-file): it verifies their registrations and opens the users' sealed secrets", c.Auth)
	}
	return nil
}

// Server is a running name server.
type Server struct {
	cfg Config
	log hclog.Logger
	reg *registry
	// guard authenticates requests unless cfg.Auth is acl.Disabled.
	guard *guard
	srv   *remoting.Server
	lis   net.Listener
	// srvExt and lisExt: the external listener (nil without one).
	srvExt *remoting.Server
	lisExt net.Listener
	http   *http.Server
	wg     sync.WaitGroup
	once   sync.Once

	refusedMu sync.Mutex
	refused   map[string]string // broker address -> the reason it was last refused, to log changes only

	requests *prometheus.CounterVec
	promReg  *prometheus.Registry
}

// Start listens and serves until Close.
func Start(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	s := &Server{cfg: cfg, log: cfg.Logger, reg: newRegistry(cfg.Expiry), promReg: prometheus.NewRegistry(), refused: map[string]string{}}
	s.guard = newGuard(cfg, s.log.Named("auth"))
	s.promReg.MustRegister(s.guard.collectors()...)
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_namesrv_requests_total", Help: "Remoting requests by code."}, []string{"code"})
	s.promReg.MustRegister(s.requests, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_namesrv_registrations", Help: "Live broker registrations."},
		func() float64 { return float64(s.reg.count()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_namesrv_groups", Help: "Groups with a live registration."},
			func() float64 { return float64(len(s.reg.groups(false))) }))
	var err error
	if s.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("name server listen on %s: %w", cfg.Listen, err)
	}
	s.lis = s.secure(s.lis)
	closed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_namesrv_connections_closed_total",
		Help: "Remoting connections closed, by reason (remoting.Close*)."}, []string{"reason"})
	undecodable := prometheus.NewCounter(prometheus.CounterOpts{Name: "raftmq_namesrv_undecodable_frames_total",
		Help: "Frames whose header did not decode; the connection is kept."})
	s.promReg.MustRegister(closed, undecodable)
	serve := func(external bool, lis net.Listener) *remoting.Server {
		srv := remoting.NewServer(remoting.ServerConfig{
			Handler: func(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
				return s.handle(ctx, external, c.Remote, req)
			},
			Logger: s.log.Named("remoting"), MaxFrame: remoting.MaxFrame,
			OnClose: func(reason string) { closed.WithLabelValues(reason).Inc() }, OnUndecodable: undecodable.Inc})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := srv.Serve(lis); err != nil {
				s.log.Error("name server", "external", external, "error", err)
			}
		}()
		return srv
	}
	s.srv = serve(false, s.lis)
	if cfg.ListenExternal != "" {
		if s.lisExt, err = net.Listen("tcp", cfg.ListenExternal); err != nil {
			s.Close()
			return nil, fmt.Errorf("name server external listen on %s: %w", cfg.ListenExternal, err)
		}
		s.lisExt = s.secure(s.lisExt)
		s.srvExt = serve(true, s.lisExt)
	}
	if cfg.HTTP != "" {
		hl, err := net.Listen("tcp", cfg.HTTP)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("http listen on %s: %w", cfg.HTTP, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(s.promReg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
		s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.http.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("http server", "error", err)
			}
		}()
	}
	ext := ""
	if s.lisExt != nil {
		ext = s.lisExt.Addr().String()
	}
	s.log.Info("name server started", "listen", s.lis.Addr().String(), "listen_external", ext, "http", cfg.HTTP, "expiry", cfg.Expiry, "auth", cfg.Auth, "tls", cfg.TLS.Mode())
	return s, nil
}

// secure wraps a remoting listener with the configured TLS.
func (s *Server) secure(l net.Listener) net.Listener {
	if !s.cfg.TLS.On() {
		return l
	}
	return s.cfg.TLS.Listen(l, false)
}

// Addr is the remoting address the server listens on.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ExternalAddr is the external listener's address ("" without one).
func (s *Server) ExternalAddr() string {
	if s.lisExt == nil {
		return ""
	}
	return s.lisExt.Addr().String()
}

// Groups is every group's route now, with the addresses the internal
// listener hands out.
func (s *Server) Groups() map[string]*GroupRoute { return s.reg.groups(false) }

// Close stops the server; it is idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		if s.srv != nil {
			s.srv.Close()
		}
		if s.srvExt != nil {
			s.srvExt.Close()
		}
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			s.http.Shutdown(ctx)
			cancel()
		}
		s.wg.Wait()
	})
	return nil
}

// handle answers one request from the client at from; external: it came
// through the external listener, and routes name the nodes' external
// addresses.
func (s *Server) handle(ctx context.Context, external bool, from string, req *remoting.Command) *remoting.Command {
	s.requests.WithLabelValues(strconv.Itoa(int(req.Code))).Inc()
	verified := false
	if s.guard.mode != acl.Disabled {
		var d *denied
		if req.Code == remoting.RegisterBroker || req.Code == remoting.UnregisterBroker {
			d = s.guard.registration(req)
			verified = d == nil
		} else {
			d = s.guard.client(req, from, s.reg.sealed)
		}
		if s.guard.report(d, req, from) {
			if req.Code == remoting.RegisterBroker {
				s.noteRefusal(req.Ext["brokerAddr"]+" from "+acl.AddrHost(from), d.msg)
			}
			return remoting.Response(req, remoting.NoPermission, d.msg)
		}
	}
	switch req.Code {
	case remoting.RegisterBroker:
		return s.register(req, verified)
	case remoting.UnregisterBroker:
		s.reg.remove(req.Ext["brokerAddr"])
		return remoting.Response(req, remoting.Success, "")
	case remoting.GetRouteInfoByTopic:
		return s.route(req, external)
	case remoting.GetBrokerClusterInfo:
		return s.clusterInfo(req, external)
	case remoting.GetAllTopicListFromNS:
		return s.topicList(req)
	case remoting.DeleteTopicInNamesrv:
		return s.deleteTopic(req)
	case remoting.GetTopicsByCluster:
		return s.clusterTopics(req, external)
	case remoting.GetSystemTopicListFromNS:
		return s.systemTopics(req, external)
	case remoting.GetKVConfig:
		// RocketMQ's answer for a key it does not hold
		// (DefaultRequestProcessor.getKVConfig): raftmq's name server
		// holds none.
		return remoting.Response(req, remoting.QueryNotFound, fmt.Sprintf("No config item, Namespace: %s Key: %s", req.Ext["namespace"], req.Ext["key"]))
	case remoting.PutKVConfig, remoting.DeleteKVConfig:
		return remoting.Response(req, remoting.SystemError, fmt.Sprintf("request code %s: raftmq's name server keeps no KV config "+
			"(RocketMQ keeps ORDER_TOPIC_CONFIG there; raftmq orders by queue without it)", remoting.DescribeCode(req.Code)))
	case remoting.GetNamesrvConfig:
		return s.config(req)
	case remoting.UpdateNamesrvConfig:
		return remoting.Response(req, remoting.SystemError, "update name server config: raftmq's name server changes no setting at run time: "+
			"set its flags (raftmq namesrv --help) and restart it")
	}
	return remoting.Response(req, remoting.RequestCodeNotSupported, fmt.Sprintf("request code %s is not supported by raftmq's name server", remoting.DescribeCode(req.Code)))
}

// RegisterBody is REGISTER_BROKER's body (RocketMQ's RegisterBrokerBody,
// the parts raftmq uses).
type RegisterBody struct {
	TopicConfigSerializeWrapper struct {
		TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
	} `json:"topicConfigSerializeWrapper"`
	FilterServerList []string `json:"filterServerList"`
	// RaftmqUsers are the group's users, their secrets sealed under the
	// group's auth key: what a name server with the same key verifies
	// clients' signatures against. Taken only from a registration signed
	// with the node credential.
	RaftmqUsers []User `json:"raftmqUsers,omitempty"`
}

// TopicConfig is one topic of a registration.
type TopicConfig struct {
	TopicName      string `json:"topicName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
}

// register admits a registration; verified: it carries the node
// credential, and the users it carries are taken.
func (s *Server) register(req *remoting.Command, verified bool) *remoting.Command {
	reg := Registration{Cluster: req.Ext["clusterName"], Group: req.Ext["brokerName"], Addr: req.Ext["brokerAddr"], NodeID: req.Ext[ExtNodeID],
		ClientAddr: req.Ext[ExtClientAddr], Members: SplitMembers(req.Ext[ExtMembers]),
		ExternalAddr: req.Ext[ExtExternalAddr], ExternalClientAddr: req.Ext[ExtExternalClientAddr],
		NoRemoting: req.Ext[ExtNoRemoting] == "true",
		WriteVia:   req.Ext[ExtWriteVia] == "true"}
	if live, ok := req.Ext[ExtLive]; ok {
		reg.LiveKnown, reg.Live = true, SplitList(live)
	}
	if reg.Group == "" || reg.Addr == "" {
		return remoting.Response(req, remoting.SystemError, "register broker: brokerName and brokerAddr are required")
	}
	if reg.NoRemoting && reg.ClientAddr == "" {
		return remoting.Response(req, remoting.SystemError, fmt.Sprintf("register broker: %s without %s: nothing to route clients to", ExtNoRemoting, ExtClientAddr))
	}
	if strings.Contains(reg.Group, pseudoSep) {
		// The write paths' brokerNames are <group>~<node>: a group named
		// so could be taken for one.
		return remoting.Response(req, remoting.SystemError, fmt.Sprintf("register broker: brokerName %q: %q is reserved for the followers' write paths", reg.Group, pseudoSep))
	}
	if _, _, err := net.SplitHostPort(reg.Addr); err != nil {
		return remoting.Response(req, remoting.SystemError, fmt.Sprintf("register broker: brokerAddr %q: %v", reg.Addr, err))
	}
	if reg.ExternalAddr != "" {
		if _, _, err := net.SplitHostPort(reg.ExternalAddr); err != nil {
			return remoting.Response(req, remoting.SystemError, fmt.Sprintf("register broker: %s %q: %v", ExtExternalAddr, reg.ExternalAddr, err))
		}
	}
	id, err := req.ExtInt("brokerId", 0)
	if err != nil || id < 0 {
		return remoting.Response(req, remoting.SystemError, fmt.Sprintf("register broker: brokerId %q", req.Ext["brokerId"]))
	}
	reg.BrokerID = id
	if t, err := strconv.ParseUint(req.Ext[ExtTerm], 10, 64); err == nil {
		reg.Term = t
	}
	reg.Topics = map[string]int{}
	if len(req.Body) > 0 {
		var body RegisterBody
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return remoting.Response(req, remoting.SystemError, fmt.Sprintf("register broker: body: %v", err))
		}
		for name, tc := range body.TopicConfigSerializeWrapper.TopicConfigTable {
			if tc.TopicName == "" {
				tc.TopicName = name
			}
			reg.Topics[tc.TopicName] = max(tc.ReadQueueNums, tc.WriteQueueNums)
			if tc.Perm != 0 && tc.Perm != PermReadWrite {
				if reg.Perms == nil {
					reg.Perms = map[string]int{}
				}
				reg.Perms[tc.TopicName] = tc.Perm
			}
		}
		if verified {
			reg.Users = body.RaftmqUsers
		}
	}
	if err := s.reg.admit(reg); err != nil {
		s.noteRefusal(reg.Addr, err.Error())
		return remoting.Response(req, remoting.SystemError, err.Error())
	}
	s.noteRefusal(reg.Addr, "")
	s.log.Debug("broker registered", "group", reg.Group, "addr", reg.Addr, "broker_id", reg.BrokerID, "node", reg.NodeID, "term", reg.Term, "topics", len(reg.Topics))
	resp := remoting.Response(req, remoting.Success, "")
	if gr := s.reg.groups(false)[reg.Group]; gr != nil {
		resp.Ext["masterAddr"] = gr.Addrs[0]
	}
	resp.Ext["haServerAddr"] = ""
	return resp
}

// maxRefusedKept bounds the refused registrations remembered (their
// addresses are the sender's to choose).
const maxRefusedKept = 4096

// noteRefusal logs a refusal of the broker at addr when its reason
// changes (a refused broker retries every second), and its first accepted
// registration after one.
func (s *Server) noteRefusal(addr, reason string) {
	s.refusedMu.Lock()
	was := s.refused[addr]
	if reason == "" {
		delete(s.refused, addr)
	} else {
		if len(s.refused) >= maxRefusedKept {
			clear(s.refused) // refusals are logged again, never kept without bound
		}
		s.refused[addr] = reason
	}
	s.refusedMu.Unlock()
	switch {
	case reason != "" && reason != was:
		s.log.Warn("registration refused", "addr", addr, "reason", reason)
	case reason == "" && was != "":
		s.log.Info("registration accepted after a refusal", "addr", addr)
	}
}

// SplitMembers splits ExtMembers' "id@raftaddr,..." into sorted entries.
func SplitMembers(s string) []string {
	var out []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// RouteData is GET_ROUTEINFO_BY_TOPIC's body (RocketMQ's TopicRouteData).
type RouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []QueueData         `json:"queueDatas"`
	BrokerDatas       []BrokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// QueueData is one group's queues of a topic.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
}

// BrokerData is one group's addresses. Encoded compactly, with brokerAddrs
// keys as JSON strings of the ids, as the Go client's hand parser wants.
type BrokerData struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
}

// RocketMQ's permissions: PERM_READ|PERM_WRITE, PERM_WRITE.
const (
	PermReadWrite = 6
	PermWrite     = 2
)

func (s *Server) route(req *remoting.Command, external bool) *remoting.Command {
	topic := req.Ext["topic"]
	rd := RouteData{FilterServerTable: map[string][]string{}, QueueDatas: []QueueData{}, BrokerDatas: []BrokerData{}}
	groups := s.reg.groups(external)
	for _, n := range slices.Sorted(maps.Keys(groups)) {
		gr := groups[n]
		q, ok := gr.Topics[topic]
		if !ok || len(gr.Addrs) == 0 {
			continue // no node of the group serves remoting
		}
		perm := PermReadWrite
		if p, ok := gr.Perms[topic]; ok {
			perm = p
		}
		rd.QueueDatas = append(rd.QueueDatas, QueueData{BrokerName: n, ReadQueueNums: q, WriteQueueNums: q, Perm: perm})
		rd.BrokerDatas = append(rd.BrokerDatas, BrokerData{Cluster: gr.Cluster, BrokerName: n, BrokerAddrs: gr.Addrs})
		if perm&PermWrite == 0 || mq.IsSystemTopic(topic) {
			continue // nothing to send, or only the leader takes it (a retry topic)
		}
		// The followers' write paths: write-only (perm 2, no read queues,
		// so consumers never see them), the topic's queue ids, which are
		// the group's, each brokerName with only its follower as id 0.
		// Producers spread sends over the group's brokerName and these;
		// the followers forward to the leader. When the leader dies, a
		// client still holding its address fails over to them on its own
		// retry, before its next route poll (docs/rocketmq.md, Routes).
		for _, wp := range gr.WritePaths {
			rd.QueueDatas = append(rd.QueueDatas, QueueData{BrokerName: wp.Name, ReadQueueNums: 0, WriteQueueNums: q, Perm: PermWrite})
			rd.BrokerDatas = append(rd.BrokerDatas, BrokerData{Cluster: gr.Cluster, BrokerName: wp.Name, BrokerAddrs: map[int64]string{0: wp.Addr}})
		}
	}
	if len(rd.QueueDatas) == 0 {
		return remoting.Response(req, remoting.TopicNotExist, fmt.Sprintf("no route info of this topic: %s", topic))
	}
	body, err := json.Marshal(rd) // compact: no spaces (trap 3)
	if err != nil {
		return remoting.Response(req, remoting.SystemError, err.Error())
	}
	resp := remoting.Response(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// ClusterInfo is GET_BROKER_CLUSTER_INFO's body (RocketMQ's ClusterInfo),
// with what raftmq adds: every group's node ids, term and topics.
type ClusterInfo struct {
	BrokerAddrTable  map[string]BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"`
	RaftmqGroups     map[string]GroupInfo  `json:"raftmqGroups"`
}

// GroupInfo is raftmq's own view of a group in ClusterInfo.
type GroupInfo struct {
	// Cluster is the group's cluster name (a group whose nodes serve no
	// remoting port is not in brokerAddrTable).
	Cluster string           `json:"cluster"`
	Term    uint64           `json:"term"`
	Nodes   map[int64]string `json:"nodes"`
	Topics  map[string]int   `json:"topics"`
	// WritePaths: pseudo-broker name -> follower address, the followers
	// routed as write-only brokers of the group's topics. They are not in
	// brokerAddrTable: admin tools that send to every broker of a cluster
	// (topic creation) reach each group once, through its leader.
	WritePaths map[string]string `json:"writePaths,omitempty"`
	// Perms: a topic's permission when it is not 6 (4: read only).
	Perms map[string]int `json:"perms,omitempty"`
	// ClientAddrs: brokerId -> client API (gRPC) address, what the raftmq
	// SDK dials to reach the group.
	ClientAddrs map[int64]string `json:"clientAddrs,omitempty"`
}

func (s *Server) clusterInfo(req *remoting.Command, external bool) *remoting.Command {
	ci := ClusterInfo{BrokerAddrTable: map[string]BrokerData{}, ClusterAddrTable: map[string][]string{}, RaftmqGroups: map[string]GroupInfo{}}
	for n, gr := range s.reg.groups(external) {
		if len(gr.Addrs) > 0 { // RocketMQ's tables: the groups that serve remoting
			ci.BrokerAddrTable[n] = BrokerData{Cluster: gr.Cluster, BrokerName: n, BrokerAddrs: gr.Addrs}
			ci.ClusterAddrTable[gr.Cluster] = append(ci.ClusterAddrTable[gr.Cluster], n)
		}
		gi := GroupInfo{Cluster: gr.Cluster, Term: gr.Term, Nodes: gr.Nodes, Topics: gr.Topics, Perms: gr.Perms, ClientAddrs: gr.ClientAddrs}
		for _, wp := range gr.WritePaths {
			if gi.WritePaths == nil {
				gi.WritePaths = map[string]string{}
			}
			gi.WritePaths[wp.Name] = wp.Addr
		}
		ci.RaftmqGroups[n] = gi
	}
	for _, names := range ci.ClusterAddrTable {
		sort.Strings(names)
	}
	body, err := json.Marshal(ci)
	if err != nil {
		return remoting.Response(req, remoting.SystemError, err.Error())
	}
	resp := remoting.Response(req, remoting.Success, "")
	resp.Body = body
	return resp
}

func (s *Server) topicList(req *remoting.Command) *remoting.Command {
	set := map[string]bool{}
	for _, gr := range s.reg.groups(false) {
		for t := range gr.Topics {
			set[t] = true
		}
	}
	list := make([]string, 0, len(set))
	for t := range set {
		list = append(list, t)
	}
	sort.Strings(list)
	body, _ := json.Marshal(map[string][]string{"topicList": list})
	resp := remoting.Response(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// FetchClusterInfo asks the name server at addr for its ClusterInfo (the
// routes command, scripts and tests); sign, when not nil, signs the
// request first (a name server with --auth).
func FetchClusterInfo(ctx context.Context, cl *remoting.Client, addr string, sign func(*remoting.Command)) (*ClusterInfo, error) {
	req := remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil)
	if sign != nil {
		sign(req)
	}
	resp, err := cl.Invoke(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("name server %s: code %d: %s", addr, resp.Code, resp.Remark)
	}
	var ci ClusterInfo
	if err := json.Unmarshal(resp.Body, &ci); err != nil {
		return nil, fmt.Errorf("name server %s: cluster info: %w", addr, err)
	}
	return &ci, nil
}

// FetchRoute asks for a topic's route; a missing topic is an error naming
// it.
func FetchRoute(ctx context.Context, cl *remoting.Client, addr, topic string) (*RouteData, error) {
	resp, err := cl.Invoke(ctx, addr, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("name server %s: topic %s: code %d: %s", addr, topic, resp.Code, resp.Remark)
	}
	var rd RouteData
	if err := json.Unmarshal(resp.Body, &rd); err != nil {
		return nil, fmt.Errorf("name server %s: route: %w", addr, err)
	}
	return &rd, nil
}

// SplitList splits a comma list, dropping empty items.
func SplitList(s string) []string {
	out := []string{}
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// SplitAddrs splits RocketMQ's "a;b;c" name server list.
func SplitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// RegisterRequest is the REGISTER_BROKER request for reg (Seen is
// ignored).
func RegisterRequest(reg Registration) (*remoting.Command, error) {
	var body RegisterBody
	body.TopicConfigSerializeWrapper.TopicConfigTable = map[string]TopicConfig{}
	body.FilterServerList = []string{}
	body.RaftmqUsers = reg.Users
	for t, q := range reg.Topics {
		perm := PermReadWrite
		if p, ok := reg.Perms[t]; ok {
			perm = p
		}
		body.TopicConfigSerializeWrapper.TopicConfigTable[t] = TopicConfig{TopicName: t, ReadQueueNums: q, WriteQueueNums: q, Perm: perm}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	ext := map[string]string{
		"brokerAddr": reg.Addr, "brokerName": reg.Group, "clusterName": reg.Cluster, "brokerId": strconv.FormatInt(reg.BrokerID, 10),
		"haServerAddr": "", "compressed": "false", ExtNodeID: reg.NodeID, ExtTerm: strconv.FormatUint(reg.Term, 10),
	}
	if reg.WriteVia {
		ext[ExtWriteVia] = "true"
	}
	if reg.LiveKnown {
		ext[ExtLive] = strings.Join(reg.Live, ",")
	}
	if reg.ClientAddr != "" {
		ext[ExtClientAddr] = reg.ClientAddr
	}
	if reg.ExternalAddr != "" {
		ext[ExtExternalAddr] = reg.ExternalAddr
	}
	if reg.ExternalClientAddr != "" {
		ext[ExtExternalClientAddr] = reg.ExternalClientAddr
	}
	if reg.NoRemoting {
		ext[ExtNoRemoting] = "true"
	}
	if len(reg.Members) > 0 {
		ext[ExtMembers] = strings.Join(reg.Members, ",")
	}
	return remoting.NewRequest(remoting.RegisterBroker, ext, b), nil
}

// deleteTopic answers DELETE_TOPIC_IN_NAMESRV (DeleteTopicFromNamesrvRequestHeader:
// topic, clusterName), as RocketMQ's RouteInfoManager.deleteTopic does: the
// topic leaves the routes of every group (of clusterName, when given)
// until a node registers it again. A broker group that still holds it
// does so with its next registration (at most a register period later),
// as with RocketMQ; raftmq's brokers deleting it register without it.
// A name server with authentication verifies signatures but holds no
// grants, so there it changes no route: it answers SUCCESS and the routes
// follow the groups' registrations (a group that deleted the topic
// registers without it at once).
func (s *Server) deleteTopic(req *remoting.Command) *remoting.Command {
	topic := req.Ext["topic"]
	if topic == "" {
		return remoting.Response(req, remoting.SystemError, "delete topic: field topic: empty")
	}
	if s.guard.mode != acl.Disabled {
		return remoting.Response(req, remoting.Success, "routes follow the broker groups' registrations: a group that deleted the topic registers without it")
	}
	s.reg.dropTopic(topic, req.Ext["clusterName"])
	return remoting.Response(req, remoting.Success, "")
}

// topicListBody is RocketMQ's TopicList (remoting/.../protocol/body/TopicList.java).
type topicListBody struct {
	BrokerAddr string   `json:"brokerAddr,omitempty"`
	TopicList  []string `json:"topicList"`
}

func topicListResponse(req *remoting.Command, set map[string]bool, brokerAddr string) *remoting.Command {
	list := make([]string, 0, len(set))
	for t := range set {
		list = append(list, t)
	}
	sort.Strings(list)
	body, err := json.Marshal(topicListBody{BrokerAddr: brokerAddr, TopicList: list})
	if err != nil {
		return remoting.Response(req, remoting.SystemError, err.Error())
	}
	resp := remoting.Response(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// clusterTopics answers GET_TOPICS_BY_CLUSTER (GetTopicsByClusterRequestHeader:
// cluster; body TopicList): the topics of the cluster's groups (mqadmin
// topicList -c).
func (s *Server) clusterTopics(req *remoting.Command, external bool) *remoting.Command {
	cluster := req.Ext["cluster"]
	set := map[string]bool{}
	for _, gr := range s.reg.groups(external) {
		if gr.Cluster != cluster {
			continue
		}
		for t := range gr.Topics {
			set[t] = true
		}
	}
	return topicListResponse(req, set, "")
}

// systemTopics answers GET_SYSTEM_TOPIC_LIST_FROM_NS (no header; body
// TopicList): as RocketMQ's RouteInfoManager.getSystemTopicList, the
// cluster and broker group names (RocketMQ's brokers make topics of them)
// and a leader's address, and the schedule and transaction topics the
// groups registered (the admin tools tell retry and dead-letter topics by
// their prefixes).
func (s *Server) systemTopics(req *remoting.Command, external bool) *remoting.Command {
	set := map[string]bool{}
	addr := ""
	groups := s.reg.groups(external)
	for _, n := range slices.Sorted(maps.Keys(groups)) {
		gr := groups[n]
		set[n], set[gr.Cluster] = true, true
		if addr == "" {
			addr = gr.Addrs[0]
		}
		for t := range gr.Topics {
			if mq.IsSystemTopic(t) && !mq.IsRetryTopic(t) && !mq.IsDeadLetterTopic(t) {
				set[t] = true
			}
		}
	}
	return topicListResponse(req, set, addr)
}

// config answers GET_NAMESRV_CONFIG (no header): the name server's
// settings as java.util.Properties text, as RocketMQ's
// DefaultRequestProcessor.getConfig answers (NamesrvConfig and
// NettyServerConfig names where raftmq has the setting).
func (s *Server) config(req *remoting.Command) *remoting.Command {
	port := ""
	if i := strings.LastIndexByte(s.cfg.Listen, ':'); i >= 0 {
		port = s.cfg.Listen[i+1:]
	}
	tlsMode := "disabled"
	if s.cfg.TLS != nil {
		tlsMode = string(s.cfg.TLS.Mode())
	}
	var b strings.Builder
	for _, kv := range [][2]string{
		{"listenPort", port},
		{"raftmqAuth", s.cfg.Auth.String()},
		{"raftmqBrokerExpiry", s.cfg.Expiry.String()},
		{"raftmqHTTP", s.cfg.HTTP},
		{"raftmqListen", s.cfg.Listen},
		{"raftmqListenExternal", s.cfg.ListenExternal},
		{"raftmqTLS", tlsMode},
	} {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
	}
	resp := remoting.Response(req, remoting.Success, "")
	resp.Body = []byte(b.String())
	return resp
}
