package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/faultproxy"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// Node is one `raftmq server` process of the group: a localgroup node
// (its addresses, its directory DIR/ID with data/ and server.log, its
// current process) and its place in the chaos suite's pair matrices.
type Node struct {
	*localgroup.Node
	Index int
	Tmpfs bool // Data is a tmpfs mount (the full-disk fault)
}

// Cluster is a group of real processes, started by a localgroup.Group
// with a proxy per directed pair of nodes for Raft and one for the
// node-to-node API (localgroup.Config.PeerLinks); clients reach the nodes
// directly.
type Cluster struct {
	Bin   string
	Dir   string
	Nodes []*Node
	Group *localgroup.Group
	Admin *client.Client
	logf  func(string, ...any)
}

// ClusterConfig configures NewCluster.
type ClusterConfig struct {
	Bin   string
	Dir   string
	Nodes int
	// TmpfsNode, when >= 0, puts that node's data directory on a tmpfs of
	// TmpfsMB megabytes (for the full-disk fault).
	TmpfsNode int
	TmpfsMB   int
	// Extra are flags added to every `raftmq server`.
	Extra []string
	Logf  func(string, ...any)
}

// NewCluster prepares directories, addresses and proxies; StartNode runs
// each node.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	c := &Cluster{Bin: cfg.Bin, Dir: cfg.Dir, logf: cfg.Logf}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	g, err := localgroup.New(localgroup.Config{Exe: cfg.Bin, Dir: cfg.Dir, Keep: true, Nodes: cfg.Nodes,
		ServerArgs: append([]string{"--log-level", "info"}, cfg.Extra...),
		PeerLinks:  true, NodeDirs: true, NoHTTP: true})
	if err != nil {
		return nil, err
	}
	c.Group = g
	for i, ln := range g.Nodes() {
		n := &Node{Node: ln, Index: i}
		c.Nodes = append(c.Nodes, n)
		if i == cfg.TmpfsNode {
			if err := mountTmpfs(n.Data, cfg.TmpfsMB); err != nil {
				c.Close()
				return nil, err
			}
			n.Tmpfs = true
		}
	}
	admin, err := client.New(client.Config{Servers: c.ClientAddrs(), RequestTimeout: 5 * time.Second, RetryTimeout: 30 * time.Second})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("admin client: %w", err)
	}
	c.Admin = admin
	return c, nil
}

// ClientAddrs lists every node's client API address.
func (c *Cluster) ClientAddrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Client)
	}
	return out
}

// Links returns the proxies that carry what node i sends to node j over
// the connections i opens: Raft and the node-to-node API.
func (c *Cluster) Links(i, j int) []*faultproxy.Proxy {
	return c.Group.Links(c.Nodes[i].ID, c.Nodes[j].ID)
}

// AllProxies lists every proxy.
func (c *Cluster) AllProxies() []*faultproxy.Proxy { return c.Group.Proxies() }

// OneWay drops everything from node i to node j, and nothing from j to i:
// i's requests to j are held, and so are i's answers on the connections j
// opened (j's requests reach i, i's answers never reach j). Raft and the
// node-to-node API alike. Heal (or Partition with Pass) lifts it.
func (c *Cluster) OneWay(i, j int) {
	for _, p := range c.Links(i, j) {
		p.Hold(true)
	}
	for _, p := range c.Links(j, i) {
		p.Hold(false)
	}
}

// StartNode starts n's process (it must not be running) and returns at
// once: WaitAnswering waits for it.
func (c *Cluster) StartNode(n *Node) error { return c.Group.Launch(n.ID) }

// DumpStacks sends SIGQUIT to every running node: the Go runtime writes
// all goroutine stacks to the node's log and exits. For diagnosis only,
// once a run has failed and its reads are done.
func (c *Cluster) DumpStacks() {
	for _, n := range c.Nodes {
		if n.Running() {
			n.SignalAndWait(syscall.SIGQUIT, 10*time.Second)
		}
	}
}

// Kill SIGKILLs n and waits for it to be gone.
func (c *Cluster) Kill(n *Node) error {
	if _, err := c.Group.Kill(n.ID); err != nil && n.Running() {
		return err
	}
	return nil
}

// Stop SIGTERMs n (graceful) and waits; SIGKILL after the timeout.
func (c *Cluster) Stop(n *Node, timeout time.Duration) error {
	if err := c.Group.Stop(n.ID, timeout); err != nil && n.Running() {
		return err
	}
	return nil
}

// Pause SIGSTOPs n; Resume SIGCONTs it.
func (c *Cluster) Pause(n *Node) error {
	if _, err := c.Group.Pause(n.ID); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return nil
}

// Resume continues a paused node.
func (c *Cluster) Resume(n *Node) error {
	if !n.Paused() {
		return nil
	}
	if _, err := c.Group.Resume(n.ID); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

// WaitExit waits up to d for n's process to exit and returns its error
// (nil for exit status 0); ok is false when it is still running.
func (c *Cluster) WaitExit(n *Node, d time.Duration) (err error, ok bool) {
	if !n.Wait(d) {
		return nil, false
	}
	return n.WaitErr(), true
}

// Wipe empties n's data directory (n must be stopped); the node will be
// started with --join and added with `member add`.
func (c *Cluster) Wipe(n *Node) error { return c.Group.Wipe(n.ID) }

// Heal lets all traffic through, undelayed.
func (c *Cluster) Heal() {
	for _, p := range c.AllProxies() {
		p.Set(faultproxy.Pass, 0)
	}
}

// Partition blocks all traffic between the nodes of side and the rest,
// both ways: Raft and the node-to-node API (clients still reach every
// node).
func (c *Cluster) Partition(side []*Node, m faultproxy.Mode) {
	in := map[int]bool{}
	for _, n := range side {
		in[n.Index] = true
	}
	for i := range c.Nodes {
		for j := range c.Nodes {
			if i != j && in[i] != in[j] {
				for _, p := range c.Links(i, j) {
					p.Set(m, 0)
				}
			}
		}
	}
}

// Close kills every process by PID, closes the proxies and unmounts tmpfs.
func (c *Cluster) Close() {
	if c.Admin != nil {
		c.Admin.Close()
	}
	if err := c.Group.Close(); err != nil {
		c.logf("cleanup: %v", err)
	}
	for _, n := range c.Nodes {
		if n.Tmpfs {
			if err := unmount(n.Data); err != nil {
				c.logf("cleanup: %v", err)
			}
		}
	}
}

// NodeByID finds a node.
func (c *Cluster) NodeByID(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// StatusOf asks one node for its own view (short timeout).
func (c *Cluster) StatusOf(ctx context.Context, n *Node) (*api.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	return c.Admin.StatusOf(ctx, n.Client)
}

// statuses asks every running node at once.
func (c *Cluster) statuses(ctx context.Context) map[string]*api.StatusResponse {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]*api.StatusResponse{}
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		wg.Add(1)
		go func(n *Node) {
			defer wg.Done()
			if st, err := c.StatusOf(ctx, n); err == nil {
				mu.Lock()
				out[n.ID] = st
				mu.Unlock()
			}
		}(n)
	}
	wg.Wait()
	return out
}

// Leader returns the node that says it leads (highest term), or nil.
func (c *Cluster) Leader(ctx context.Context) *Node {
	var best *api.StatusResponse
	for _, st := range c.statuses(ctx) {
		if st.LeaderId != "" && st.LeaderId == st.AnsweredBy && (best == nil || st.Term > best.Term) {
			best = st
		}
	}
	if best == nil {
		return nil
	}
	return c.NodeByID(best.LeaderId)
}

// WaitAnswering polls until every node answers a status request.
func (c *Cluster) WaitAnswering(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		sts := c.statuses(ctx)
		var missing []string
		for _, n := range c.Nodes {
			if sts[n.ID] == nil {
				missing = append(missing, n.ID)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var b strings.Builder
			for _, id := range missing {
				n := c.NodeByID(id)
				fmt.Fprintf(&b, "%s (running=%v): %s\n", id, n.Running(), tail(n.LogSinceStart(), 500))
			}
			return fmt.Errorf("%v do not answer after %s:\n%s", missing, d, b.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitLeader polls until a node leads or d passes.
func (c *Cluster) WaitLeader(ctx context.Context, d time.Duration) *Node {
	deadline := time.Now().Add(d)
	for {
		if l := c.Leader(ctx); l != nil {
			return l
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func self(st *api.StatusResponse) *api.NodeStatus { return localgroup.SelfStatus(st) }

// Settled reports whether every node runs, answers, agrees on one leader,
// the leader's configuration has every node as a voter, and all have
// applied the same index. The reason says what is missing.
func (c *Cluster) Settled(ctx context.Context) (bool, string) {
	sts := c.statuses(ctx)
	var leader string
	var applied uint64
	for i, n := range c.Nodes {
		st := sts[n.ID]
		if st == nil {
			return false, n.ID + " does not answer"
		}
		if st.LeaderId == "" {
			return false, n.ID + " knows no leader"
		}
		me := self(st)
		if me == nil {
			return false, n.ID + " is not in its own configuration"
		}
		if i == 0 {
			leader, applied = st.LeaderId, me.AppliedIndex
		} else if st.LeaderId != leader {
			return false, fmt.Sprintf("%s follows %s, %s follows %s", c.Nodes[0].ID, leader, n.ID, st.LeaderId)
		} else if me.AppliedIndex != applied {
			return false, fmt.Sprintf("%s applied %d, %s applied %d", c.Nodes[0].ID, applied, n.ID, me.AppliedIndex)
		}
	}
	lst := sts[leader]
	if lst == nil {
		return false, "the leader " + leader + " does not answer"
	}
	voters := map[string]bool{}
	for _, m := range lst.Nodes {
		if m.Voter {
			voters[m.Id] = true
		}
	}
	for _, n := range c.Nodes {
		if !voters[n.ID] {
			return false, n.ID + " is not a voter"
		}
	}
	if len(voters) != len(c.Nodes) {
		return false, fmt.Sprintf("%d voters", len(voters))
	}
	return true, ""
}

// MinApplied is the lowest applied index among the nodes that answer.
func (c *Cluster) MinApplied(ctx context.Context) uint64 {
	var low uint64
	first := true
	for _, st := range c.statuses(ctx) {
		if me := self(st); me != nil && (first || me.AppliedIndex < low) {
			low, first = me.AppliedIndex, false
		}
	}
	return low
}

// Lagging returns the nodes that do not answer or have applied less than
// the most advanced node.
func (c *Cluster) Lagging(ctx context.Context) []*Node {
	sts := c.statuses(ctx)
	var top uint64
	for _, st := range sts {
		if me := self(st); me != nil && me.AppliedIndex > top {
			top = me.AppliedIndex
		}
	}
	var out []*Node
	for _, n := range c.Nodes {
		st := sts[n.ID]
		if st == nil {
			out = append(out, n)
			continue
		}
		if me := self(st); me == nil || me.AppliedIndex < top {
			out = append(out, n)
		}
	}
	return out
}

// WaitSettled polls Settled until it holds or d passes.
func (c *Cluster) WaitSettled(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	why := ""
	for {
		ok, w := c.Settled(ctx)
		if ok {
			return nil
		}
		why = w
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("group not settled after %s: %s", d, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WaitApplied polls until every node answers and has applied index or
// more, or d passes.
func (c *Cluster) WaitApplied(ctx context.Context, index uint64, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		sts := c.statuses(ctx)
		why := ""
		for _, n := range c.Nodes {
			me := (*api.NodeStatus)(nil)
			if st := sts[n.ID]; st != nil {
				me = self(st)
			}
			if me == nil {
				why = n.ID + " does not answer"
				break
			}
			if me.AppliedIndex < index {
				why = fmt.Sprintf("%s applied %d of %d", n.ID, me.AppliedIndex, index)
				break
			}
		}
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not every node applied %d after %s: %s", index, d, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Members returns the voters and non-voters in the leader's configuration.
func (c *Cluster) Members(ctx context.Context) (voters, nonvoters map[string]bool, err error) {
	l := c.Leader(ctx)
	if l == nil {
		return nil, nil, errors.New("no leader")
	}
	st, err := c.StatusOf(ctx, l)
	if err != nil {
		return nil, nil, err
	}
	voters, nonvoters = map[string]bool{}, map[string]bool{}
	for _, m := range st.Nodes {
		if m.Voter {
			voters[m.Id] = true
		} else {
			nonvoters[m.Id] = true
		}
	}
	return voters, nonvoters, nil
}

// retry runs f until it succeeds or d passes.
func retry(ctx context.Context, d time.Duration, f func(context.Context) error) error {
	deadline := time.Now().Add(d)
	var err error
	for {
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err = f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Rejoin is the documented repair of a node whose data is gone or damaged:
// stop it, remove it from the group (if it is a member), wipe its data,
// start it empty with --join and `member add` it, until it is a voter.
func (c *Cluster) Rejoin(ctx context.Context, n *Node) error {
	if n.Running() {
		if err := c.Stop(n, 10*time.Second); err != nil {
			return err
		}
	}
	voters, nonvoters, err := c.Members(ctx)
	if err == nil && (voters[n.ID] || nonvoters[n.ID]) {
		// --force: removing one of three voters leaves two, which
		// `member remove` refuses without it; the node is already down.
		if err := retry(ctx, 30*time.Second, func(ctx context.Context) error {
			err := c.Admin.RemoveMember(ctx, n.ID, true)
			if status.Code(err) == codes.NotFound {
				return nil // an earlier attempt removed it, and its answer was lost
			}
			return err
		}); err != nil {
			return fmt.Errorf("member remove %s: %w", n.ID, err)
		}
	}
	if err := c.Wipe(n); err != nil {
		return err
	}
	if err := c.StartNode(n); err != nil {
		return err
	}
	if err := retry(ctx, 60*time.Second, func(ctx context.Context) error {
		r, err := c.Admin.AddMember(ctx, n.ID, n.Raft)
		if err == nil && !r.Voter {
			return errors.New("added but not a voter yet")
		}
		return err
	}); err != nil {
		return fmt.Errorf("member add %s: %w", n.ID, err)
	}
	return nil
}

// SortedIDs lists node ids of ns.
func SortedIDs(ns []*Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	sort.Strings(out)
	return out
}

func mountTmpfs(dir string, mb int) error {
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mb), "tmpfs", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: mount -t tmpfs on %s: %v: %s", ErrNoTmpfs, dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func unmount(dir string) error {
	var err error
	for i := 0; i < 20; i++ {
		var out []byte
		out, err = exec.Command("umount", dir).CombinedOutput()
		if err == nil {
			return nil
		}
		err = fmt.Errorf("umount %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
		time.Sleep(250 * time.Millisecond)
	}
	return err
}

// ErrNoTmpfs: tmpfs cannot be mounted here (not root, or no permission):
// the full-disk fault is skipped.
var ErrNoTmpfs = errors.New("cannot mount tmpfs")

// TmpfsWorks reports whether this process can mount a tmpfs (the full-disk
// fault needs it), and why not.
func TmpfsWorks(dir string) error {
	d, err := os.MkdirTemp(dir, "tmpfs-probe-")
	if err != nil {
		return err
	}
	defer os.Remove(d)
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root", ErrNoTmpfs)
	}
	if err := mountTmpfs(d, 1); err != nil {
		return err
	}
	return unmount(d)
}
