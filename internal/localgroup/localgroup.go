package localgroup

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/internal/faultproxy"
)

// Group runs the nodes of a broker group as `raftmq server` child
// processes (of Config.Exe, by default this executable) on free 127.0.0.1
// ports, each with its data directory and log file under one directory. It
// controls them by PID only: start, SIGKILL, SIGSTOP/SIGCONT, SIGTERM,
// restart. With Config.Partitionable or Config.PeerLinks the links of the
// initial nodes run through fault proxies it owns (Cut, Links).
//
//	g, err := New(Config{Nodes: 3})
//	defer g.Close()
//	err = g.StartAll(ctx)
//	leader, st, err := g.WaitLeader(ctx, "")
type Group struct {
	cfg    Config
	dir    string
	tmpDir bool // dir was created here and is removed by Close unless Keep

	mu    sync.Mutex
	nodes []*Node
	// proxies[i][j] carries the Raft RPCs node i sends to node j (and
	// their answers); with PeerLinks apiProxies[i][j] the node-to-node API
	// calls i makes to j; with Partitionable clientProxy[id] every client
	// API connection to node id, from clients and from the other nodes,
	// and remotingProxy[id] (with Remoting) every RocketMQ connection to it.
	proxies       map[string]map[string]*faultproxy.Proxy
	apiProxies    map[string]map[string]*faultproxy.Proxy
	clientProxy   map[string]*faultproxy.Proxy
	remotingProxy map[string]*faultproxy.Proxy
}

// Config configures a Group.
type Config struct {
	// Exe is the raftmq binary; default os.Executable().
	Exe string
	// Dir holds every node's data directory and log; default a new temporary
	// directory that Close removes (unless Keep).
	Dir  string
	Keep bool
	// Nodes is the number of initial voters, named n1..nN.
	Nodes int
	// ServerArgs are extra flags for every server, e.g. --heartbeat-timeout.
	ServerArgs []string
	// StartTimeout bounds the wait for a started node's client API (15s).
	StartTimeout time.Duration
	// Partitionable runs every Raft link between the initial nodes (each
	// direction its own proxy, through --raft-dial) and every client API
	// connection to them (through --advertise, which the nodes also use to
	// forward to each other) and, with Remoting, every RocketMQ connection
	// (through --remoting-advertise, the address the name servers hand
	// out) through in-process proxies, so that Cut can blackhole all of a
	// node's traffic but its registrations with the name servers.
	Partitionable bool
	// PeerLinks runs every connection a node opens to another through a
	// proxy of its own per directed pair: Raft (--raft-dial) and the
	// node-to-node API (--peer-dial); clients reach the nodes directly.
	// Links returns them. It excludes Partitionable.
	PeerLinks bool
	// NodeDirs gives each node a directory DIR/ID holding data/ and
	// server.log; by default the data is in DIR/ID and the log DIR/ID.log.
	NodeDirs bool
	// NoHTTP starts the servers without the metrics endpoint (--http "").
	NoHTTP bool
	// Remoting gives every node a RocketMQ remoting port (--remoting).
	Remoting bool
	// ClientTLS is the TLS the group's own status calls use (start and
	// leader waits), for a group started with --tls-mode in ServerArgs;
	// nil: plaintext.
	ClientTLS *tls.Config
	// PortBase, when above 0, gives the nodes fixed ports instead of free
	// ones: the k-th node created (from 0) takes PortBase+10k (raft), +1
	// (client API), +2 (HTTP) and +3 (remoting).
	PortBase int
}

// Node is one server process (and its identity across restarts).
type Node struct {
	ID     string
	Raft   string // raft address
	Client string // client API address (its proxy's with Partitionable)
	Listen string // where the node's client API listens
	HTTP   string // "" with Config.NoHTTP
	// Remoting is the node's RocketMQ remoting address as clients reach
	// it, and as it registers ("" without Config.Remoting; its proxy's
	// with Partitionable); RemotingListen where it listens.
	Remoting       string
	RemotingListen string
	Dir            string // the node's own directory (Config.NodeDirs), else the group's
	Data           string
	Log            string // the server's stderr, appended across restarts

	mu    sync.Mutex
	peers string // --peers, "" for a node that joins with `member add` (--join)
	cut   bool

	Process
}

func New(cfg Config) (*Group, error) {
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find this executable: %w", err)
		}
		cfg.Exe = exe
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 15 * time.Second
	}
	if cfg.Partitionable && cfg.PeerLinks {
		return nil, errors.New("localgroup: Partitionable and PeerLinks exclude each other")
	}
	g := &Group{cfg: cfg, dir: cfg.Dir}
	if g.dir == "" {
		d, err := os.MkdirTemp("", "raftmq-group-")
		if err != nil {
			return nil, fmt.Errorf("create group directory: %w", err)
		}
		g.dir, g.tmpDir = d, true
	} else if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create group directory: %w", err)
	}
	var peers []string
	for i := 1; i <= cfg.Nodes; i++ {
		n, err := g.newNode(fmt.Sprintf("n%d", i))
		if err != nil {
			g.Close()
			return nil, err
		}
		peers = append(peers, n.ID+"@"+n.Raft)
	}
	for _, n := range g.nodes {
		n.peers = strings.Join(peers, ",")
	}
	if cfg.Partitionable || cfg.PeerLinks {
		if err := g.addProxies(); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// Peers is the node's --peers, "" for a node that joins with `member add` (--join)
// (added by AddNode, or wiped).
func (n *Node) Peers() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.peers
}

func (g *Group) newNode(id string) (*Node, error) {
	var ports []int
	if b := g.cfg.PortBase; b > 0 {
		g.mu.Lock()
		k := len(g.nodes)
		g.mu.Unlock()
		ports = []int{b + 10*k, b + 10*k + 1, b + 10*k + 2, b + 10*k + 3}
	} else {
		var err error
		if ports, err = FreePorts(3); err != nil {
			return nil, err
		}
	}
	n := &Node{ID: id,
		Raft: "127.0.0.1:" + strconv.Itoa(ports[0]), Client: "127.0.0.1:" + strconv.Itoa(ports[1]),
		Listen: "127.0.0.1:" + strconv.Itoa(ports[1]), HTTP: "127.0.0.1:" + strconv.Itoa(ports[2]),
		Dir: g.dir, Data: filepath.Join(g.dir, id), Log: filepath.Join(g.dir, id+".log")}
	if g.cfg.NoHTTP {
		n.HTTP = ""
	}
	if g.cfg.Remoting {
		if len(ports) < 4 {
			p, err := FreePorts(1)
			if err != nil {
				return nil, err
			}
			ports = append(ports, p[0])
		}
		n.Remoting = "127.0.0.1:" + strconv.Itoa(ports[3])
		n.RemotingListen = n.Remoting
	}
	if g.cfg.NodeDirs {
		n.Dir = filepath.Join(g.dir, id)
		n.Data, n.Log = filepath.Join(n.Dir, "data"), filepath.Join(n.Dir, "server.log")
		if err := os.MkdirAll(n.Data, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", n.Data, err)
		}
	}
	g.mu.Lock()
	g.nodes = append(g.nodes, n)
	g.mu.Unlock()
	return n, nil
}

// AddNode allocates a node that is not part of the initial voters: it starts
// with --join and waits to be added with `member add`. Start it with Start.
func (g *Group) AddNode(id string) (*Node, error) {
	if g.Node(id) != nil {
		return nil, fmt.Errorf("node %s exists", id)
	}
	return g.newNode(id)
}

// SetKeep decides whether Close leaves the group directory behind.
func (g *Group) SetKeep(keep bool) {
	g.mu.Lock()
	g.cfg.Keep = keep
	g.mu.Unlock()
}

// AddServerArgs adds flags for every server started from now on.
func (g *Group) AddServerArgs(args ...string) {
	g.mu.Lock()
	g.cfg.ServerArgs = append(g.cfg.ServerArgs, args...)
	g.mu.Unlock()
}

// ServerArgs are the extra flags every server gets when it starts;
// SetServerArgs replaces them for the servers started from now on.
func (g *Group) ServerArgs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.cfg.ServerArgs...)
}

func (g *Group) SetServerArgs(args []string) {
	g.mu.Lock()
	g.cfg.ServerArgs = append([]string(nil), args...)
	g.mu.Unlock()
}

// Dir is the directory of the group's data and logs.
func (g *Group) Dir() string { return g.dir }

// Nodes returns every node, started or not.
func (g *Group) Nodes() []*Node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]*Node{}, g.nodes...)
}

// Node returns the node with id, or nil.
func (g *Group) Node(id string) *Node {
	for _, n := range g.Nodes() {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// NodeByClient returns the node whose client address is addr, or nil.
func (g *Group) NodeByClient(addr string) *Node {
	for _, n := range g.Nodes() {
		if n.Client == addr {
			return n
		}
	}
	return nil
}

// ClientAddrs is the comma list of every node's client address (for -s).
func (g *Group) ClientAddrs() string {
	var out []string
	for _, n := range g.Nodes() {
		out = append(out, n.Client)
	}
	return strings.Join(out, ",")
}

// StartAll starts every node that is not running, all at once, and waits
// until each answers on its client API.
func (g *Group) StartAll(ctx context.Context) error {
	nodes := g.Nodes()
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		if n.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = g.Start(ctx, n.ID)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Launch starts node id's process (again, with its data) and returns at
// once; Start also waits until it answers.
func (g *Group) Launch(id string) error {
	n := g.Node(id)
	if n == nil {
		return fmt.Errorf("no node %s", id)
	}
	if n.Running() {
		return fmt.Errorf("%s is already running (pid %d)", id, n.PID())
	}
	args := []string{"server", "--id", n.ID, "--data", n.Data, "--raft", n.Raft, "--listen", n.Listen, "--http", n.HTTP}
	if n.Client != n.Listen {
		args = append(args, "--advertise", n.Client)
	}
	if d := g.raftDials(id); d != "" {
		args = append(args, "--raft-dial", d)
	}
	if d := g.peerDials(id); d != "" {
		args = append(args, "--peer-dial", d)
	}
	if p := n.Peers(); p != "" {
		args = append(args, "--peers", p)
	} else if extra := g.ServerArgs(); !slices.Contains(extra, "--recover-as-new-group") && !slices.Contains(extra, "--single") {
		args = append(args, "--join")
	}
	if n.Remoting != "" {
		args = append(args, "--remoting", n.RemotingListen)
		if n.Remoting != n.RemotingListen {
			args = append(args, "--remoting-advertise", n.Remoting)
		}
	}
	g.mu.Lock()
	args = append(args, g.cfg.ServerArgs...)
	g.mu.Unlock()
	if _, err := n.Launch(g.cfg.Exe, args, n.Log); err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	return nil
}

// Start starts node id (again, with its data) and waits until its client
// API answers. A process that exits meanwhile is reported with the tail of
// its log.
func (g *Group) Start(ctx context.Context, id string) error {
	if err := g.Launch(id); err != nil {
		return err
	}
	n := g.Node(id)
	pid, exited := n.PID(), n.Exited()

	deadline := time.Now().Add(g.cfg.StartTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("%s (pid %d) exited during start: %v\n%s", id, pid, n.WaitErr(), n.LogTail(15))
		default:
		}
		// A fresh connection each time: a gRPC connection that was refused
		// waits a second before it dials again.
		_, err := statusOnce(ctx, n.Client, time.Second, g.cfg.ClientTLS)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) does not answer on %s after %s: %w\n%s", id, pid, n.Client,
				g.cfg.StartTimeout, err, n.LogTail(15))
		}
		select {
		case <-exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill sends SIGKILL to node id and waits until the process is gone. It
// returns the killed PID.
func (g *Group) Kill(id string) (int, error) {
	return g.signalAndWait(id, syscall.SIGKILL, 20*time.Second)
}

// Wipe empties the data directory of node id, which must be stopped; it
// starts from now on with --join, to be added with `member add`.
func (g *Group) Wipe(id string) error {
	n := g.Node(id)
	if n == nil {
		return fmt.Errorf("no node %s", id)
	}
	if n.Running() {
		return fmt.Errorf("wipe %s: it is running", id)
	}
	ents, err := os.ReadDir(n.Data)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("wipe %s: %w", id, err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(n.Data, e.Name())); err != nil {
			return fmt.Errorf("wipe %s: %w", id, err)
		}
	}
	n.mu.Lock()
	n.peers = ""
	n.mu.Unlock()
	return nil
}

// Stop sends SIGTERM (a leader hands over leadership first) and waits up to
// timeout, then SIGKILL.
func (g *Group) Stop(id string, timeout time.Duration) error {
	pid, err := g.signalAndWait(id, syscall.SIGTERM, timeout)
	if err == nil {
		return nil
	}
	if _, kerr := g.Kill(id); kerr != nil {
		return kerr
	}
	return fmt.Errorf("%s (pid %d) did not stop within %s of SIGTERM; killed it", id, pid, timeout)
}

// Restart stops node id (SIGKILL if still running) and starts it again.
func (g *Group) Restart(ctx context.Context, id string) error {
	if n := g.Node(id); n != nil && n.Running() {
		if _, err := g.Kill(id); err != nil {
			return err
		}
	}
	return g.Start(ctx, id)
}

// Pause sends SIGSTOP to node id.
func (g *Group) Pause(id string) (int, error) { return g.Signal(id, syscall.SIGSTOP) }

// Resume sends SIGCONT to node id.
func (g *Group) Resume(id string) (int, error) { return g.Signal(id, syscall.SIGCONT) }

// Signal sends sig to node id's process and returns its PID; it does not
// wait. SIGSTOP and SIGCONT are remembered for Paused.
func (g *Group) Signal(id string, sig syscall.Signal) (int, error) {
	n := g.Node(id)
	if n == nil {
		return 0, fmt.Errorf("no node %s", id)
	}
	pid, err := n.Signal(sig)
	if err != nil {
		return pid, fmt.Errorf("%s: %w", id, err)
	}
	return pid, nil
}

func (g *Group) signalAndWait(id string, sig syscall.Signal, timeout time.Duration) (int, error) {
	n := g.Node(id)
	if n == nil {
		return 0, fmt.Errorf("no node %s", id)
	}
	pid, err := n.SignalAndWait(sig, timeout)
	if err != nil {
		return pid, fmt.Errorf("%s: %w", id, err)
	}
	return pid, nil
}

// Close kills every running node (SIGKILL) and removes the group directory
// if it created it and Keep is off.
func (g *Group) Close() error {
	for _, n := range g.Nodes() {
		if n.Running() {
			g.Kill(n.ID)
		}
	}
	for _, p := range g.Proxies() {
		p.Close()
	}
	g.mu.Lock()
	keep := g.cfg.Keep
	g.mu.Unlock()
	if g.tmpDir && !keep {
		return os.RemoveAll(g.dir)
	}
	return nil
}

// StopAll stops every running node with SIGTERM, in parallel.
func (g *Group) StopAll(timeout time.Duration) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, n := range g.Nodes() {
		if !n.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Stop(n.ID, timeout); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Leader asks every running node that is neither paused nor cut at once and returns the leader
// of the highest term any of them reports, with that answer. It fails when
// no node knows a leader.
func (g *Group) Leader(ctx context.Context) (*Node, *api.StatusResponse, error) {
	var addrs []string
	for _, n := range g.Nodes() {
		if n.Running() && !n.Paused() && !g.IsCut(n.ID) {
			addrs = append(addrs, n.Client)
		}
	}
	st, err := leaderStatus(ctx, addrs, time.Second, g.cfg.ClientTLS)
	if err != nil {
		return nil, nil, err
	}
	n := g.Node(st.LeaderId)
	if n == nil {
		n = g.NodeByClient(st.LeaderAddress)
	}
	if n == nil {
		return nil, st, fmt.Errorf("leader %s (%s) is not a node of this group", st.LeaderId, st.LeaderAddress)
	}
	return n, st, nil
}

// WaitLeader polls until a leader other than not ("" = any) is known, and
// returns it.
func (g *Group) WaitLeader(ctx context.Context, not string) (*Node, *api.StatusResponse, error) {
	var last error
	for {
		n, st, err := g.Leader(ctx)
		if err == nil && n.ID != not && n.Running() {
			return n, st, nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = errors.New("the old leader still leads")
			}
			return nil, nil, fmt.Errorf("no new leader: %w (last: %v)", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// LogSinceStart is what the node's current (or last) process wrote to its
// log, at most 64 MiB.
func (n *Node) LogSinceStart() string {
	f, err := os.Open(n.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(n.LogStart(), io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 64<<20))
	return string(b)
}

// LogTail returns the last lines of the node's log, indented.
func (n *Node) LogTail(lines int) string {
	b, err := os.ReadFile(n.Log)
	if err != nil {
		return fmt.Sprintf("    (no log: %v)", err)
	}
	ls := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "    --- last lines of %s ---\n", n.Log)
	for _, l := range ls {
		sb.WriteString("    ")
		sb.Write(l)
		sb.WriteByte('\n')
	}
	return sb.String()
}
