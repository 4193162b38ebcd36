package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/testbin"
	"github.com/raftmq/raftmq/raftlog"
)

var (
	flagRuns        = flag.Int("chaos.runs", 0, "TestChaosCampaign: number of randomized runs (0 skips the campaign)")
	flagDuration    = flag.Duration("chaos.duration", 15*time.Second, "fault phase of each campaign run")
	flagSeed        = flag.Int64("chaos.seed", 0, "first seed of the campaign (run i uses seed+i); 0 picks one from the clock")
	flagFaults      = flag.String("chaos.faults", "all", "comma-separated fault kinds; all: "+strings.Join(AllFaults, ",")+"; full: all and "+strings.Join(ExtraFaults, ","))
	flagDir         = flag.String("chaos.dir", "", "directory for binaries, run directories and failed histories (default: a new temp dir)")
	flagBin         = flag.String("chaos.bin", "", "use this raftmq binary instead of building one")
	flagKeep        = flag.Bool("chaos.keep", false, "keep the directories of passed runs too")
	flagBudget      = flag.Duration("chaos.budget", 0, "TestChaosCampaign: start no new run after this much time (0: no limit)")
	flagKnown       = flag.String("chaos.known", "", "comma-separated violation kinds of known, reported bugs: counted, but they do not fail a run (e.g. ack-position)")
	flagRetention   = flag.Int("chaos.retention-mb", 0, "run the group with 1 MiB segments and --retention-mb N (0: no retention), bodies padded to about 1 KB")
	flagRich        = flag.Bool("chaos.rich", true, "producers send tags, properties, binary bodies, fields at their limits and requests of many messages")
	flagOverLimit   = flag.Bool("chaos.over-limit", true, "send requests just over each produce limit (each must be refused, nothing stored) and some at the 16 MiB request limit (each must be stored)")
	flagTxn         = flag.Bool("chaos.txn", true, "a producer sends transactions: commit, rollback, and unknown with a check-back answer it decided (each committed one must be in the topic once, no rolled back one anywhere)")
	flagReuseSeq    = flag.Bool("chaos.reuse-seq", true, "send requests that reuse a producer id and sequence with other content (each must be refused)")
	flagShortFull   = flag.Bool("chaos.short-full", false, "TestChaosShort: add a fifth schedule (seed 105, retention) with the faults only \"full\" has: corrupt-snapshot, corrupt-stable (and corrupt-running)")
	flagGroups      = flag.Int("chaos.groups", 0, "TestChaosCampaign: run this many groups and a name server per run (RunGroups: faults in every group, the name server killed, a topic shared through the several-group client); 0 or 1: one group")
	flagServerFlags = flag.String("chaos.server-flags", "", "flags added to every server's command line, separated by spaces (\"--max-batch-bytes=524288\")")
	flagDurable     = flag.String("chaos.durability", raftlog.QuorumFsync, "every server's --durability: quorum-fsync (nothing acknowledged may be lost) or quorum-memory (a majority crash may lose what was acknowledged within its bound; all adds "+strings.Join(MemoryFaults, ",")+")")
	flagReport      = flag.String("chaos.report", "", "TestChaosCampaign: write a markdown summary and per-run JSON lines to this path (and path.jsonl)")
)

var (
	setupOnce sync.Once
	setupDir  string
	setupBin  string
	setupErr  error
)

// TestMain checks that the runs stopped every goroutine they started and
// removes the base directory it made, unless a failed run kept its
// directory there.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(
			// grpc-go's resolver/balancer winds down asynchronously after Close.
			goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
			// raft's NetworkTransport.Close leaves pooled outgoing connections
			// open, so a peer's handler for one blocks in Read until the
			// process exits (the in-process raft group of the pipeline test).
			goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	if setupDir != "" && *flagDir == "" {
		os.Remove(setupDir) // only when empty
	}
	os.Exit(code)
}

// setup makes the base directory and builds the server once per test binary.
func setup(t *testing.T) (dir, bin string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("chaos runs need linux (SIGSTOP, tmpfs, Pdeathsig)")
	}
	setupOnce.Do(func() {
		setupDir = *flagDir
		if setupDir == "" {
			setupDir, setupErr = os.MkdirTemp("", "raftmq-chaos-")
			if setupErr != nil {
				return
			}
		} else if setupErr = os.MkdirAll(setupDir, 0o755); setupErr != nil {
			return
		}
		setupBin = *flagBin
		if setupBin == "" {
			setupBin, setupErr = testbin.Path()
		}
	})
	if setupErr != nil {
		t.Fatalf("chaos setup: %v", setupErr)
	}
	return setupDir, setupBin
}

// oddities are the hand-made requests of a run: over-limit shapes from
// start on (they go round).
func oddities(start int) Oddities {
	return Oddities{OverLimit: *flagOverLimit, ReusedSeq: *flagReuseSeq, Start: start}
}

func knownKinds() map[string]bool {
	out := map[string]bool{}
	for _, k := range strings.Split(*flagKnown, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out[k] = true
		}
	}
	return out
}

func runOne(t *testing.T, cfg RunConfig) *Result {
	t.Helper()
	cfg.Known = knownKinds()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+6*time.Minute)
	defer cancel()
	res := Run(ctx, cfg)
	t.Log(res.Line())
	if res.Skipped != "" {
		t.Log(res.Skipped)
	}
	if len(res.Outcomes) > 0 {
		var outs []string
		for k, n := range res.Outcomes {
			outs = append(outs, fmt.Sprintf("%s=%d", k, n))
		}
		sort.Strings(outs)
		t.Logf("outcomes: %s", strings.Join(outs, ", "))
	}
	if res.Report != nil && (res.Report.CrashLost > 0 || res.Report.CrashDeliveries > 0 || res.DamagedNodes > 0) {
		t.Logf("majority crashes under %s: %d acknowledged message(s) lost, acknowledged %s..%s around the crash; %d delivered before the group replaced them; "+
			"%d node(s) marked damaged (%d cut(s) below the applied index) and rebuilt",
			res.Durability, res.Report.CrashLost, res.Report.CrashLostFirst.Round(time.Millisecond), res.Report.CrashLostLast.Round(time.Millisecond),
			res.Report.CrashDeliveries, res.DamagedNodes, res.DamagedCuts)
	}
	if res.Report != nil && res.Report.MaxAckGap > 2*time.Second {
		t.Logf("longest time without an ack began at %s; events around it:\n  %s",
			res.Report.MaxAckGapFrom.Round(time.Millisecond), strings.Join(res.GapEvents, "\n  "))
	}
	if !res.OK() {
		var vs []string
		if res.Report != nil {
			for _, v := range res.Report.Violations {
				vs = append(vs, "  "+v.String())
			}
		}
		t.Errorf("chaos run seed=%d failed; reproduce with -chaos.seed=%d -chaos.runs=1 -chaos.faults=%s -chaos.duration=%s -chaos.durability=%s\n"+
			"history, schedule and node logs: %s\n%s", cfg.Seed, cfg.Seed, strings.Join(cfg.Faults, ","), cfg.Duration, res.Durability, res.Dir, strings.Join(vs, "\n"))
	}
	return res
}

func ep(seed int64, hold time.Duration, kinds ...string) Episode {
	return Episode{Kinds: kinds, Gap: 500 * time.Millisecond, Hold: hold, Seed: seed}
}

// TestChaosShort is the fixed-seed fault run CI does: four short runs with
// fixed schedules that together apply every fault kind of "all" once or
// more, the last with retention. With the default flags every run also
// sends the hand-made requests (over and at the limits, reused sequences).
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos runs take about two minutes")
	}
	dir, bin := setup(t)
	noTmpfs := TmpfsWorks(dir)
	if noTmpfs != nil {
		t.Logf("the full-disk fault is replaced by a kill: %v", noTmpfs)
	}
	plans := []Plan{
		{Seed: 101, DiskNode: -1, LoadThreshold: "0.05", RunAll: true, Episodes: []Episode{
			ep(1, 1500*time.Millisecond, FaultKillLeader),
			ep(2, 1500*time.Millisecond, FaultPartitionLeader),
			ep(3, 1500*time.Millisecond, FaultPause),
			ep(4, 1500*time.Millisecond, FaultPartitionOneWay, FaultDelay),
			ep(5, 0, FaultTransfer),
			ep(6, 1500*time.Millisecond, FaultPartitionFollower, FaultKill),
			ep(23, 0, FaultCorruptRunning),
		}},
		{Seed: 102, DiskNode: -1, LoadThreshold: "0.8", RunAll: true, Episodes: []Episode{
			ep(9, 500*time.Millisecond, FaultMembership),
			ep(7, 500*time.Millisecond, FaultTornWrite),
			ep(8, 500*time.Millisecond, FaultCorrupt),
			ep(16, 1500*time.Millisecond, FaultSlowDisk, FaultKillLeader),
			ep(17, 0, FaultLostUnsynced),
			ep(18, 0, FaultCorruptMeta),
		}},
		{Seed: 103, DiskNode: 1, LoadThreshold: "0.05", RunAll: true, Episodes: []Episode{
			ep(10, 1000*time.Millisecond, FaultDiskFull),
			ep(11, 1500*time.Millisecond, FaultKillLeader),
		}},
		// With retention (see retentionShort): cuts while followers are
		// cut off, paused, killed, or wiped and added back, so they rejoin
		// through the leader's snapshot.
		{Seed: 104, DiskNode: -1, LoadThreshold: "0.05", RunAll: true, Episodes: []Episode{
			ep(12, 2500*time.Millisecond, FaultPartitionFollower),
			ep(13, 2500*time.Millisecond, FaultKill),
			ep(14, 500*time.Millisecond, FaultMembership),
			ep(15, 1500*time.Millisecond, FaultKillLeader),
			ep(24, 0, FaultCorruptIndex), // a stopped follower's
			ep(27, 0, FaultCorruptIndex), // a running node's
		}},
	}
	if *flagShortFull {
		plans = append(plans, Plan{Seed: 105, DiskNode: -1, LoadThreshold: "0.05", RunAll: true, Episodes: []Episode{
			ep(19, 500*time.Millisecond, FaultKill),
			ep(20, 0, FaultCorruptSnapshot),
			ep(21, 0, FaultCorruptStable),
			ep(22, 0, FaultCorruptRunning),
		}})
	}
	// retentionShort are the plans run with --retention-mb.
	retentionShort := map[int64]bool{104: true, 105: true}
	// oddStart spreads the hand-made request shapes over the plans: a 12 s
	// run sends about six of them (one every other second), and as long as
	// each sends three (checked below) the four together send all
	// OddityShapes.
	oddStart := map[int64]int{101: 0, 102: 9, 103: 3, 104: 6, 105: 0}
	if OddityShapes() > 12 {
		t.Fatalf("%d hand-made request shapes: spread them anew over the plans", OddityShapes())
	}
	for _, p := range plans {
		p := p
		t.Run(fmt.Sprintf("seed=%d", p.Seed), func(t *testing.T) {
			var kinds []string
			for _, e := range p.Episodes {
				kinds = append(kinds, e.Kinds...)
			}
			retention := 0
			if retentionShort[p.Seed] {
				retention = 2
			}
			res := runOne(t, RunConfig{Bin: bin, Dir: filepath.Join(dir, fmt.Sprintf("short-%d-%d", p.Seed, time.Now().UnixNano())),
				Seed: p.Seed, Duration: 12 * time.Second, Faults: kinds, Plan: &p, NoTmpfs: noTmpfs, Keep: *flagKeep, Logf: t.Logf,
				RetentionMB: retention, Rich: *flagRich, Transactions: *flagTxn, Oddities: oddities(oddStart[p.Seed])})
			if retentionShort[p.Seed] && res.Report != nil && res.Report.Retained == 0 {
				t.Errorf("retention dropped no acknowledged message: the run did not exercise it")
			}
			if res.Report != nil && res.Report.Acked == 0 {
				t.Errorf("no operation was acknowledged: the run proves nothing")
			}
			if res.Report != nil && *flagTxn && res.Report.TxnChecked == 0 {
				t.Errorf("no transaction was decided by the check-back: the run did not exercise it")
			}
			if res.Report != nil && *flagOverLimit && res.Report.OverLimit+res.Report.AtLimit < 3 {
				t.Errorf("the run sent %d of the hand-made requests at and over the limits, fewer than the 3 the plans count on",
					res.Report.OverLimit+res.Report.AtLimit)
			}
			for _, k := range kinds {
				if res.Applied[k] == 0 && !(k == FaultDiskFull && noTmpfs != nil) {
					t.Errorf("fault %s was not applied (see the events above)", k)
				}
			}
			for k, n := range res.NotCovered {
				t.Errorf("fault %s failed to apply in %d episode(s): a fixed schedule must apply every episode", k, n)
			}
		})
	}
}

// TestChaosShortMemory is the fixed-schedule run CI does in quorum-memory:
// one node's unsynced writes lost (nothing acknowledged may go), then
// majority crashes, from lost-unsynced-majority and from a kill-leader+kill
// episode (what they lose must have been acknowledged within the crash's
// bound). -chaos.seed replaces its seed (106), and with it the workload's
// and the episodes' choices.
func TestChaosShortMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos run takes about a minute")
	}
	dir, bin := setup(t)
	seed := int64(106)
	if *flagSeed != 0 {
		seed = *flagSeed
	}
	p := Plan{Seed: seed, DiskNode: -1, LoadThreshold: "0.05", RunAll: true, Episodes: []Episode{
		ep(seed*10+1, 0, FaultLostUnsynced),
		ep(seed*10+2, 0, FaultLostUnsyncedMajority),
		ep(seed*10+3, 1500*time.Millisecond, FaultKillLeader, FaultKill),
		ep(seed*10+4, 0, FaultLostUnsyncedMajority),
	}}
	var kinds []string
	for _, e := range p.Episodes {
		kinds = append(kinds, e.Kinds...)
	}
	res := runOne(t, RunConfig{Bin: bin, Dir: filepath.Join(dir, fmt.Sprintf("short-memory-%d-%d", seed, time.Now().UnixNano())),
		Seed: seed, Duration: 10 * time.Second, Faults: kinds, Plan: &p, Keep: *flagKeep, Logf: t.Logf,
		Rich: *flagRich, Transactions: *flagTxn, Oddities: oddities(int(seed % int64(OddityShapes()))), Durability: raftlog.QuorumMemory})
	if res.Report != nil && res.Report.Acked == 0 {
		t.Errorf("no operation was acknowledged: the run proves nothing")
	}
	for _, k := range kinds {
		if res.Applied[k] == 0 {
			t.Errorf("fault %s was not applied (see the events above)", k)
		}
	}
	for k, n := range res.NotCovered {
		t.Errorf("fault %s failed to apply in %d episode(s): a fixed schedule must apply every episode", k, n)
	}
}

// TestChaosCampaign runs -chaos.runs randomized runs (seed, seed+1, ...).
//
//	go test ./integration/chaos -run TestChaosCampaign -timeout 0 -v \
//	    -chaos.runs=100 -chaos.duration=15s -chaos.seed=1 -chaos.report=/tmp/chaos.md
func TestChaosCampaign(t *testing.T) {
	if *flagRuns <= 0 {
		t.Skip("set -chaos.runs=N to run the campaign")
	}
	dir, bin := setup(t)
	faults, err := ParseFaults(*flagFaults, *flagDurable)
	if err != nil {
		t.Fatal(err)
	}
	noTmpfs := TmpfsWorks(dir)
	if noTmpfs != nil && contains(faults, FaultDiskFull) {
		t.Logf("the full-disk fault is skipped: %v", noTmpfs)
	}
	seed := *flagSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1_000_000
	}
	var jsonl *os.File
	if *flagReport != "" {
		if jsonl, err = os.Create(*flagReport + ".jsonl"); err != nil {
			t.Fatal(err)
		}
		defer jsonl.Close()
	}
	agg := newAggregate()
	began := time.Now()
	for i := 0; i < *flagRuns; i++ {
		if *flagBudget > 0 && time.Since(began) > *flagBudget {
			t.Logf("budget of %s spent: stopping after %d of %d runs", *flagBudget, i, *flagRuns)
			break
		}
		s := seed + int64(i)
		if *flagGroups > 1 {
			t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
				gr := runGroups(t, GroupsConfig{Groups: *flagGroups, NameServerFaults: true, RunConfig: RunConfig{Bin: bin,
					Dir: filepath.Join(dir, fmt.Sprintf("run-%d", s)), Seed: s, Duration: *flagDuration, Faults: faults, NoTmpfs: noTmpfs,
					Keep: *flagKeep, RetentionMB: *flagRetention, Rich: *flagRich, Transactions: *flagTxn, Durability: *flagDurable,
					ServerFlags: strings.Fields(*flagServerFlags), Oddities: oddities(int(s % int64(OddityShapes())))}})
				for _, r := range gr.Runs {
					agg.add(r)
				}
			})
			continue
		}
		var res *Result
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			res = runOne(t, RunConfig{Bin: bin, Dir: filepath.Join(dir, fmt.Sprintf("run-%d", s)), Seed: s,
				Duration: *flagDuration, Faults: faults, NoTmpfs: noTmpfs, Keep: *flagKeep, RetentionMB: *flagRetention, Logf: t.Logf,
				Rich: *flagRich, Transactions: *flagTxn, Durability: *flagDurable, ServerFlags: strings.Fields(*flagServerFlags),
				Oddities: oddities(int(s % int64(OddityShapes())))})
		})
		agg.add(res)
		if jsonl != nil {
			b, _ := json.Marshal(res)
			jsonl.Write(append(b, '\n'))
		}
	}
	md := agg.markdown(*flagDuration, time.Since(began), seed)
	t.Log("\n" + md)
	if *flagReport != "" {
		if err := os.WriteFile(*flagReport, []byte(md), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

type aggregate struct {
	runs, failed, harness                     int
	failedSeeds                               []int64
	applied, outcomes, violations, notCovered map[string]int
	ops, acked, failedOps, unknown, unknownIn int
	messages, lost, duplicated, diskVerified  int
	delayed, sentBack                         int
	worstLateness                             time.Duration
	deliveries, followerDeliveries, windows   int
	worstGap                                  time.Duration
	worstGapSeed                              int64
	crashLost, crashDeliveries, damagedNodes  int
}

func newAggregate() *aggregate {
	return &aggregate{applied: map[string]int{}, outcomes: map[string]int{}, violations: map[string]int{}, notCovered: map[string]int{}}
}

func (a *aggregate) add(r *Result) {
	if r == nil {
		return
	}
	a.runs++
	if !r.OK() {
		a.failed++
		a.failedSeeds = append(a.failedSeeds, r.Seed)
	}
	if r.Err != "" {
		a.harness++
	}
	for k, n := range r.Applied {
		a.applied[k] += n
	}
	for k, n := range r.Outcomes {
		a.outcomes[k] += n
	}
	for k, n := range r.NotCovered {
		a.notCovered[k] += n
	}
	a.damagedNodes += r.DamagedNodes
	rep := r.Report
	if rep == nil {
		return
	}
	a.crashLost += rep.CrashLost
	a.crashDeliveries += rep.CrashDeliveries
	for k, n := range rep.Counts {
		a.violations[k] += n
	}
	a.ops += rep.Ops
	a.acked += rep.Acked
	a.failedOps += rep.Failed
	a.unknown += rep.Unknown
	a.unknownIn += rep.UnknownPresent
	a.messages += rep.Messages
	a.lost += rep.Lost
	a.duplicated += rep.Duplicated
	a.diskVerified += rep.DiskVerified
	a.delayed += rep.Delayed
	a.sentBack += rep.SentBack
	a.worstLateness = max(a.worstLateness, rep.MaxDelayLateness)
	a.deliveries += rep.Deliveries
	a.followerDeliveries += rep.FollowerDeliveries
	a.windows += rep.Windows
	if rep.MaxAckGap > a.worstGap {
		a.worstGap, a.worstGapSeed = rep.MaxAckGap, r.Seed
	}
}

func table(m map[string]int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "| %s | %d |\n", k, m[k])
	}
	return b.String()
}

func (a *aggregate) markdown(d, took time.Duration, seed int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "runs: %d (fault phase %s each, first seed %d), took %s\n", a.runs, d, seed, took.Round(time.Second))
	fmt.Fprintf(&b, "failed runs: %d %v (harness errors: %d)\n\n", a.failed, a.failedSeeds, a.harness)
	fmt.Fprintf(&b, "| figure | value |\n| --- | --- |\n")
	fmt.Fprintf(&b, "| produce requests | %d |\n| acknowledged | %d |\n| definite failures | %d |\n| unknown-outcome requests | %d (their messages in the log, each once at most: %d) |\n",
		a.ops, a.acked, a.failedOps, a.unknown, a.unknownIn)
	fmt.Fprintf(&b, "| messages in the final logs | %d |\n| lost | %d |\n| duplicated | %d |\n| acknowledged messages verified on disk at their id | %d |\n",
		a.messages, a.lost, a.duplicated, a.diskVerified)
	if a.crashLost+a.crashDeliveries+a.damagedNodes > 0 {
		fmt.Fprintf(&b, "| acknowledged messages lost in majority crashes (quorum-memory, within the bound) | %d (delivered before the group replaced them: %d; nodes marked damaged and rebuilt: %d) |\n",
			a.crashLost, a.crashDeliveries, a.damagedNodes)
	}
	fmt.Fprintf(&b, "| consumed during faults | %d (served by followers: %d) |\n", a.deliveries, a.followerDeliveries)
	fmt.Fprintf(&b, "| delayed messages delivered, once and not early | %d (latest after its time: %s) |\n| send-backs acknowledged, each copied once | %d |\n",
		a.delayed, a.worstLateness.Round(time.Millisecond), a.sentBack)
	fmt.Fprintf(&b, "| windows without acks > 1s | %d |\n| worst unavailability (longest time without an ack) | %s (seed %d) |\n\n",
		a.windows, a.worstGap.Round(time.Millisecond), a.worstGapSeed)
	fmt.Fprintf(&b, "| fault | episodes applied |\n| --- | --- |\n%s\n", table(a.applied))
	if len(a.notCovered) > 0 {
		fmt.Fprintf(&b, "| fault | episodes that failed to apply it (not covered) |\n| --- | --- |\n%s\n", table(a.notCovered))
	}
	if len(a.outcomes) > 0 {
		fmt.Fprintf(&b, "| outcome | count |\n| --- | --- |\n%s\n", table(a.outcomes))
	}
	if len(a.violations) > 0 {
		fmt.Fprintf(&b, "| violation | count |\n| --- | --- |\n%s\n", table(a.violations))
	}
	return b.String()
}
