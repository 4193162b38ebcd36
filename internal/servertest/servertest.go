package servertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/internal/faultproxy"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// WaitTimeout bounds Leader and LeaderExcept: generous, for a loaded
// machine under -race.
const WaitTimeout = 30 * time.Second

// An Option changes how New starts a cluster.
type Option func(*options)

type options struct {
	inmem, direct bool
	configure     []func(i int, c *server.Config)
}

// InMemory runs raft over raft.InmemTransport, every pair of nodes
// connected, instead of loopback TCP. The client API and the nodes' gRPC
// traffic to each other stay on loopback TCP.
func InMemory() Option { return func(o *options) { o.inmem = true } }

// Direct runs raft over loopback TCP between the nodes themselves, with no
// proxy between them, for tests whose raft traffic a proxy would change
// (one entry of tens of megabytes): Partition is then refused.
func Direct() Option { return func(o *options) { o.direct = true } }

// Configure calls f with each node's index and config before the node first
// starts; Restart reuses the config.
func Configure(f func(i int, c *server.Config)) Option {
	return func(o *options) { o.configure = append(o.configure, f) }
}

// Cluster is a running group. Its methods may be called from any goroutine.
type Cluster struct {
	t             testing.TB
	inmem, direct bool

	mu      sync.Mutex
	cfgs    []server.Config
	nodes   []*server.Server       // nil: stopped
	trans   []*raft.InmemTransport // InMemory: node i's current transport
	proxies [][]*faultproxy.Proxy  // TCP: proxies[i][j] carries raft traffic from node i to node j
	cut     []bool                 // Partition(i) and no Heal since
}

// New starts n nodes, n1 to nN, bootstrapped as one group; it does not wait
// for a leader (Leader does).
func New(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.inmem && o.direct {
		t.Fatal("servertest: InMemory and Direct exclude each other")
	}
	c := &Cluster{t: t, inmem: o.inmem, direct: o.direct, nodes: make([]*server.Server, n), cut: make([]bool, n)}
	var peers []election.Peer
	raftAddrs := make([]string, n)
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		if c.inmem {
			raftAddrs[i] = "inmem-" + id // raft.InmemTransport's address: any unique string
		} else {
			raftAddrs[i] = FreeAddr(t)
		}
		peers = append(peers, election.Peer{ID: id, Addr: raftAddrs[i]})
	}
	if c.inmem {
		c.trans = make([]*raft.InmemTransport, n)
	} else if !c.direct {
		c.proxies = make([][]*faultproxy.Proxy, n)
	}
	for i := range n {
		cfg := server.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Listen = FreeAddr(t)
		cfg.Raft.ID = peers[i].ID
		cfg.Raft.Peers = peers
		cfg.Broker.StatePeriod = 50 * time.Millisecond
		cfg.Broker.ClientAddr = cfg.Listen
		cfg.OnFatal = func(err error) { t.Errorf("node %s: fatal: %v", peers[i].ID, err) }
		cfg.Raft.BindAddr = raftAddrs[i] // InMemory: the transport's address, for the logs
		if c.proxies != nil {
			c.proxies[i] = make([]*faultproxy.Proxy, n)
			cfg.Raft.DialOverrides = map[string]string{}
			for j := range n {
				if j != i {
					p, err := faultproxy.New(peers[i].ID+"->"+peers[j].ID, raftAddrs[j])
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(p.Close)
					c.proxies[i][j] = p
					cfg.Raft.DialOverrides[peers[j].ID] = p.Addr()
				}
			}
		}
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: peers[i].ID, Level: hclog.Info, Output: testWriter{t}})
		for _, f := range o.configure {
			f(i, &cfg)
		}
		c.cfgs = append(c.cfgs, cfg)
	}
	t.Cleanup(func() { // after the proxies' (LIFO): nodes stop first
		for i := range c.nodes {
			c.Kill(i)
		}
	})
	for i := range n {
		c.start(i)
	}
	return c
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	cfg := c.cfgs[i]
	var tr *raft.InmemTransport
	if c.inmem {
		// A node closes its transport when it stops: every start gets a new
		// one. The timeout is the TCP transport's (election): raft's default
		// of 500ms fails appends to a follower whose fsync is slow on a
		// loaded machine.
		_, tr = raft.NewInmemTransportWithTimeout(raft.ServerAddress(cfg.Raft.BindAddr), 5*time.Second)
		cfg.Raft.Transport = tr
	}
	s, err := server.Start(cfg)
	if err != nil {
		c.t.Fatalf("servertest: start node %d (%s): %v", i, cfg.Raft.ID, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[i] = s
	if c.inmem {
		c.trans[i] = tr
		c.connectLocked()
	}
}

// connectLocked connects the in-memory transports of every two running
// nodes neither of which is cut off, and disconnects every other pair.
func (c *Cluster) connectLocked() {
	for i, a := range c.trans {
		if a == nil {
			continue
		}
		for j, b := range c.trans {
			switch {
			case i == j:
			case b != nil && c.nodes[i] != nil && c.nodes[j] != nil && !c.cut[i] && !c.cut[j]:
				a.Connect(b.LocalAddr(), b)
			default:
				a.Disconnect(raft.ServerAddress(c.cfgs[j].Raft.BindAddr))
			}
		}
	}
}

// setProxiesLocked blocks the proxies of every pair with a cut node and
// unblocks the others.
func (c *Cluster) setProxiesLocked() {
	for i := range c.proxies {
		for j, p := range c.proxies[i] {
			if p == nil {
				continue
			}
			if c.cut[i] || c.cut[j] {
				p.Set(faultproxy.Drop, 0)
			} else {
				p.Set(faultproxy.Pass, 0)
			}
		}
	}
}

// Node is node i's server, nil while it is stopped.
func (c *Cluster) Node(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Nodes is every node's server by index, nil for a stopped one (a copy of
// the list).
func (c *Cluster) Nodes() []*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Size is the number of nodes, running or not.
func (c *Cluster) Size() int { return len(c.cfgs) }

// Config is node i's config (a copy).
func (c *Cluster) Config(i int) server.Config { return c.cfgs[i] }

// Configs is every node's config by index (a copy).
func (c *Cluster) Configs() []server.Config { return slices.Clone(c.cfgs) }

// Reconfigure changes node i's config for its next start (Restart); node i
// must be stopped.
func (c *Cluster) Reconfigure(i int, f func(cfg *server.Config)) {
	c.t.Helper()
	if c.Node(i) != nil {
		c.t.Fatalf("servertest: Reconfigure of node %d while it runs", i)
	}
	f(&c.cfgs[i])
}

// Leader waits, up to WaitTimeout, for a node that leads and is ready (its
// barrier applied) and returns its index.
func (c *Cluster) Leader() int {
	c.t.Helper()
	return c.LeaderExcept(-1)
}

// LeaderExcept is Leader ignoring node skip: a node cut off by Partition
// may still think it leads for up to a leader lease.
func (c *Cluster) LeaderExcept(skip int) int {
	c.t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		c.mu.Lock()
		for i, s := range c.nodes {
			if i != skip && s != nil && s.Node().Ready() {
				c.mu.Unlock()
				return i
			}
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			c.t.Fatalf("servertest: no ready leader (other than node %d) after %s", skip, WaitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Kill stops node i without handing over leadership, as close to a crash
// as a process gets (server.Server.Kill). Its data stays for Restart.
// Killing a stopped node does nothing.
func (c *Cluster) Kill(i int) { c.stop(i, false) }

// Stop stops node i gracefully: a leader hands leadership over first
// (server.Server.Close).
func (c *Cluster) Stop(i int) { c.stop(i, true) }

func (c *Cluster) stop(i int, graceful bool) {
	c.t.Helper()
	c.mu.Lock()
	s := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if s == nil {
		return
	}
	if graceful && c.inmem && s.Node().Role() == election.Leader {
		// What Close does first, done here so that the node can be cut off
		// before it stops (below).
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if _, _, err := s.Broker().TransferLeader(ctx, ""); err != nil {
			c.t.Logf("servertest: node %d: leadership transfer before stop: %v", i, err)
		}
		cancel()
	}
	// In memory, nothing reaches the node from now on: calls to it fail at
	// once, as over TCP, instead of waiting out the transport's timeout in
	// a node that no longer reads them.
	c.mu.Lock()
	c.forgetLocked(i)
	c.mu.Unlock()
	var err error
	if graceful {
		err = s.Close()
	} else {
		err = s.Kill()
	}
	if err != nil {
		c.t.Logf("servertest: stop node %d: %v", i, err)
	}
}

// forgetLocked disconnects node i's in-memory transport from every other
// one, both ways, for good: the node is stopping.
func (c *Cluster) forgetLocked(i int) {
	if !c.inmem || c.trans[i] == nil {
		return
	}
	c.trans[i].DisconnectAll()
	c.trans[i] = nil
	for _, tr := range c.trans {
		if tr != nil {
			tr.Disconnect(raft.ServerAddress(c.cfgs[i].Raft.BindAddr))
		}
	}
}

// Restart starts node i again on its data directory; it kills it first if
// it is running. A partitioned node stays cut off.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Kill(i)
	c.start(i)
}

// Partition cuts node i's raft traffic to and from every other node until
// Heal. The client API and the nodes' gRPC traffic stay up.
func (c *Cluster) Partition(i int) {
	if c.direct {
		c.t.Fatal("servertest: Partition of a Direct cluster")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut[i] = true
	c.applyCutsLocked()
}

// Heal undoes every Partition.
func (c *Cluster) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.cut)
	c.applyCutsLocked()
}

func (c *Cluster) applyCutsLocked() {
	if c.inmem {
		c.connectLocked()
	} else {
		c.setProxiesLocked()
	}
}

// Addrs are the client API addresses of the running nodes.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for i, s := range c.nodes {
		if s != nil {
			out = append(out, c.cfgs[i].Listen)
		}
	}
	return out
}

// Client is an SDK client of the running nodes, closed when t ends.
func (c *Cluster) Client(t testing.TB) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Servers: c.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// FreeAddr is a 127.0.0.1 address free a moment ago, on a port below the
// kernel's ephemeral range and never handed out twice in this process: with
// a port from ":0", an outgoing connection of another test could take it
// before the node binds it ("address already in use").
func FreeAddr(t testing.TB) string {
	t.Helper()
	p, err := localgroup.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", p[0])
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
