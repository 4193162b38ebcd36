package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
)

// Errors of the package. Each is returned wrapped with what it is about;
// test with errors.Is.
var (
	// ErrNoNameServer: no name server answered.
	ErrNoNameServer = errors.New("no name server answers")
	// ErrTopicNotFound: no registered group holds the topic.
	ErrTopicNotFound = errors.New("no group holds the topic")
	// ErrUnknownGroup: a group named by the caller is not registered.
	ErrUnknownGroup = errors.New("no such group registered")
	// ErrNoWritableGroup: every group of the topic refuses writes.
	ErrNoWritableGroup = errors.New("no group of the topic takes writes")
	// ErrConsumerGroupNotFound: no registered group knows the consumer
	// group.
	ErrConsumerGroupNotFound = errors.New("no group knows the consumer group")
)

// GroupError is a failure of one group; the others may have succeeded.
type GroupError struct {
	Group string
	Err   error
}

func (e *GroupError) Error() string { return "group " + e.Group + ": " + e.Err.Error() }
func (e *GroupError) Unwrap() error { return e.Err }

// Config of a Cluster.
type Config struct {
	// NameServers are name server addresses (RocketMQ's "a;b" lists are
	// split too); they are asked in order until one answers.
	NameServers []string
	// Client is the template of every group's client.Client; Servers is
	// filled in from the routes.
	Client client.Config
	// RefreshInterval is how often routes are fetched again (RocketMQ's
	// pollNameServerInterval is 30 s).
	RefreshInterval time.Duration
	// NameServerTimeout bounds one question to one name server.
	NameServerTimeout time.Duration
	// SlowSend: a send to a group unanswered for this long marks the group
	// faulty; FaultPenalty is how long unpinned writes then avoid it.
	SlowSend     time.Duration
	FaultPenalty time.Duration
	// KeepUnlisted keeps a group the name servers stopped listing in the
	// routes this long after they last listed it: a name server that
	// restarted knows a group only after the group's next registration
	// (the nodes' --register-period, 30 s by default), and until then its
	// answers would take the group's queues away from producers and
	// consumers. RocketMQ's clients likewise keep a topic's route when the
	// name server has none. A group that is gone for good stays until
	// then too; producers avoid it once a send to it fails. Negative: a
	// group leaves the routes with the first answer that leaves it out.
	KeepUnlisted time.Duration
}

// DefaultConfig returns working defaults for everything but NameServers.
func DefaultConfig() Config {
	return Config{Client: client.DefaultConfig(), RefreshInterval: 10 * time.Second, NameServerTimeout: 3 * time.Second,
		SlowSend: time.Second, FaultPenalty: 10 * time.Second, KeepUnlisted: time.Minute}
}

// Validate names the first bad field.
func (c *Config) Validate() error {
	switch {
	case len(c.NameServers) == 0:
		return errors.New("name servers: none given (--namesrv or RAFTMQ_NAMESRV)")
	case c.RefreshInterval <= 0:
		return fmt.Errorf("refresh interval %s: want > 0", c.RefreshInterval)
	case c.NameServerTimeout <= 0:
		return fmt.Errorf("name server timeout %s: want > 0", c.NameServerTimeout)
	case c.SlowSend <= 0:
		return fmt.Errorf("slow send %s: want > 0", c.SlowSend)
	case c.FaultPenalty < 0:
		return fmt.Errorf("fault penalty %s: want >= 0", c.FaultPenalty)
	}
	return nil
}

// Group is one broker group as the name server knows it.
type Group struct {
	Name    string
	Cluster string
	Term    uint64
	// Leader is the leader's client API address ("" when no leader is
	// registered); Servers every registered node's, the leader first.
	Leader  string
	Servers []string
	// Nodes: brokerId (0 the leader) -> node id.
	Nodes  map[int64]string
	Topics map[string]int
	Perms  map[string]int // a topic's permission when not 6
}

// Writable reports whether the group takes writes to topic.
func (g *Group) Writable(topic string) bool {
	if p, ok := g.Perms[topic]; ok {
		return p&permWrite != 0
	}
	return true
}

const permWrite = 2

// Queue is one queue of the cluster.
type Queue struct {
	Group string
	Queue int32
}

func (q Queue) String() string { return fmt.Sprintf("%s/%d", q.Group, q.Queue) }

// Route is where a topic's queues are: every queue of every group that
// holds it, ordered by group name, then queue.
type Route struct {
	Topic  string
	Queues []Queue
	// Groups: group -> its number of queues of the topic.
	Groups map[string]int
	// ReadOnly lists the groups that refuse writes to the topic.
	ReadOnly map[string]bool
}

// Cluster is safe for concurrent use.
type Cluster struct {
	cfg Config
	ns  *remoting.Client

	mu      sync.Mutex
	groups  map[string]*Group // the latest answer; nil before the first
	fetched time.Time
	listed  map[string]time.Time // group -> when an answer last listed it
	clients map[string]*client.Client
	closed  bool

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New returns a Cluster; it asks the name servers on first use, so it
// never fails for an unreachable one.
func New(cfg Config) (*Cluster, error) {
	d := DefaultConfig()
	var nss []string
	for _, s := range cfg.NameServers {
		for _, a := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' }) {
			if a = strings.TrimSpace(a); a != "" {
				nss = append(nss, a)
			}
		}
	}
	cfg.NameServers = nss
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = d.RefreshInterval
	}
	if cfg.NameServerTimeout == 0 {
		cfg.NameServerTimeout = d.NameServerTimeout
	}
	if cfg.SlowSend == 0 {
		cfg.SlowSend = d.SlowSend
	}
	if cfg.FaultPenalty == 0 {
		cfg.FaultPenalty = d.FaultPenalty
	}
	if cfg.KeepUnlisted == 0 {
		cfg.KeepUnlisted = d.KeepUnlisted
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, ns: remoting.NewClient(), clients: map[string]*client.Client{}, listed: map[string]time.Time{}, stop: make(chan struct{})}
	c.ns.DialTimeout = cfg.NameServerTimeout
	if tc := cfg.Client.TLS; tc != nil {
		// The name servers speak TLS as the nodes do (with the same CA).
		c.ns.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			d := tls.Dialer{Config: tc}
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.refreshLoop()
	}()
	return c, nil
}

// Close stops the refresher and closes every group's client; it is
// idempotent. Close producers and consumers first.
func (c *Cluster) Close() error {
	c.once.Do(func() {
		close(c.stop)
		c.wg.Wait()
		c.mu.Lock()
		c.closed = true
		for _, cl := range c.clients {
			cl.Close()
		}
		c.mu.Unlock()
		c.ns.Close()
	})
	return nil
}

func (c *Cluster) refreshLoop() {
	t := time.NewTicker(c.cfg.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.mu.Lock()
		used := c.groups != nil
		c.mu.Unlock()
		if !used {
			continue // nobody asked yet
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.NameServerTimeout*time.Duration(len(c.cfg.NameServers)))
		c.Refresh(ctx) // an unreachable name server keeps the last routes, as RocketMQ's clients do
		cancel()
	}
}

// Refresh asks the name servers for every group now. A group the answer
// leaves out that an answer listed within KeepUnlisted stays as it was.
func (c *Cluster) Refresh(ctx context.Context) (map[string]*Group, error) {
	groups, err := c.fetch(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	c.mu.Lock()
	for name := range groups {
		c.listed[name] = now
	}
	for name, g := range c.groups {
		if _, ok := groups[name]; !ok && now.Sub(c.listed[name]) < c.cfg.KeepUnlisted {
			groups[name] = g
		}
	}
	c.groups, c.fetched = groups, now
	c.mu.Unlock()
	return groups, nil
}

// Groups returns every registered group, from the last answer if it is
// younger than RefreshInterval.
func (c *Cluster) Groups(ctx context.Context) (map[string]*Group, error) {
	c.mu.Lock()
	g, at := c.groups, c.fetched
	c.mu.Unlock()
	if g != nil && time.Since(at) < c.cfg.RefreshInterval {
		return g, nil
	}
	fresh, err := c.Refresh(ctx)
	if err != nil && g != nil {
		return g, nil // stale routes beat none
	}
	return fresh, err
}

// Route returns topic's queues over every group that holds it.
func (c *Cluster) Route(ctx context.Context, topic string) (*Route, error) {
	groups, err := c.Groups(ctx)
	if err != nil {
		return nil, err
	}
	r := routeOf(topic, groups)
	if len(r.Queues) == 0 {
		// Maybe created a moment ago: ask once more before saying no.
		if groups, err = c.Refresh(ctx); err != nil {
			return nil, err
		}
		if r = routeOf(topic, groups); len(r.Queues) == 0 {
			return nil, fmt.Errorf("topic %s: %w", topic, ErrTopicNotFound)
		}
	}
	return r, nil
}

func routeOf(topic string, groups map[string]*Group) *Route {
	r := &Route{Topic: topic, Groups: map[string]int{}, ReadOnly: map[string]bool{}}
	for _, name := range sortedNames(groups) {
		g := groups[name]
		n, ok := g.Topics[topic]
		if !ok || len(g.Servers) == 0 {
			continue
		}
		r.Groups[name] = n
		if !g.Writable(topic) {
			r.ReadOnly[name] = true
		}
		for q := 0; q < n; q++ {
			r.Queues = append(r.Queues, Queue{Group: name, Queue: int32(q)})
		}
	}
	return r
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// trouble is the Trouble of group's client, zero when there is none yet.
func (c *Cluster) trouble(group string) time.Time {
	c.mu.Lock()
	cl := c.clients[group]
	c.mu.Unlock()
	if cl == nil {
		return time.Time{}
	}
	return cl.Trouble()
}

// Client returns the client of group, made on first use from the
// addresses the name server lists for it; it follows the group's leader
// by itself.
func (c *Cluster) Client(ctx context.Context, group string) (*client.Client, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("cluster client is closed")
	}
	if cl := c.clients[group]; cl != nil {
		c.mu.Unlock()
		return cl, nil
	}
	c.mu.Unlock()
	groups, err := c.Groups(ctx)
	if err != nil {
		return nil, err
	}
	g := groups[group]
	if g == nil || len(g.Servers) == 0 {
		return nil, fmt.Errorf("group %s: %w (registered: %s)", group, ErrUnknownGroup, strings.Join(sortedNames(groups), ", "))
	}
	cfg := c.cfg.Client
	cfg.Servers = g.Servers
	cl, err := client.New(cfg)
	if err != nil {
		return nil, &GroupError{Group: group, Err: err}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cl.Close()
		return nil, errors.New("cluster client is closed")
	}
	if prev := c.clients[group]; prev != nil {
		cl.Close()
		return prev, nil
	}
	c.clients[group] = cl
	return cl, nil
}

// clusterInfo is the part of the name server's GET_BROKER_CLUSTER_INFO
// answer this package reads (namesrv.ClusterInfo; decoded here, as client
// code never imports the server's packages).
type clusterInfo struct {
	BrokerAddrTable map[string]struct {
		Cluster string `json:"cluster"`
	} `json:"brokerAddrTable"`
	RaftmqGroups map[string]struct {
		Cluster     string           `json:"cluster"`
		Term        uint64           `json:"term"`
		Nodes       map[int64]string `json:"nodes"`
		Topics      map[string]int   `json:"topics"`
		Perms       map[string]int   `json:"perms"`
		ClientAddrs map[int64]string `json:"clientAddrs"`
	} `json:"raftmqGroups"`
}

func (c *Cluster) fetch(ctx context.Context) (map[string]*Group, error) {
	var errs []error
	for _, ns := range c.cfg.NameServers {
		actx, cancel := context.WithTimeout(ctx, c.cfg.NameServerTimeout)
		req := remoting.NewRequest(remoting.GetBrokerClusterInfo, map[string]string{}, nil)
		if cr := c.cfg.Client.Credentials; cr != nil {
			// A name server with --auth verifies RocketMQ's signature.
			acl.SignRequest(req.Ext, req.Body, cr.AccessKey, cr.SecretKey)
		}
		resp, err := c.ns.Invoke(actx, ns, req)
		cancel()
		if err == nil && resp.Code != remoting.Success {
			err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ns, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		groups, err := parseClusterInfo(resp.Body)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ns, err))
			continue
		}
		return groups, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrNoNameServer, errors.Join(errs...))
}

func parseClusterInfo(body []byte) (map[string]*Group, error) {
	var ci clusterInfo
	if err := json.Unmarshal(body, &ci); err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	out := map[string]*Group{}
	for name, gi := range ci.RaftmqGroups {
		cl := gi.Cluster
		if cl == "" {
			cl = ci.BrokerAddrTable[name].Cluster // a name server from before raftmqGroups had it
		}
		g := &Group{Name: name, Cluster: cl, Term: gi.Term, Nodes: gi.Nodes, Topics: gi.Topics, Perms: gi.Perms}
		if g.Topics == nil {
			g.Topics = map[string]int{}
		}
		ids := make([]int64, 0, len(gi.ClientAddrs))
		for id := range gi.ClientAddrs {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			if a := gi.ClientAddrs[id]; a != "" {
				g.Servers = append(g.Servers, a)
			}
		}
		if a, ok := gi.ClientAddrs[0]; ok && a != "" {
			g.Leader = a
		}
		out[name] = g
	}
	return out, nil
}
