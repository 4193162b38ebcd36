package integration

// Helpers of the process tests (process_test.go): a group of real `raftmq
// server` processes of a binary built once per test run, controlled by PID,
// a load generator of idempotent SDK producers that records every
// acknowledgement, and the checker that reads everything back. Everything
// here is prefixed with "proc" so that it cannot clash with the other files
// of package integration.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/internal/testbin"
)

const (
	// procStartTimeout bounds the wait for a started process's client API.
	procStartTimeout = 20 * time.Second
	// procLeaderTimeout bounds waits for a (new) leader.
	procLeaderTimeout = 30 * time.Second
	// procCLITimeout bounds one CLI invocation.
	procCLITimeout = 60 * time.Second
)

// procRequire skips process tests in -short mode.
func procRequire(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping process test in -short mode: it starts real raftmq server processes")
	}
	if runtime.GOOS != "linux" {
		t.Skip("process tests use Linux signals and /proc")
	}
}

// procBinary is the raftmq binary the process tests run (internal/testbin).
func procBinary(t *testing.T) string {
	t.Helper()
	p, err := testbin.Path()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// procCluster is a group of raftmq server processes: a localgroup.Group
// (the launcher `raftmq demo` and `bench --local` use) whose errors fail the
// test.
type procCluster struct {
	t *testing.T
	g *localgroup.Group
	// dial are extra options of the raw gRPC reads of procVerify
	// (credentials, for a group with --auth enforcing).
	dial []grpc.DialOption
}

// procNode is one server: its addresses and its current process.
type procNode = localgroup.Node

// procStartCluster starts n voters n1..nN with extra server flags and waits
// for a leader. Every process is killed in t.Cleanup; on failure the tail of
// every node's log is printed.
func procStartCluster(t *testing.T, n int, extra ...string) *procCluster {
	t.Helper()
	return procStartGroup(t, localgroup.Config{Nodes: n, ServerArgs: extra})
}

// procStartGroup is procStartCluster with a whole localgroup.Config (the
// binary, directory and start timeout are filled in).
func procStartGroup(t *testing.T, cfg localgroup.Config) *procCluster {
	t.Helper()
	cfg.Exe, cfg.Dir, cfg.Keep, cfg.StartTimeout = procBinary(t), t.TempDir(), true, procStartTimeout
	g, err := localgroup.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &procCluster{t: t, g: g}
	t.Cleanup(func() {
		g.Close() // SIGKILL to every running node; t.TempDir removes the files
		if t.Failed() {
			for _, nd := range g.Nodes() {
				t.Logf("log of %s:\n%s", nd.ID, nd.LogTail(40))
			}
		}
	})
	c.startAll()
	c.waitLeader("")
	return c
}

// addNode allocates (not starts) a node that joins later via member add.
func (c *procCluster) addNode(id string) *procNode {
	c.t.Helper()
	nd, err := c.g.AddNode(id)
	if err != nil {
		c.t.Fatal(err)
	}
	return nd
}

func (c *procCluster) all() []*procNode { return c.g.Nodes() }

func (c *procCluster) node(id string) *procNode {
	nd := c.g.Node(id)
	if nd == nil {
		c.t.Fatalf("no node %s", id)
	}
	return nd
}

// addrs is the comma list of the client addresses of ids (default: all).
func (c *procCluster) addrs(ids ...string) string {
	var out []string
	for _, nd := range c.all() {
		if len(ids) == 0 || slices.Contains(ids, nd.ID) {
			out = append(out, nd.Client)
		}
	}
	return strings.Join(out, ",")
}

// startAll starts, concurrently, every node that is not running, except
// nodes added for member add that were never started.
func (c *procCluster) startAll() {
	c.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(c.all()))
	for i, nd := range c.all() {
		if nd.Running() || (nd.Peers() == "" && !nd.Started()) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.g.Start(context.Background(), nd.ID)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatal(err)
	}
}

// start starts node id and waits until its client API answers.
func (c *procCluster) start(id string) {
	c.t.Helper()
	if err := c.g.Start(context.Background(), id); err != nil {
		c.t.Fatal(err)
	}
}

func (c *procCluster) signal(id string, sig syscall.Signal) int {
	c.t.Helper()
	pid, err := c.g.Signal(id, sig)
	if err != nil {
		c.t.Fatal(err)
	}
	return pid
}

// kill sends SIGKILL to node id and waits until it is gone.
func (c *procCluster) kill(id string) int {
	c.t.Helper()
	pid, err := c.g.Kill(id)
	if err != nil {
		c.t.Fatal(err)
	}
	return pid
}

// stopAll sends SIGTERM to every running node at once and waits.
func (c *procCluster) stopAll() {
	c.t.Helper()
	start := time.Now()
	defer func() { c.t.Logf("stopped every node with SIGTERM in %v", time.Since(start).Round(time.Millisecond)) }()
	var running []*procNode
	for _, nd := range c.all() {
		if nd.Running() {
			c.signal(nd.ID, syscall.SIGTERM)
			running = append(running, nd)
		}
	}
	for _, nd := range running {
		if !nd.Wait(25 * time.Second) {
			c.t.Fatalf("%s did not exit within 25s of SIGTERM\n%s", nd.ID, nd.LogTail(20))
		}
		if err := nd.WaitErr(); err != nil {
			c.t.Errorf("%s exited with %v after SIGTERM\n%s", nd.ID, err, nd.LogTail(20))
		}
		b, _ := os.ReadFile(nd.Log)
		if i := bytes.LastIndex(b, []byte("\n=== ")); i >= 0 {
			b = b[i:] // the last run only
		}
		if bytes.Contains(b, []byte("shutdown took longer than 15s")) {
			// Seen when every node gets SIGTERM at once: the leader's
			// hand-over waits for a new leader that never comes.
			c.t.Logf("NOTE: %s did not finish its graceful shutdown and gave up after 15s", nd.ID)
		}
	}
}

func (c *procCluster) pause(id string) int  { return c.signal(id, syscall.SIGSTOP) }
func (c *procCluster) resume(id string) int { return c.signal(id, syscall.SIGCONT) }

// procStatusOf asks one node for its status over a fresh connection (a
// refused gRPC connection waits a second before it dials again).
func procStatusOf(addr string, timeout time.Duration) (*api.StatusResponse, error) {
	return localgroup.StatusOnce(context.Background(), addr, timeout)
}

// procSelf is the answering node's own entry of st.
func procSelf(st *api.StatusResponse) *api.NodeStatus { return localgroup.SelfStatus(st) }

// leaderNow asks every running node that is neither paused nor cut off and
// returns the leader of the highest term reported (with that answer), or nil.
func (c *procCluster) leaderNow() (*procNode, *api.StatusResponse) {
	nd, st, err := c.g.Leader(context.Background())
	if err != nil {
		return nil, st
	}
	return nd, st
}

// waitLeader waits until a running node other than not leads and returns it.
func (c *procCluster) waitLeader(not string) *procNode {
	c.t.Helper()
	var leader *procNode
	procWaitFor(c.t, procLeaderTimeout, "a leader other than "+strconv.Quote(not), func() (bool, string) {
		nd, st := c.leaderNow()
		if nd == nil {
			return false, "no node knows a leader"
		}
		if nd.ID == not || !nd.Running() || nd.Paused() {
			return false, fmt.Sprintf("leader is %s (term %d)", nd.ID, st.Term)
		}
		leader = nd
		return true, ""
	})
	return leader
}

// waitFollower waits until node id is a follower of a known leader that
// reports it healthy, and has applied at least what the leader had applied
// just before.
func (c *procCluster) waitFollower(id string, timeout time.Duration) {
	c.t.Helper()
	nd := c.node(id)
	procWaitFor(c.t, timeout, id+" to be a caught-up, healthy follower", func() (bool, string) {
		var addrs []string
		for _, n := range c.all() {
			if n.Running() && !n.Paused() && !c.g.IsCut(n.ID) {
				addrs = append(addrs, n.Client)
			}
		}
		_, why := localgroup.FollowerCaughtUp(context.Background(), addrs, id, nd.Client, time.Second)
		return why == "", why
	})
}

// waitConverged waits until every running node has applied the same index
// (call it when no writes are running) and returns that index.
func (c *procCluster) waitConverged(timeout time.Duration) uint64 {
	c.t.Helper()
	var idx uint64
	procWaitFor(c.t, timeout, "every node to apply the same index", func() (bool, string) {
		var parts []string
		same := true
		var first uint64
		for i, nd := range c.runningNodes() {
			applied, err := procApplied(nd)
			if err != nil {
				return false, err.Error()
			}
			parts = append(parts, fmt.Sprintf("%s %d", nd.ID, applied))
			if i == 0 {
				first = applied
			} else if applied != first {
				same = false
			}
		}
		idx = first
		return same, "applied: " + strings.Join(parts, ", ")
	})
	return idx
}

// procApplied is the index node nd says it has applied.
func procApplied(nd *procNode) (uint64, error) {
	st, err := procStatusOf(nd.Client, time.Second)
	if err != nil {
		return 0, fmt.Errorf("%s does not answer: %w", nd.ID, err)
	}
	self := procSelf(st)
	if self == nil {
		return 0, fmt.Errorf("%s does not list itself", nd.ID)
	}
	return self.AppliedIndex, nil
}

func (c *procCluster) runningNodes() []*procNode {
	var out []*procNode
	for _, nd := range c.all() {
		if nd.Running() {
			out = append(out, nd)
		}
	}
	return out
}

// client returns an SDK client for every node's address, closed at cleanup.
func (c *procCluster) client() *client.Client {
	c.t.Helper()
	cfg := client.DefaultConfig()
	cfg.Servers = []string{c.addrs()}
	cl, err := client.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// cli runs the raftmq binary with args (and stdin) and returns stdout,
// stderr and the error of a non-zero exit.
func (c *procCluster) cli(stdin string, args ...string) (string, string, error) {
	return c.cliEnv(nil, stdin, args...)
}

// cliEnv is cli with extra environment variables.
func (c *procCluster) cliEnv(env []string, stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), procCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBinary(c.t), args...)
	cmd.Env = append(localgroup.Env(), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// restartEachWith sets the value of every node's flag to value and
// restarts the nodes one at a time (a graceful stop, a start, a leader),
// running after on each once it is back: a node-by-node move of a running
// group.
func (c *procCluster) restartEachWith(flag, value string, after func(*procNode)) {
	c.t.Helper()
	args := c.g.ServerArgs()
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			args[i+1] = value
		}
	}
	c.g.SetServerArgs(args)
	for _, nd := range c.all() {
		if err := c.g.Stop(nd.ID, 10*time.Second); err != nil {
			c.t.Fatal(err)
		}
		c.start(nd.ID)
		c.waitLeader("")
		after(nd)
	}
}

// mustCLI is cli that fails the test on a non-zero exit.
func (c *procCluster) mustCLI(stdin string, args ...string) string {
	c.t.Helper()
	out, errOut, err := c.cli(stdin, args...)
	if err != nil {
		c.t.Fatalf("raftmq %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, procCut(out, 2000), procCut(errOut, 2000))
	}
	return out
}

func procCut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// procWaitFor polls cond every 50ms until it holds or timeout passes.
func procWaitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procJSONLines decodes one JSON object per non-empty line into T.
func procJSONLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var res []T
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		res = append(res, v)
	}
	return res
}

// procAck is one acknowledged message.
type procAck struct {
	Body   string
	Key    string
	Queue  int32
	Offset uint64
	ID     string
	At     time.Time
}

// procClock is the start of the clock of every history.Op the process
// tests record, so that ops of different loads compare in time.
var procClock = time.Now()

func procNow() time.Duration { return time.Since(procClock) }

// procOps are the ops of messages acknowledged one by one, as the CLI
// reports them (no key, one op per message). When each was sent is not
// known: it counts as sent at the start, acknowledged at At.
func procOps(worker string, acks []procAck) []history.Op {
	var ops []history.Op
	for i, a := range acks {
		ops = append(ops, history.Op{Worker: worker, Seq: uint64(i + 1), Outcome: history.OutcomeOK, Complete: a.At.Sub(procClock),
			Messages: []history.SentMessage{{Body: a.Body, Hash: history.BodyHash([]byte(a.Body)), Key: a.Key, Queue: -1}},
			Acks:     []history.Ack{{Queue: a.Queue, Offset: a.Offset, ID: a.ID}}})
	}
	return ops
}

// procLoad runs idempotent SDK producers, one request in flight each, and
// records every acknowledgement. Bodies are "<prefix>p<i>-<seq>", keys
// "<prefix>p<i>-k<seq%3>", so per key the send order is the seq order.
type procLoad struct {
	t      *testing.T
	topic  string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	acks   []procAck
	ops    []history.Op // every send, acknowledged or not
	failed []string
	errs   []error
}

// procClusterUnderLoad starts a 3-node group, creates topic with 4 queues
// and starts producers sending to it every interval, and returns once 100
// messages are acknowledged.
func procClusterUnderLoad(t *testing.T, topic string, producers int, interval time.Duration) (*procCluster, *client.Client, *procLoad) {
	t.Helper()
	c := procStartCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, topic, 4, false); err != nil {
		t.Fatal(err)
	}
	load := procStartLoad(t, cl, topic, "", producers, interval, 20000)
	load.waitAcks(100, 30*time.Second)
	return c, cl, load
}

// procStartLoad starts producers that send one message every interval each
// (at most maxPerProducer each, so load stays bounded).
func procStartLoad(t *testing.T, cl *client.Client, topic, prefix string, producers int, interval time.Duration, maxPerProducer int) *procLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &procLoad{t: t, topic: topic, cancel: cancel}
	for i := 1; i <= producers; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			p := cl.NewProducer()
			for seq := 1; seq <= maxPerProducer && ctx.Err() == nil; seq++ {
				body := fmt.Sprintf("%sp%d-%d", prefix, i, seq)
				key := fmt.Sprintf("%sp%d-k%d", prefix, i, seq%3)
				// Not ctx: a send in progress when the load stops finishes,
				// so that its outcome is known.
				sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
				msg := client.Message{Key: key, Body: []byte(body)}
				invoke := procNow()
				acks, err := p.Send(sctx, topic, msg)
				scancel()
				now := time.Now()
				op := history.Sent(fmt.Sprintf("%sp%d", prefix, i), uint64(seq), []client.Message{msg}, invoke, procNow(), acks, err)
				l.mu.Lock()
				l.ops = append(l.ops, op)
				if err != nil || len(acks) != 1 {
					l.failed = append(l.failed, body)
					l.errs = append(l.errs, fmt.Errorf("%s: %w (acks %d)", body, err, len(acks)))
				} else {
					l.acks = append(l.acks, procAck{Body: body, Key: key, Queue: acks[0].Queue, Offset: acks[0].Offset, ID: acks[0].Id, At: now})
				}
				l.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-time.After(interval):
				}
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

// stop stops the producers and waits for their last sends.
func (l *procLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

func (l *procLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

// acked returns every acknowledgement so far.
func (l *procLoad) acked() []procAck {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]procAck{}, l.acks...)
}

// sends returns what the producers were told of every send so far.
func (l *procLoad) sends() []history.Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]history.Op{}, l.ops...)
}

// waitAcks waits until n more acknowledgements than now arrived.
func (l *procLoad) waitAcks(n int, timeout time.Duration) {
	l.t.Helper()
	base := l.count()
	procWaitFor(l.t, timeout, fmt.Sprintf("%d more acknowledgements", n), func() (bool, string) {
		got := l.count() - base
		l.mu.Lock()
		var last error
		if len(l.errs) > 0 {
			last = l.errs[len(l.errs)-1]
		}
		l.mu.Unlock()
		return got >= n, fmt.Sprintf("%d so far (last send error: %v)", got, last)
	})
}

// gapAfter is the longest gap between consecutive acknowledgements that
// ends after t0: the write pause around an event at t0.
func (l *procLoad) gapAfter(t0 time.Time) time.Duration {
	acks := l.acked()
	times := make([]time.Time, len(acks))
	for i, a := range acks {
		times[i] = a.At
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var gap time.Duration
	for i := 1; i < len(times); i++ {
		if times[i].After(t0) && times[i].Sub(times[i-1]) > gap {
			gap = times[i].Sub(times[i-1])
		}
	}
	return gap
}

// checkNoFailures fails the test if a send was never acknowledged.
func (l *procLoad) checkNoFailures() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failed) > 0 {
		l.t.Errorf("%d sends were not acknowledged within 30s, e.g. %v", len(l.failed), l.errs[0])
	}
}

type procLoc struct {
	q   int32
	off uint64
}

// procReadNode reads every queue of topic from offset 0 to end straight from
// the node (raw Pull, no redirection) and returns its log.
func procReadNode(t *testing.T, nd *procNode, topic string, end map[int32]uint64, opts ...grpc.DialOption) history.QueueLog {
	t.Helper()
	conn, err := grpc.NewClient(nd.Client, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bc := api.NewBrokerClient(conn)
	out := history.QueueLog{}
	for q, e := range end {
		off := uint64(0)
		deadline := time.Now().Add(30 * time.Second)
		for off < e {
			if time.Now().After(deadline) {
				t.Fatalf("%s: queue %d: read up to %d of %d in 30s", nd.ID, q, off, e)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := bc.Pull(ctx, &api.PullRequest{Topic: topic, Queue: q, Offset: off, MaxMessages: 1000, MaxBytes: 8 << 20})
			cancel()
			if err != nil || r.Status != api.PullStatus_PULL_STATUS_FOUND {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			if r.ServedBy != nd.ID {
				t.Fatalf("pull sent to %s was served by %s", nd.ID, r.ServedBy)
			}
			for _, m := range r.Messages {
				if m.Offset != off {
					t.Fatalf("%s: queue %d: got offset %d, want %d (offsets must be dense)", nd.ID, q, m.Offset, off)
				}
				out[q] = append(out[q], history.Entry(m))
				off++
			}
		}
	}
	return out
}

// procVerify checks what the group holds against what clients were told
// (internal/history): a consumer group reading from the earliest offset
// gets every acknowledged message exactly once, at its acknowledged queue,
// offset and id, as sent; nothing unsent or refused; offsets of every queue
// dense from 0; per producer and key the send order kept; and every running
// node holds exactly the same log (read straight from it). It returns the
// number of messages in the topic.
func procVerify(t *testing.T, c *procCluster, cl *client.Client, topic string, ops []history.Op) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ti, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatalf("describe %s: %v", topic, err)
	}
	end := map[int32]uint64{}
	total := 0
	for _, q := range ti.QueueInfo {
		if q.MinOffset != 0 {
			t.Errorf("queue %d: min offset %d, want 0", q.Queue, q.MinOffset)
		}
		end[q.Queue] = q.MaxOffset
		total += int(q.MaxOffset)
	}
	cfg := client.DefaultConsumerConfig(topic, fmt.Sprintf("verify-%d", time.Now().UnixNano()))
	cfg.Wait = 200 * time.Millisecond
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var read []client.Record
	for !cons.CaughtUp(end) {
		recs, err := cons.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("consume %s: read %d of %d messages: %v", topic, len(read), total, err)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		read = append(read, recs...)
	}
	cons.Close(ctx)
	if len(read) != total {
		t.Errorf("consumed %d messages, the queues' end offsets add up to %d", len(read), total)
	}
	h := &history.History{Topic: topic, Ops: ops, Final: history.LogOf(history.Records(read)), Nodes: map[string]history.QueueLog{}}
	nodes := 0
	for _, nd := range c.runningNodes() {
		if nd.Paused() {
			continue
		}
		h.Nodes[nd.ID] = procReadNode(t, nd, topic, end, c.dial...)
		nodes++
	}
	r := history.Check(h)
	if !r.OK() {
		t.Errorf("%s: what the group holds does not match what clients were told: %s", topic, r.Errors())
	}
	t.Logf("verified %s: %d messages, %d acknowledged: %d lost, %d duplicated, %d misplaced, %d key order errors; %d nodes compared",
		topic, total, r.AckedMessages, r.Lost, r.Duplicated, r.Counts[history.VMisplaced]+r.Counts[history.VAckPosition],
		r.Counts[history.VKeyOrder], nodes)
	return total
}
