package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
)

// RunConfig configures one run.
type RunConfig struct {
	Bin      string        // the raftmq binary (Build)
	Dir      string        // the run's directory; kept when the run fails
	Seed     int64         // determines the schedule and the workload's choices
	Duration time.Duration // of the fault phase
	Faults   []string      // enabled fault kinds
	Workers  int           // producers (default 6)
	// RetentionMB, when > 0, runs the group with 1 MiB log segments,
	// --retention-mb RetentionMB and no grace period, and pads message bodies
	// to about 1 KB so that retention cuts the log many times during the run.
	RetentionMB int
	// NoTmpfs says tmpfs cannot be mounted: the full-disk fault is skipped.
	NoTmpfs error
	Keep    bool // keep the run directory even when the run passes
	// Rich makes the producers send tags, properties, binary bodies, fields
	// at their limits and requests of many messages (Workload.Rich).
	Rich bool
	// Transactions adds a producer that sends in transactions
	// (Workload.RunTxnProducer).
	Transactions bool
	// Oddities are hand-made requests over the limits and reused producer
	// sequences (Workload.RunOddities).
	Oddities Oddities
	// Plan, when set, replaces the schedule drawn from Seed.
	Plan *Plan
	// Known are violation kinds of known, reported bugs: counted and
	// printed, but they do not fail the run.
	Known map[string]bool
	Logf  func(string, ...any)
	// Part, when set, makes this run one group of a run over several
	// groups (RunGroups).
	Part *GroupPart
	// Durability is every node's --durability ("": raftlog.QuorumFsync);
	// SyncInterval its --sync-interval under quorum-memory (0: 50 ms).
	// The checker judges losses by it (history.History.Durability).
	Durability   string
	SyncInterval time.Duration
	// ServerFlags are added to every node's command line.
	ServerFlags []string
}

// GroupPart is what a run over several groups (RunGroups) adds to one
// group's run: the group registers with the name server, and the topic the
// several-group client writes is read back and checked on this group too.
type GroupPart struct {
	Name       string // --broker-name
	NameServer string // --namesrv
	// Ready is called once the group has a leader and holds the run's own
	// topic; Quiesce once the run's own producers have stopped, and
	// returns when nothing else writes to the group any more.
	Ready, Quiesce func()
	// Topic is the several-group client's topic; Rec is what that client
	// was told about the messages it sent to this group.
	Topic string
	Rec   *history.Recorder
	// TxnGroup, when set, is the producer group of that client's
	// transactions, and TxnCheck its check-back: once healed, the run
	// decides that group's half messages of Topic still undecided on this
	// group as the client decided them.
	TxnGroup string
	TxnCheck func(context.Context, client.HalfMessage) client.TxnState
}

// Result is what one run found.
type Result struct {
	Seed     int64          `json:"seed"`
	Dir      string         `json:"dir"`
	Plan     []string       `json:"plan"`
	Applied  map[string]int `json:"applied"`
	Outcomes map[string]int `json:"outcomes,omitempty"`
	// NotCovered counts, per fault kind, the episodes that failed to apply it.
	NotCovered map[string]int  `json:"not_covered,omitempty"`
	Skipped    string          `json:"skipped,omitempty"`
	Report     *history.Report `json:"report"`
	// Durability is the nodes' --durability. DamagedCuts counts the cuts
	// below a node's applied index the nodes reported ("raft replaced log
	// entries this node had applied"), DamagedNodes the nodes that reported
	// one, each then rebuilt: after a majority crash of a quorum-memory
	// group an expected outcome, otherwise a violation.
	Durability   string `json:"durability"`
	DamagedCuts  int    `json:"damaged_cuts,omitempty"`
	DamagedNodes int    `json:"damaged_nodes,omitempty"`
	// GapEvents are the nemesis events around the longest time without an ack.
	GapEvents []string      `json:"gap_events,omitempty"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	// Shared is the check of the several-group client's topic on this
	// group (with RunConfig.Part).
	Shared *history.Report `json:"shared_report,omitempty"`
	// Err is a harness failure (could not build, start, or read): the run
	// proves nothing.
	Err string `json:"error,omitempty"`

	known map[string]bool
}

// OK is true when the run completed and found nothing.
func (r *Result) OK() bool {
	return r.Err == "" && r.Report != nil && r.Report.OKIgnoring(r.known) && (r.Shared == nil || r.Shared.OKIgnoring(r.known))
}

// Line is the one-line summary of a run.
func (r *Result) Line() string {
	var applied []string
	for k, n := range r.Applied {
		applied = append(applied, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(applied)
	s := fmt.Sprintf("seed=%d durability=%s faults=[%s]", r.Seed, r.Durability, strings.Join(applied, " "))
	if len(r.NotCovered) > 0 {
		var nc []string
		for k, n := range r.NotCovered {
			nc = append(nc, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(nc)
		s += " not-applied=[" + strings.Join(nc, " ") + "]"
	}
	if r.Report != nil {
		s += " " + r.Report.Summary()
	}
	if r.DamagedNodes > 0 {
		s += fmt.Sprintf(" damaged-nodes=%d (cuts below applied %d, rebuilt)", r.DamagedNodes, r.DamagedCuts)
	}
	if r.Shared != nil {
		s += " shared topic: " + r.Shared.Summary()
	}
	s += fmt.Sprintf(" elapsed=%s", r.Elapsed.Round(100*time.Millisecond))
	if r.Err != "" {
		s += " HARNESS ERROR: " + r.Err
	}
	if r.OK() {
		s += " ok"
	} else {
		s += " FAIL (history and logs in " + r.Dir + ")"
	}
	return s
}

const (
	topicName = "chaos"
	numQueues = 4
)

// Run starts a 3-node group, runs the workload and the plan's faults for
// cfg.Duration, heals everything, waits for the group to settle, reads the
// log back through a fresh consumer group and from every node, and checks
// the history. On failure the history (history.json), the plan and every
// node's log stay in cfg.Dir.
func Run(ctx context.Context, cfg RunConfig) *Result {
	start := time.Now()
	if cfg.Workers <= 0 {
		cfg.Workers = 6
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Durability == "" {
		cfg.Durability = raftlog.QuorumFsync
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = raftlog.DefaultDurabilityConfig().SyncInterval
	}
	res := &Result{Seed: cfg.Seed, Dir: cfg.Dir, Applied: map[string]int{}, known: cfg.Known, Durability: cfg.Durability}
	faults := cfg.Faults
	if cfg.NoTmpfs != nil {
		var keep []string
		for _, f := range faults {
			if f != FaultDiskFull {
				keep = append(keep, f)
			} else {
				res.Skipped = fmt.Sprintf("%s skipped: %v", FaultDiskFull, cfg.NoTmpfs)
			}
		}
		faults = keep
	}
	plan := NewPlan(cfg.Seed, faults, cfg.Duration)
	if cfg.Plan != nil {
		plan = *cfg.Plan
		if cfg.NoTmpfs != nil {
			for i, e := range plan.Episodes {
				for j, k := range e.Kinds {
					if k == FaultDiskFull {
						plan.Episodes[i].Kinds[j] = FaultKill
						plan.DiskNode = -1
						res.Skipped = fmt.Sprintf("%s replaced by %s: %v", FaultDiskFull, FaultKill, cfg.NoTmpfs)
					}
				}
			}
		}
	}
	for _, e := range plan.Episodes {
		res.Plan = append(res.Plan, e.String())
	}
	h := &history.History{Seed: cfg.Seed, Topic: topicName, Queues: numQueues, Retention: cfg.RetentionMB > 0, FollowerReads: true,
		Durability: cfg.Durability}
	var nemesis *Nemesis
	defer func() {
		res.Elapsed = time.Since(start)
		if nemesis != nil {
			nemesis.mu.Lock()
			for k, n := range nemesis.Applied {
				res.Applied[k] = n
			}
			res.Outcomes = nemesis.Outcomes
			nemesis.mu.Unlock()
			for k, n := range indexOutcomes(nemesis.C) {
				res.Outcomes[k] += n
			}
		}
		finish(cfg, res, h, plan)
	}()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		res.Err = err.Error()
		return res
	}

	// --chaos-lazyfs: every node's raft-wal writes reach its files only at
	// fsync (a SIGKILL loses what was not synced yet, as a machine crash
	// would) and the slow-disk faults can delay its fsyncs.
	//
	// --verify-log sync: the corrupt faults damage an entry of a stopped
	// node and require it to refuse to start. By default a node checks
	// before it starts only what it replays after its last snapshot and
	// its unsynced tail; older entries are checked in the background and
	// by every read (broker/server TestOldLogDamageFoundInTheBackground),
	// so an older damaged entry would not refuse the start.
	extra := []string{"--cold-read-bytes", "2048", "--load-threshold", plan.LoadThreshold, "--chaos-lazyfs",
		"--durability", cfg.Durability, "--verify-log", "sync"}
	if cfg.Durability == raftlog.QuorumMemory {
		// Under the lazy file system a write reaches the file only when
		// the durability syncer fsyncs it.
		extra = append(extra, "--sync-interval", cfg.SyncInterval.String())
	}
	extra = append(extra, cfg.ServerFlags...)
	if cfg.RetentionMB > 0 {
		// No grace period: followers that are killed or cut off fall behind
		// cuts and rejoin through the leader's snapshot.
		extra = append(extra, "--segment-mb", "1", "--retention-mb", fmt.Sprint(cfg.RetentionMB), "--retention-check", "200ms",
			"--retention-grace", "0s")
	}
	if p := cfg.Part; p != nil {
		extra = append(extra, "--broker-name", p.Name, "--cluster", "chaos", "--namesrv", p.NameServer, "--register-period", "1s")
	}
	c, err := NewCluster(ClusterConfig{Bin: cfg.Bin, Dir: cfg.Dir, Nodes: 3, TmpfsNode: plan.DiskNode, TmpfsMB: 256, Logf: cfg.Logf,
		Extra: extra})
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer c.Close()
	for _, n := range c.Nodes {
		if err := c.StartNode(n); err != nil {
			res.Err = err.Error()
			return res
		}
	}
	if err := c.WaitAnswering(ctx, 30*time.Second); err != nil {
		res.Err = "start: " + err.Error()
		return res
	}
	if c.WaitLeader(ctx, 30*time.Second) == nil {
		res.Err = "no leader within 30s of start"
		return res
	}
	if err := retry(ctx, 30*time.Second, func(ctx context.Context) error {
		_, err := c.Admin.CreateTopic(ctx, topicName, numQueues, true)
		return err
	}); err != nil {
		res.Err = fmt.Sprintf("create topic: %v", err)
		return res
	}
	if cfg.Part != nil {
		cfg.Part.Ready()
	}

	rec := history.NewRecorder()
	w := &Workload{Topic: topicName, Queues: numQueues, Servers: c.ClientAddrs(), Workers: cfg.Workers,
		OpTimeout: 10 * time.Second, Think: 5 * time.Millisecond}
	if cfg.RetentionMB > 0 {
		w.Pad = 1000
	}
	w.Rich = cfg.Rich
	w.SendBackGroup = "live-0" // the group-follower-reads consumer below
	if cfg.Transactions {
		w.Transactions = 1
	}
	var diskNode *Node
	if plan.DiskNode >= 0 {
		diskNode = c.Nodes[plan.DiskNode]
	}
	nemesis = NewNemesis(c, rec, w, diskNode, cfg.Logf)
	nemesis.Retention = cfg.RetentionMB > 0
	nemesis.SyncInterval = cfg.SyncInterval

	// Producers and consumers.
	prodCtx, stopProducers := context.WithCancel(ctx)
	consCtx, stopConsumers := context.WithCancel(ctx)
	defer stopProducers()
	defer stopConsumers()
	var prodWG, consWG sync.WaitGroup
	for i := 0; i < cfg.Workers; i++ {
		prodWG.Add(1)
		rng := rand.New(rand.NewSource(cfg.Seed*1000 + int64(i)))
		go func(i int) {
			defer prodWG.Done()
			if err := w.RunProducer(prodCtx, i, rng, rec); err != nil {
				cfg.Logf("producer %d: %v", i, err)
			}
		}(i)
	}
	for i := 0; i < w.Transactions; i++ {
		prodWG.Add(1)
		rng := rand.New(rand.NewSource(cfg.Seed*1000 + 500 + int64(i)))
		go func(i int) {
			defer prodWG.Done()
			if err := w.RunTxnProducer(prodCtx, i, rng, rec); err != nil {
				cfg.Logf("transactional producer %d: %v", i, err)
			}
		}(i)
	}
	prodWG.Add(1)
	go func() {
		defer prodWG.Done()
		if err := w.RunOddities(prodCtx, cfg.Oddities, cfg.Seed, time.Second, rec); err != nil {
			cfg.Logf("oddities: %v", err)
		}
	}()
	consumers := []struct {
		name  string
		delay time.Duration
		mod   func(*client.ConsumerConfig)
	}{
		{"group-follower-reads", 0, func(cc *client.ConsumerConfig) {}},
		{"pinned-follower-reads-late", 3 * time.Second, func(cc *client.ConsumerConfig) { cc.Queues = []int32{0, 1, 2, 3} }},
		{"pinned-leader-reads", 0, func(cc *client.ConsumerConfig) { cc.Queues = []int32{0, 1, 2, 3}; cc.FollowerReads = false }},
	}
	for i, cn := range consumers {
		cc := client.DefaultConsumerConfig(topicName, fmt.Sprintf("live-%d", i))
		cc.MaxMessages = 64
		cn.mod(&cc)
		consWG.Add(1)
		go func(name string, delay time.Duration, cc client.ConsumerConfig) {
			defer consWG.Done()
			select {
			case <-consCtx.Done():
				return
			case <-time.After(delay):
			}
			if err := w.RunConsumer(consCtx, name, cc, rec); err != nil {
				cfg.Logf("consumer %s: %v", name, err)
			}
		}(cn.name, cn.delay, cc)
	}

	// Faults.
	time.Sleep(time.Second) // let the workload warm up
	h.FaultStart = rec.Now()
	deadline := time.Now().Add(cfg.Duration)
	nemesis.Run(ctx, plan, deadline)
	if d := time.Until(deadline); d > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	h.FaultEnd = rec.Now()
	rec.Event("heal", "healing everything")
	nemesis.HealAll(ctx)

	// Wind down: producers finish their request in flight (bounded by the
	// op timeout), consumers get a moment to catch up.
	stopProducers()
	prodWG.Wait()
	if cfg.Part != nil {
		cfg.Part.Quiesce()
	}
	time.Sleep(time.Second)
	stopConsumers()
	consWG.Wait()

	// A node that kept entries a majority crash took from the group has
	// applied more than the group holds and never settles: rebuild it
	// first. The leader's first append after the crash cuts its log.
	nemesis.mu.Lock()
	crashed := len(nemesis.Crashes) > 0
	nemesis.mu.Unlock()
	if crashed {
		time.Sleep(time.Second)
	}
	nemesis.rebuildDamaged(ctx, cfg.Durability)
	settled := c.WaitSettled(ctx, 45*time.Second)
	if settled != nil && nemesis.rebuildDamaged(ctx, cfg.Durability) > 0 {
		settled = c.WaitSettled(ctx, 45*time.Second)
	}
	if err := settled; err != nil {
		// Say why, then restart the nodes that are behind so the rest of
		// the checks still run on a whole group.
		stuck := c.Lagging(ctx)
		for _, n := range stuck {
			if line := walStuckLine(n.LogSinceStart()); line != "" {
				nemesis.violation(history.VWALStuck, "after healing: %v; %s's log store keeps failing after its disk has space again, until it is restarted: %s", err, n.ID, line)
			} else {
				nemesis.violation(history.VLiveness, "after healing: %v; %s is behind", err, n.ID)
			}
		}
		if len(stuck) == 0 {
			nemesis.violation(history.VLiveness, "after healing: %v", err)
		}
		for _, n := range stuck {
			rec.Event("heal", "restarting %s, which did not catch up", n.ID)
			c.Stop(n, 10*time.Second)
			nemesis.restart(ctx, n, "because it did not catch up")
		}
		if err := c.WaitSettled(ctx, 60*time.Second); err != nil {
			// A leader whose replication to a follower is wedged
			// (hashicorp/raft#612) heals only when leadership moves:
			// SIGQUIT it (its goroutine stacks land in its log) and
			// restart it.
			if l := c.Leader(ctx); l != nil {
				rec.Event("heal", "still not settled (%v): SIGQUIT to the leader %s for its stacks, then restart it", err, l.ID)
				l.SignalAndWait(syscall.SIGQUIT, 10*time.Second)
				c.Kill(l)
				nemesis.restart(ctx, l, "after SIGQUIT")
				if err2 := c.WaitSettled(ctx, 60*time.Second); err2 == nil {
					nemesis.violation(history.VReplStall, "after restarting the nodes that were behind: %v; settled once the leader %s was restarted: "+
						"its replication to a follower had stopped (goroutine stacks in %s)", err, l.ID, l.Log)
				} else {
					nemesis.violation(history.VLiveness, "after restarting the nodes that were behind and then the leader %s: %v", l.ID, err2)
				}
			} else {
				nemesis.violation(history.VLiveness, "after restarting the nodes that were behind: %v", err)
			}
		}
	}
	nemesis.rebuildDamaged(ctx, cfg.Durability)
	nemesis.mu.Lock()
	res.DamagedCuts, res.DamagedNodes = nemesis.cuts, len(nemesis.rebuilt)
	nemesis.mu.Unlock()
	// Transactions whose decision a fault lost are decided now, as their
	// clients decided them: every node must hold what the final reads judge.
	if w.Transactions > 0 {
		n, err := w.SettleTransactions(ctx, rec, 30*time.Second)
		rec.Event("transactions", "the check-back decided %d transactions left undecided", n)
		if err != nil {
			nemesis.violation(history.VLiveness, "after healing: %v", err)
		}
	}
	if p := cfg.Part; p != nil && p.TxnCheck != nil {
		n, err := settleTransactions(ctx, w.Servers, p.Topic, p.TxnGroup, p.TxnCheck, 30*time.Second)
		rec.Event("transactions", "the check-back decided %d transactions of the several-group client left undecided", n)
		if err != nil {
			nemesis.violation(history.VLiveness, "after healing, the several-group client's transactions: %v", err)
		}
	}
	// Delayed messages still waiting are delivered before the logs are
	// read: every node must hold what the final reads judge.
	if waited := waitDelayed(ctx, rec); waited > 0 {
		rec.Event("delayed", "waited %s for the last delayed messages to be due", waited.Round(time.Millisecond))
		if err := c.WaitSettled(ctx, 45*time.Second); err != nil {
			nemesis.violation(history.VLiveness, "after the last delayed messages were due: %v", err)
		}
	}
	// With retention, the last cut may still be on its way: the leader
	// checks every 200 ms and nothing is written any more.
	if cfg.RetentionMB > 0 {
		time.Sleep(time.Second)
	}
	committed := c.MinApplied(ctx)
	rec.Event("settled", "every node applied %d; stopping every node to read its stores offline", committed)

	// The logs on disk: stop every node, read its stores offline, compare
	// them entry by entry and look up every acknowledged message at its id.
	for _, n := range c.Nodes {
		if err := c.Stop(n, 20*time.Second); err != nil {
			cfg.Logf("stop %s: %v", n.ID, err)
		}
	}
	var shared *history.History
	var sharedIDs, sharedTxns []string
	if p := cfg.Part; p != nil {
		// Its live consumer (RunGroups) reads through the several-group
		// client, which may or may not be served by followers.
		shared = &history.History{Seed: cfg.Seed, Topic: p.Topic}
		sharedIDs, sharedTxns = p.Rec.AckedIDs(), p.Rec.TxnBodies()
	}
	diskViolations := readDisks(c, h, rec, committed, cfg.RetentionMB, sharedIDs, sharedTxns)

	// Restart every node so that the final reads come from disk, not from
	// caches filled while the faults ran. Without retention limits: the log
	// the final reads judge must be the one just read offline, not one a
	// later cut shortened.
	c.Group.SetServerArgs(withoutFlag(c.Group.ServerArgs(), "--retention-mb"))
	rec.Event("restart", "restarting every node for the final read (caches empty, no retention limits)")
	for _, n := range c.Nodes {
		nemesis.restart(ctx, n, "for the final read")
	}
	if err := c.WaitSettled(ctx, 60*time.Second); err != nil {
		nemesis.violation(history.VLiveness, "after restarting every node for the final read: %v", err)
	}
	// Settled holds as soon as the nodes agree on a leader and on their
	// applied index; right after a restart of every node that may be the
	// same low index before any of them has replayed its log (an FSM that
	// has applied nothing knows no topic). The final reads start once
	// every node has applied what the group had committed before the stop.
	if err := c.WaitApplied(ctx, committed, 60*time.Second); err != nil {
		nemesis.violation(history.VLiveness, "after restarting every node for the final read: %v", err)
	}
	rec.Event("settled", "every node applied %d again; reading the log back", committed)

	// Where the reads start. Without retention every queue starts at 0,
	// whatever the broker says; with it, at the minimum it reports (the
	// checker judges what is missing by the announced cuts, not by this).
	h.Min = map[int32]uint64{}
	for q := int32(0); q < numQueues; q++ {
		h.Min[q] = 0
	}
	if cfg.RetentionMB > 0 {
		if err := retry(ctx, 30*time.Second, func(ctx context.Context) error {
			ti, err := c.Admin.DescribeTopic(ctx, topicName)
			if err == nil {
				for _, q := range ti.QueueInfo {
					h.Min[q.Queue] = q.MinOffset
				}
			}
			return err
		}); err != nil {
			res.Err = fmt.Sprintf("describe topic: %v", err)
		}
	}

	// Read back from every node, pinned, and through a fresh group.
	h.Nodes = map[string]history.QueueLog{}
	h.NodeErrors = map[string]string{}
	for _, n := range c.Nodes {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		l, err := ReadNode(rctx, n.Client, topicName, h.Min, h.Retention)
		cancel()
		if err != nil {
			h.NodeErrors[n.ID] = err.Error()
			continue
		}
		h.Nodes[n.ID] = l
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	final, err := ReadAll(rctx, c.ClientAddrs(), topicName, fmt.Sprintf("final-%d", cfg.Seed))
	cancel()
	if err != nil {
		res.Err = fmt.Sprintf("final read: %v", err)
	}
	h.Final = final
	rec.Fill(h)
	nemesis.mu.Lock()
	h.MajorityCrashes = append([]history.MajorityCrash(nil), nemesis.Crashes...)
	nemesis.mu.Unlock()
	h.Cuts = nodeCuts(c.Nodes, time.UnixMilli(h.Start))
	if len(h.SendBacks) > 0 {
		h.Retry, h.DeadLetters = readCopies(ctx, c.ClientAddrs(), w.SendBackGroup, cfg.Seed, res)
	}
	res.Report = history.Check(h)
	if shared != nil {
		res.Shared = checkShared(ctx, c, cfg, shared, h)
	}
	from, to := res.Report.MaxAckGapFrom, res.Report.MaxAckGapFrom+res.Report.MaxAckGap
	for _, e := range h.Events {
		if e.At >= from-4*time.Second && e.At <= to {
			res.GapEvents = append(res.GapEvents, fmt.Sprintf("%s %s %s", e.At.Round(time.Millisecond), e.Kind, e.Detail))
		}
	}
	for _, v := range diskViolations {
		res.Report.Add(v.Kind, "%s", v.Detail)
	}
	nemesis.mu.Lock()
	for _, v := range nemesis.Violations {
		res.Report.Add(v.Kind, "%s", v.Detail)
	}
	// A fault kind the schedule tried and never applied was not covered.
	res.NotCovered = map[string]int{}
	for k, n := range nemesis.Skipped {
		res.NotCovered[k] = n
		if nemesis.Applied[k] == 0 {
			res.Report.Add(history.VCoverage, "fault %s was scheduled %d time(s) and never applied (see the skip events)", k, n)
		}
	}
	nemesis.mu.Unlock()
	if res.Report.Counts[history.VLiveness] > 0 || res.Report.Counts[history.VWALStuck] > 0 || res.Report.Counts[history.VReplStall] > 0 {
		// Where was everyone stuck? The stacks land in the nodes' logs.
		c.DumpStacks()
		rec.Event("diagnosis", "SIGQUIT sent to every node: goroutine stacks are in the server logs")
	}
	return res
}

// checkShared reads the several-group client's topic back from this
// group, through a fresh consumer group and from every node pinned to it,
// and checks it against what that client was told about this group; the
// disk view (every acknowledged id looked up in the logs read offline) is
// the one the run's own check used.
func checkShared(ctx context.Context, c *Cluster, cfg RunConfig, sh, own *history.History) *history.Report {
	sh.DiskRead, sh.Disk, sh.TxnDisk = own.DiskRead, own.Disk, own.TxnDisk
	sh.Nodes, sh.NodeErrors = map[string]history.QueueLog{}, map[string]string{}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	final, err := ReadAll(rctx, c.ClientAddrs(), sh.Topic, fmt.Sprintf("final-shared-%d", cfg.Seed))
	sh.Final = final
	sh.Queues = int32(len(final))
	sh.Min = map[int32]uint64{}
	for q := range final {
		sh.Min[q] = 0
	}
	for _, n := range c.Nodes {
		l, err := ReadNode(rctx, n.Client, sh.Topic, sh.Min, false)
		if err != nil {
			sh.NodeErrors[n.ID] = err.Error()
			continue
		}
		sh.Nodes[n.ID] = l
	}
	cfg.Part.Rec.Fill(sh)
	// The group's majority crashes, on the several-group client's clock
	// (millisecond precision, which the crash's margin covers).
	sh.Durability = own.Durability
	shift := time.Duration(own.Start-sh.Start) * time.Millisecond
	for _, c := range own.MajorityCrashes {
		c.At += shift
		c.Recovered += shift
		sh.MajorityCrashes = append(sh.MajorityCrashes, c)
	}
	for _, c := range own.Cuts {
		c.At += shift
		sh.Cuts = append(sh.Cuts, c)
	}
	rep := history.Check(sh)
	if err != nil {
		rep.Add(history.VLiveness, "final read of %s: %v", sh.Topic, err)
	}
	if err := sh.WriteJSON(filepath.Join(cfg.Dir, "shared-history.json")); err != nil {
		cfg.Logf("%v", err)
	}
	return rep
}

// readCopies reads the send-back group's retry and dead-letter topics from
// earliest (one queue each; a topic nothing was sent to does not exist).
func readCopies(ctx context.Context, servers []string, group string, seed int64, res *Result) (retry, dead []history.LogEntry) {
	for _, t := range []struct {
		topic string
		into  *[]history.LogEntry
	}{{mq.RetryTopic(group), &retry}, {mq.DeadLetterTopic(group), &dead}} {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		l, err := ReadAll(rctx, servers, t.topic, fmt.Sprintf("final-copies-%d", seed))
		cancel()
		if err != nil && status.Code(errors.Unwrap(err)) == codes.NotFound {
			continue
		}
		if err != nil {
			res.Err = fmt.Sprintf("read %s: %v", t.topic, err)
		}
		for _, q := range l {
			*t.into = append(*t.into, q...)
		}
	}
	return retry, dead
}

// waitDelayed sleeps until every delayed message sent is due, plus time for
// the leader's scheduler to deliver it, and says how long it slept.
func waitDelayed(ctx context.Context, rec *history.Recorder) time.Duration {
	var h history.History
	rec.Fill(&h)
	due := delayedDue(&h)
	if due.IsZero() {
		return 0
	}
	d := time.Until(due.Add(1500 * time.Millisecond))
	if d <= 0 {
		return 0
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return d
}

// finish writes the artefacts of a failed run and removes a passed run's
// directory (unless asked to keep it).
func finish(cfg RunConfig, res *Result, h *history.History, plan Plan) {
	if res.OK() && !cfg.Keep {
		if err := os.RemoveAll(cfg.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			cfg.Logf("remove %s: %v", cfg.Dir, err)
		}
		return
	}
	if err := h.WriteJSON(filepath.Join(cfg.Dir, "history.json")); err != nil {
		cfg.Logf("%v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d\nload threshold %s, tmpfs node %d\n", plan.Seed, plan.LoadThreshold, plan.DiskNode)
	for i, e := range plan.Episodes {
		fmt.Fprintf(&b, "episode %d: %s gap=%s hold=%s\n", i, e, e.Gap, e.Hold)
	}
	b.WriteString("\nevents:\n")
	for _, e := range h.Events {
		fmt.Fprintf(&b, "%9s %-18s %s\n", e.At.Round(time.Millisecond), e.Kind, e.Detail)
	}
	os.WriteFile(filepath.Join(cfg.Dir, "plan.txt"), []byte(b.String()), 0o644)
	if j, err := json.MarshalIndent(res, "", "  "); err == nil {
		os.WriteFile(filepath.Join(cfg.Dir, "result.json"), j, 0o644)
	}
}

// readDisks reads every stopped node's stores offline (ReadDiskLog),
// fills the history's disk view (the message at every acknowledged id and
// the last retention cut) and returns what the logs themselves violate:
// entries that do not decode, logs that differ, a node missing committed
// entries, and with retention a cut the size rule does not allow.
func readDisks(c *Cluster, h *history.History, rec *history.Recorder, committed uint64, retentionMB int, moreIDs, moreTxns []string) []history.Violation {
	scan := NewDiskScan(append(rec.AckedIDs(), moreIDs...))
	scan.Watch(append(rec.TxnBodies(), moreTxns...))
	var logs []*DiskLog
	var out []history.Violation
	for _, n := range c.Nodes {
		if n.Running() {
			out = append(out, history.Violation{Kind: history.VDisk, Detail: fmt.Sprintf("%s still runs: its stores were not read offline", n.ID)})
			continue
		}
		d, err := ReadDiskLog(n.ID, n.Data, scan)
		if err != nil {
			out = append(out, history.Violation{Kind: history.VDisk, Detail: err.Error()})
			continue
		}
		rec.Event("disk", "%s: log %d..%d on disk, stable term %d, %d snapshot(s)", n.ID, d.First, d.Last, d.StableTerm, d.Snapshots)
		logs = append(logs, d)
	}
	h.DiskRead = len(logs) > 0 // a node that could not be read is a violation already
	h.Disk = scan.Found
	h.TxnDisk = scan.WatchFound
	h.Cut = scan.Cut()
	out = append(out, scan.Bad...)
	out = append(out, CompareDiskLogs(logs, committed)...)
	if retentionMB > 0 && h.Cut > 0 {
		out = append(out, checkCut(logs, h.Cut, committed, int64(retentionMB)<<20, 1<<20)...)
	}
	return out
}

// withoutFlag returns args without the flag name and its value.
func withoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == name {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// checkCut checks the last retention cut against the size rule
// (retention keeps the log within maxBytes of segment files by dropping
// whole segments of segBytes from the oldest): the cut is at or below what
// was applied, and the entries kept from it on hold no more than maxBytes
// and one segment more (the tail segment is always kept). The rule is an
// upper bound only: it counts a segment's preallocated space, so a log may
// keep much less (little more than its tail), and that is not checked.
func checkCut(logs []*DiskLog, cut, committed uint64, maxBytes, segBytes int64) []history.Violation {
	var out []history.Violation
	if cut > committed+1 {
		out = append(out, history.Violation{Kind: history.VRetention, Detail: fmt.Sprintf("retention cut at index %d above the applied index %d", cut, committed)})
	}
	for _, d := range logs {
		if kept := d.BytesFrom(cut); kept > maxBytes+segBytes {
			out = append(out, history.Violation{Kind: history.VRetention, Detail: fmt.Sprintf("%s keeps %d bytes of entries from the last cut (index %d) on, more than %d MiB and one %d MiB segment: retention did not keep its limit",
				d.Node, kept, cut, maxBytes>>20, segBytes>>20)})
		}
	}
	return out
}

// walStuckLine returns the last log store error of a node that could not
// catch up after a full disk, if its log shows one: raft-wal's tail stays
// sealed after a failed rotation ("segment is sealed"), or a half-created
// segment file blocks the next one ("file exists").
func walStuckLine(log string) string {
	last := ""
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "segment is sealed") || (strings.Contains(l, ".wal: file exists")) {
			last = strings.TrimSpace(l)
		}
	}
	return last
}
