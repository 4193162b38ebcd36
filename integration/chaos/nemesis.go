package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/internal/faultproxy"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/raftlog"
)

// Fault kinds.
const (
	FaultKillLeader        = "kill-leader"        // SIGKILL the leader, restart it after the hold
	FaultKill              = "kill"               // SIGKILL any node, restart it after the hold
	FaultPause             = "pause"              // SIGSTOP a node (the leader half the time), SIGCONT after the hold
	FaultPartitionLeader   = "partition-leader"   // cut the leader off from both followers
	FaultPartitionFollower = "partition-follower" // cut one follower off
	FaultPartitionOneWay   = "partition-oneway"   // drop everything one node sends to another (not the other way)
	FaultDelay             = "delay"              // add latency to one node's links or all links
	FaultTransfer          = "transfer"           // leadership transfer during load
	FaultMembership        = "member-change"      // member remove, wipe, start empty, member add
	FaultTornWrite         = "torn-write"         // SIGKILL, cut the newest segment inside its last batch, restart
	FaultCorrupt           = "corrupt"            // flip a committed byte of a stopped follower; it must refuse to start; repair it
	FaultDiskFull          = "disk-full"          // fill one node's (tmpfs) disk while bulk writes roll segments
	FaultSlowDisk          = "slow-disk"          // every fsync of one node waits 20-300 ms (lazy file system's delay)
	FaultLostUnsynced      = "lost-unsynced"      // fsyncs of one node slowed to 500 ms, SIGKILL mid-write: it loses what it wrote since its last fsync
	FaultCorruptMeta       = "corrupt-meta"       // flip a byte of a metadata entry of a stopped follower; it must refuse to start; repair it
	FaultCorruptStable     = "corrupt-stable"     // damage a stopped follower's stable store (term, or a zeroed page); observe; repair it
	FaultCorruptSnapshot   = "corrupt-snapshot"   // flip a byte of a stopped follower's newest snapshot; observe; repair it
	FaultCorruptRunning    = "corrupt-running"    // flip a committed body in the running leader's log, re-add a wiped follower (it gets the whole log), then restart the leader
	FaultCorruptIndex      = "corrupt-index"      // flip, tear or delete a queue index file of a running node or of a stopped follower (then started); it serves nothing wrong
	// FaultLostUnsyncedMajority is a simultaneous machine crash of a
	// majority: the leader and a follower, their fsyncs slowed to 500 ms,
	// SIGKILLed at the same moment (each loses what it wrote since its last
	// fsync), then both restarted.
	FaultLostUnsyncedMajority = "lost-unsynced-majority"
)

// unsyncedFsyncDelay is how slow the lost-unsynced faults make fsyncs.
const unsyncedFsyncDelay = 500 * time.Millisecond

// crashMargin is added to a majority crash's bound (MajorityCrashBound)
// for what the schedule of the syncer and the loaded test machine add.
const crashMargin = time.Second

// MajorityCrashBound is how long before a majority crash a write may still
// have been unsynced on the crashed nodes, under quorum-memory with the
// given sync interval while the crashed nodes' fsyncs take slow each: a
// write waits for the round in progress and then for its own round, each
// an fsync, after at most the interval.
func MajorityCrashBound(syncInterval, slow time.Duration) time.Duration {
	return syncInterval + 2*slow + crashMargin
}

// AllFaults lists the fault kinds of "all" (-chaos.faults=all, the
// default).
var AllFaults = []string{FaultKillLeader, FaultKill, FaultPause, FaultPartitionLeader, FaultPartitionFollower,
	FaultPartitionOneWay, FaultDelay, FaultTransfer, FaultMembership, FaultTornWrite, FaultCorrupt, FaultDiskFull,
	FaultSlowDisk, FaultLostUnsynced, FaultCorruptMeta, FaultCorruptRunning, FaultCorruptIndex}

// ExtraFaults are the kinds only "full" (or naming them) turns on. Each
// finds an open defect (docs/RELIABILITY.md): a damaged newest snapshot
// makes a node refuse to start without saying so, or panic with retention
// (rows 17, 19), and a zeroed page of the stable store panics in bolt
// instead of a refusal naming the damage. A snapshot exists only in
// retention runs, so corrupt-snapshot is mostly not applied otherwise.
var ExtraFaults = []string{FaultCorruptStable, FaultCorruptSnapshot}

// MemoryFaults are the kinds "all" adds for quorum-memory runs. Under
// quorum-fsync lost-unsynced-majority finds nothing that a kill-leader+kill
// episode (two nodes SIGKILLed at once under the lazy file system) does
// not, and adding a kind to "all" would change every seed's schedule; it
// can still be named there.
var MemoryFaults = []string{FaultLostUnsyncedMajority}

// combinable faults may start together (on different nodes) in one episode.
var combinable = map[string]bool{FaultKillLeader: true, FaultKill: true, FaultPause: true, FaultPartitionLeader: true,
	FaultPartitionFollower: true, FaultPartitionOneWay: true, FaultDelay: true, FaultSlowDisk: true}

var weights = map[string]int{FaultKillLeader: 3, FaultKill: 2, FaultPause: 2, FaultPartitionLeader: 3, FaultPartitionFollower: 2,
	FaultPartitionOneWay: 3, FaultDelay: 1, FaultTransfer: 1, FaultMembership: 1, FaultTornWrite: 2, FaultCorrupt: 1, FaultDiskFull: 1,
	FaultSlowDisk: 2, FaultLostUnsynced: 2, FaultLostUnsyncedMajority: 2, FaultCorruptMeta: 1, FaultCorruptStable: 1, FaultCorruptSnapshot: 1, FaultCorruptRunning: 1, FaultCorruptIndex: 1}

// Episode is one step of a schedule: wait Gap, apply Kinds, hold, heal.
type Episode struct {
	Kinds []string
	Gap   time.Duration
	Hold  time.Duration
	Seed  int64 // for the choices made while applying (targets, cut points)
}

func (e Episode) String() string { return strings.Join(e.Kinds, "+") }

// Plan is a run's schedule, fully determined by its seed and fault set.
type Plan struct {
	Seed     int64
	Episodes []Episode
	// DiskNode is the node whose data lives on a tmpfs (-1: none).
	DiskNode int
	// LoadThreshold is passed to every server: low values make the leader
	// count as loaded and send consumers to followers.
	LoadThreshold string
	// RunAll runs every episode even past the deadline (fixed schedules
	// that must apply each of their faults).
	RunAll bool
}

// ParseFaults parses a comma-separated list of fault kinds for runs with
// the given --durability: "all" (or "") is AllFaults (and MemoryFaults
// under quorum-memory), "full" that and ExtraFaults.
func ParseFaults(s, durability string) ([]string, error) {
	all := append([]string(nil), AllFaults...)
	if durability == raftlog.QuorumMemory {
		all = append(all, MemoryFaults...)
	}
	if s == "" || s == "all" {
		return all, nil
	}
	if s == "full" {
		return append(all, ExtraFaults...), nil
	}
	known := map[string]bool{}
	for _, f := range append(append(append([]string(nil), AllFaults...), ExtraFaults...), MemoryFaults...) {
		known[f] = true
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !known[f] {
			return nil, fmt.Errorf("fault %q: want all, full or some of %s,%s,%s", f, strings.Join(AllFaults, ","), strings.Join(ExtraFaults, ","), strings.Join(MemoryFaults, ","))
		}
		out = append(out, f)
	}
	return out, nil
}

// NewPlan draws a schedule of episodes for a run of the given length. More
// episodes are drawn than fit; the runner stops starting them when the
// time is up, so the same seed gives the same sequence of faults.
func NewPlan(seed int64, faults []string, d time.Duration) Plan {
	rng := rand.New(rand.NewSource(seed))
	p := Plan{Seed: seed, DiskNode: -1, LoadThreshold: []string{"0.8", "0.05"}[rng.Intn(2)]}
	total := 0
	var comb []string
	for _, f := range faults {
		total += weights[f]
		if combinable[f] {
			comb = append(comb, f)
		}
	}
	pick := func() string {
		n := rng.Intn(total)
		for _, f := range faults {
			if n < weights[f] {
				return f
			}
			n -= weights[f]
		}
		return faults[len(faults)-1]
	}
	for t := time.Duration(0); t < 2*d+10*time.Second && total > 0; {
		e := Episode{Gap: time.Duration(300+rng.Intn(1200)) * time.Millisecond,
			Hold: time.Duration(1000+rng.Intn(2500)) * time.Millisecond, Seed: rng.Int63()}
		k := pick()
		e.Kinds = []string{k}
		if combinable[k] && len(comb) > 1 && rng.Intn(4) == 0 {
			for i := 0; i < 10; i++ {
				if k2 := comb[rng.Intn(len(comb))]; k2 != k {
					e.Kinds = append(e.Kinds, k2)
					break
				}
			}
		}
		if k == FaultDiskFull && p.DiskNode < 0 {
			p.DiskNode = rng.Intn(3)
		}
		p.Episodes = append(p.Episodes, e)
		t += e.Gap + e.Hold + time.Second
	}
	return p
}

// Nemesis applies a plan's episodes to a cluster.
type Nemesis struct {
	C        *Cluster
	Rec      *history.Recorder
	Work     *Workload
	DiskNode *Node
	Logf     func(string, ...any)
	// Retention: the group deletes old log segments; damage goes to the
	// newest part of a log (the oldest may be deleted data no longer read).
	Retention bool
	// SyncInterval is the nodes' --sync-interval (quorum-memory): a
	// majority crash's bound derives from it.
	SyncInterval time.Duration

	mu         sync.Mutex
	Applied    map[string]int // kind -> episodes applied
	Skipped    map[string]int // kind -> episodes that failed to apply it
	Outcomes   map[string]int // e.g. "torn-write: recovered"
	Violations []history.Violation
	damaged    map[string]bool // nodes whose restart may be refused (torn or corrupt data)
	// Crashes are the simultaneous machine crashes of a majority applied.
	Crashes []history.MajorityCrash
	// What rebuildDamaged found: the cuts below a node's applied index
	// in all, and per node those it has rebuilt the node for.
	cuts    int
	rebuilt map[string]int
}

// NewNemesis returns a nemesis for c.
func NewNemesis(c *Cluster, rec *history.Recorder, w *Workload, diskNode *Node, logf func(string, ...any)) *Nemesis {
	return &Nemesis{C: c, Rec: rec, Work: w, DiskNode: diskNode, Logf: logf,
		Applied: map[string]int{}, Skipped: map[string]int{}, Outcomes: map[string]int{}, damaged: map[string]bool{}}
}

func (nm *Nemesis) violation(kind, format string, args ...any) {
	v := history.Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)}
	nm.mu.Lock()
	nm.Violations = append(nm.Violations, v)
	nm.mu.Unlock()
	nm.Rec.Event("violation", "%s", v.String())
}

func (nm *Nemesis) outcome(s string) {
	nm.mu.Lock()
	nm.Outcomes[s]++
	nm.mu.Unlock()
}

// Run executes episodes until the deadline: no episode starts after it.
func (nm *Nemesis) Run(ctx context.Context, p Plan, deadline time.Time) {
	for i, e := range p.Episodes {
		select {
		case <-ctx.Done():
			return
		case <-time.After(e.Gap):
		}
		if (!p.RunAll && time.Now().Add(e.Hold/2).After(deadline)) || ctx.Err() != nil {
			return
		}
		// Each episode starts from a group with a leader, so faults test
		// recovery rather than pile up into a permanent outage.
		if nm.C.WaitLeader(ctx, 20*time.Second) == nil {
			nm.Rec.Event("wait", "no leader 20s before episode %d", i)
		}
		nm.episode(ctx, i, e)
	}
}

func (nm *Nemesis) episode(ctx context.Context, i int, e Episode) {
	rng := rand.New(rand.NewSource(e.Seed))
	used := map[string]bool{}
	var heals []func(context.Context)
	began := nm.Rec.Now()
	var killed []string // nodes this episode's kill faults SIGKILLed
	for _, k := range leaderFaultsFirst(e.Kinds) {
		before := copySet(used)
		heal, err := nm.apply(ctx, k, rng, used, e.Hold)
		if err == nil && (k == FaultKill || k == FaultKillLeader) {
			killed = append(killed, newIn(used, before)...)
		}
		if err != nil {
			nm.Rec.Event("skip", "episode %d %s: %v", i, k, err)
			nm.mu.Lock()
			nm.Skipped[k]++
			nm.mu.Unlock()
			continue
		}
		nm.mu.Lock()
		nm.Applied[k]++
		nm.mu.Unlock()
		if heal != nil {
			heals = append(heals, heal)
		}
	}
	if len(heals) == 0 {
		return
	}
	// Two of the three nodes SIGKILLed together under the lazy file system
	// are a simultaneous machine crash of a majority.
	var crash *history.MajorityCrash
	if len(killed) >= 2 {
		at := nm.Rec.Now()
		crash = &history.MajorityCrash{Nodes: killed, At: at, Bound: MajorityCrashBound(nm.SyncInterval, 0) + (at - began)}
		nm.Rec.Event("majority-crash", "%s SIGKILLed together: a machine crash of a majority", strings.Join(killed, ", "))
	}
	select {
	case <-ctx.Done():
	case <-time.After(e.Hold):
	}
	for j := len(heals) - 1; j >= 0; j-- {
		heals[j](ctx)
	}
	if crash != nil {
		nm.recovered(ctx, *crash)
	}
}

// recovered waits for a leader after a majority crash whose nodes have
// been restarted and records the crash with its recovery.
func (nm *Nemesis) recovered(ctx context.Context, crash history.MajorityCrash) {
	l := nm.C.WaitLeader(ctx, 30*time.Second)
	crash.Recovered = nm.Rec.Now()
	if l == nil {
		nm.Rec.Event("majority-crash", "no leader 30 s after restarting %s", strings.Join(crash.Nodes, ", "))
	} else {
		nm.Rec.Event("majority-crash", "%s leads after the crash of %s: recovered", l.ID, strings.Join(crash.Nodes, ", "))
	}
	nm.mu.Lock()
	nm.Crashes = append(nm.Crashes, crash)
	nm.mu.Unlock()
}

func copySet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// newIn returns the keys of now missing from before, sorted.
func newIn(now, before map[string]bool) []string {
	var out []string
	for k := range now {
		if !before[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// leaderFaultsFirst orders an episode's faults so that those that must hit
// the leader pick it before a fault that may pick any node (a slow disk,
// say) has made it unavailable to them.
func leaderFaultsFirst(kinds []string) []string {
	out := append([]string(nil), kinds...)
	sort.SliceStable(out, func(i, j int) bool { return needsLeader(out[i]) && !needsLeader(out[j]) })
	return out
}

func needsLeader(kind string) bool {
	switch kind {
	case FaultKillLeader, FaultPartitionLeader, FaultCorruptRunning:
		return true
	}
	return false
}

func pickNode(rng *rand.Rand, ns []*Node, used map[string]bool) *Node {
	var free []*Node
	for _, n := range ns {
		if !used[n.ID] && n.Running() {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		return nil
	}
	sort.Slice(free, func(i, j int) bool { return free[i].ID < free[j].ID })
	return free[rng.Intn(len(free))]
}

func (nm *Nemesis) leader(ctx context.Context) *Node {
	return nm.C.WaitLeader(ctx, 3*time.Second)
}

func (nm *Nemesis) followers(ctx context.Context) []*Node {
	l := nm.leader(ctx)
	var out []*Node
	for _, n := range nm.C.Nodes {
		if n != l {
			out = append(out, n)
		}
	}
	return out
}

func blockMode(rng *rand.Rand) faultproxy.Mode {
	if rng.Intn(2) == 0 {
		return faultproxy.Drop
	}
	return faultproxy.Blackhole
}

// apply starts one fault and returns how to heal it (nil: nothing to heal).
func (nm *Nemesis) apply(ctx context.Context, kind string, rng *rand.Rand, used map[string]bool, hold time.Duration) (func(context.Context), error) {
	c := nm.C
	switch kind {
	case FaultKillLeader, FaultKill:
		var n *Node
		if kind == FaultKillLeader {
			n = nm.leader(ctx)
			if n != nil && used[n.ID] {
				n = nil
			}
		}
		if n == nil {
			n = pickNode(rng, c.Nodes, used)
		}
		if n == nil {
			return nil, errors.New("no node to kill")
		}
		used[n.ID] = true
		if err := c.Kill(n); err != nil {
			return nil, err
		}
		nm.Rec.Event(kind, "SIGKILL %s", n.ID)
		return func(ctx context.Context) { nm.restart(ctx, n, "after SIGKILL") }, nil

	case FaultPause:
		var n *Node
		if rng.Intn(2) == 0 {
			if l := nm.leader(ctx); l != nil && !used[l.ID] {
				n = l
			}
		}
		if n == nil {
			n = pickNode(rng, c.Nodes, used)
		}
		if n == nil {
			return nil, errors.New("no node to pause")
		}
		used[n.ID] = true
		if err := c.Pause(n); err != nil {
			return nil, err
		}
		nm.Rec.Event(kind, "SIGSTOP %s", n.ID)
		return func(context.Context) {
			c.Resume(n)
			nm.Rec.Event("heal", "SIGCONT %s", n.ID)
		}, nil

	case FaultPartitionLeader, FaultPartitionFollower:
		var n *Node
		if kind == FaultPartitionLeader {
			n = nm.leader(ctx)
		} else {
			// A node this episode already faulted (a killed leader, say)
			// cannot be partitioned too; pick among the others.
			var fs []*Node
			for _, f := range nm.followers(ctx) {
				if !used[f.ID] {
					fs = append(fs, f)
				}
			}
			sort.Slice(fs, func(i, j int) bool { return fs[i].ID < fs[j].ID })
			if len(fs) > 0 {
				n = fs[rng.Intn(len(fs))]
			}
		}
		if n == nil || used[n.ID] {
			return nil, errors.New("no node to partition")
		}
		used[n.ID] = true
		m := blockMode(rng)
		c.Partition([]*Node{n}, m)
		nm.Rec.Event(kind, "%s cut off from the others (%s)", n.ID, m)
		return func(context.Context) {
			c.Partition([]*Node{n}, faultproxy.Pass)
			nm.Rec.Event("heal", "%s reconnected", n.ID)
		}, nil

	case FaultPartitionOneWay:
		var from, to *Node
		if rng.Intn(2) == 0 {
			from = nm.leader(ctx)
		}
		if from == nil {
			from = c.Nodes[rng.Intn(len(c.Nodes))]
		}
		for to == nil || to == from {
			to = c.Nodes[rng.Intn(len(c.Nodes))]
		}
		c.OneWay(from.Index, to.Index)
		nm.Rec.Event(kind, "everything %s sends to %s is held (Raft and API, requests and answers); %s->%s passes", from.ID, to.ID, to.ID, from.ID)
		return func(context.Context) {
			for _, p := range append(c.Links(from.Index, to.Index), c.Links(to.Index, from.Index)...) {
				p.Set(faultproxy.Pass, 0)
			}
			nm.Rec.Event("heal", "%s->%s open", from.ID, to.ID)
		}, nil

	case FaultDelay:
		d := time.Duration(20+rng.Intn(180)) * time.Millisecond
		var ps []*faultproxy.Proxy
		what := "all links"
		if rng.Intn(2) == 0 {
			n := c.Nodes[rng.Intn(len(c.Nodes))]
			what = n.ID + "'s links"
			for j := range c.Nodes {
				if j != n.Index {
					ps = append(ps, c.Links(n.Index, j)...)
					ps = append(ps, c.Links(j, n.Index)...)
				}
			}
		} else {
			ps = c.AllProxies()
		}
		for _, p := range ps {
			if m, _, _ := p.State(); m == faultproxy.Pass {
				if a, b := p.Held(); !a && !b {
					p.Set(faultproxy.Pass, d)
				}
			}
		}
		nm.Rec.Event(kind, "%s delayed by %s each way", what, d)
		return func(context.Context) {
			for _, p := range ps {
				if m, _, _ := p.State(); m == faultproxy.Pass {
					if a, b := p.Held(); !a && !b {
						p.Set(faultproxy.Pass, 0)
					}
				}
			}
			nm.Rec.Event("heal", "%s undelayed", what)
		}, nil

	case FaultTransfer:
		// Raft gives a transfer one election timeout; right after a heal,
		// with the target still catching up or an election under way, it
		// times out and leadership stays where it was. That is allowed, so
		// the fault is tried up to three times before it counts as not
		// applied.
		var err error
		for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
			if attempt > 0 {
				nm.Rec.Event(kind, "leader transfer: %v; trying again", err)
				nm.leader(ctx)
				time.Sleep(500 * time.Millisecond)
			}
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			var r *api.TransferLeaderResponse
			r, err = c.Admin.TransferLeader(tctx, "")
			cancel()
			if err == nil {
				nm.Rec.Event(kind, "leadership transferred to %s in %dus", r.LeaderId, r.TookUs)
				return nil, nil
			}
		}
		return nil, fmt.Errorf("leader transfer: %w", err)

	case FaultMembership:
		fs := nm.followers(ctx)
		if len(fs) == 0 {
			return nil, errors.New("no follower")
		}
		sort.Slice(fs, func(i, j int) bool { return fs[i].ID < fs[j].ID })
		n := fs[rng.Intn(len(fs))]
		used[n.ID] = true
		nm.Rec.Event(kind, "stop %s, member remove, wipe, start empty, member add", n.ID)
		if err := c.Rejoin(ctx, n); err != nil {
			nm.violation(history.VLiveness, "member change of %s failed: %v", n.ID, err)
			return nil, err
		}
		nm.Rec.Event(kind, "%s is a voter again", n.ID)
		return nil, nil

	case FaultTornWrite:
		n := pickNode(rng, c.Nodes, used)
		if n == nil {
			return nil, errors.New("no node")
		}
		used[n.ID] = true
		if err := c.Kill(n); err != nil {
			return nil, err
		}
		desc, err := TearTail(n.Data, rng)
		if err != nil {
			nm.Rec.Event(kind, "%s: cannot tear (%v); restarting it as is", n.ID, err)
			nm.restart(ctx, n, "after SIGKILL")
			return nil, err
		}
		nm.Rec.Event(kind, "SIGKILL %s; %s", n.ID, desc)
		nm.mu.Lock()
		nm.damaged[n.ID] = true
		nm.mu.Unlock()
		switch nm.restart(ctx, n, "after a torn write") {
		case restartOK:
			nm.outcome(FaultTornWrite + ": recovered the torn tail and rejoined")
		case restartRefused:
			nm.outcome(FaultTornWrite + ": refused to start (lost entries), repaired")
		}
		return nil, nil

	case FaultCorrupt:
		fs := nm.followers(ctx)
		var cand []*Node
		for _, f := range fs {
			if !used[f.ID] && f.Running() {
				cand = append(cand, f)
			}
		}
		if len(cand) == 0 {
			return nil, errors.New("no running follower")
		}
		sort.Slice(cand, func(i, j int) bool { return cand[i].ID < cand[j].ID })
		n := cand[rng.Intn(len(cand))]
		used[n.ID] = true
		variant := FlipBody
		if rng.Intn(4) == 0 {
			variant = FlipFrame
		}
		bodies := nm.Rec.AckedBodies(rng, 50)
		if nm.Retention {
			// Old bodies may be deleted data the node rightly no longer
			// reads: take them from the upper half of what it holds.
			bodies = nil
			if st, err := c.StatusOf(ctx, n); err == nil && self(st) != nil {
				lo, hi := self(st).FirstIndex, self(st).AppliedIndex
				bodies = nm.Rec.AckedBodiesIn(rng, 50, lo+(hi-lo)/2, hi)
			}
		}
		if err := c.Stop(n, 10*time.Second); err != nil {
			return nil, err
		}
		desc, _, err := FlipByte(n.Data, variant, bodies, rng, nm.Retention)
		if err != nil && variant == FlipBody {
			variant = FlipFrame
			desc, _, err = FlipByte(n.Data, variant, nil, rng, nm.Retention)
		}
		if err != nil {
			nm.Rec.Event(kind, "%s: cannot corrupt (%v); restarting it as is", n.ID, err)
			nm.restart(ctx, n, "after a graceful stop")
			return nil, err
		}
		nm.Rec.Event(kind, "stopped %s; %s", n.ID, desc)
		nm.mu.Lock()
		nm.damaged[n.ID] = true
		nm.mu.Unlock()
		if err := c.StartNode(n); err != nil {
			return nil, err
		}
		res, log := nm.awaitStart(ctx, n)
		switch res {
		case restartRefused:
			nm.Rec.Event(kind, "%s refused to start: %s", n.ID, refusalLine(log))
			nm.judgeRefusal(n, log, variant == FlipBody)
			nm.outcome(fmt.Sprintf("%s (%s): refused to start", FaultCorrupt, variant))
		case restartOK:
			nm.violation(history.VNemesis, "%s started and answered with a corrupt log (%s): it must refuse", n.ID, desc)
			nm.outcome(fmt.Sprintf("%s (%s): NOT DETECTED", FaultCorrupt, variant))
		default:
			nm.violation(history.VNemesis, "%s neither started nor refused clearly after corruption (%s); log tail: %s", n.ID, desc, tail(log, 400))
		}
		nm.Rec.Event(kind, "repairing %s: member remove, wipe, start empty, member add", n.ID)
		if err := c.Rejoin(ctx, n); err != nil {
			nm.violation(history.VLiveness, "repair of %s failed: %v", n.ID, err)
			return nil, nil
		}
		nm.mu.Lock()
		delete(nm.damaged, n.ID)
		nm.mu.Unlock()
		nm.Rec.Event(kind, "%s repaired and a voter again", n.ID)
		return nil, nil

	case FaultSlowDisk:
		n := nm.pickMaybeLeader(ctx, rng, used)
		if n == nil {
			return nil, errors.New("no node")
		}
		used[n.ID] = true
		d := time.Duration(20+rng.Intn(280)) * time.Millisecond
		if err := setFsyncDelay(n, d); err != nil {
			return nil, err
		}
		nm.Rec.Event(kind, "every fsync of %s waits %s", n.ID, d)
		return func(context.Context) {
			setFsyncDelay(n, 0)
			nm.Rec.Event("heal", "%s's fsyncs undelayed", n.ID)
		}, nil

	case FaultLostUnsynced:
		n := nm.pickMaybeLeader(ctx, rng, used)
		if n == nil {
			return nil, errors.New("no node")
		}
		used[n.ID] = true
		if err := setFsyncDelay(n, unsyncedFsyncDelay); err != nil {
			return nil, err
		}
		// Under load: the node has writes waiting for a slow fsync when it dies.
		time.Sleep(time.Duration(700+rng.Intn(800)) * time.Millisecond)
		if err := c.Kill(n); err != nil {
			setFsyncDelay(n, 0)
			return nil, err
		}
		setFsyncDelay(n, 0)
		nm.Rec.Event(kind, "SIGKILL %s during 500 ms fsyncs: it lost what it wrote since its last fsync", n.ID)
		if nm.restart(ctx, n, "after losing its unsynced writes") == restartOK {
			nm.outcome(FaultLostUnsynced + ": restarted and rejoined")
		}
		return nil, nil

	case FaultLostUnsyncedMajority:
		return nil, nm.lostUnsyncedMajority(ctx, rng, used)

	case FaultCorruptMeta, FaultCorruptStable, FaultCorruptSnapshot:
		damage := map[string]func(string, *rand.Rand) (string, error){
			FaultCorruptMeta: FlipMeta, FaultCorruptStable: DamageStable, FaultCorruptSnapshot: DamageSnapshot}[kind]
		if kind == FaultCorruptMeta && nm.Retention {
			damage = FlipRecentMeta
		}
		return nil, nm.damageStopped(ctx, kind, rng, used, damage, kind == FaultCorruptMeta)

	case FaultCorruptRunning:
		return nil, nm.corruptRunning(ctx, rng, used)

	case FaultCorruptIndex:
		return nil, nm.corruptIndex(ctx, rng, used)

	case FaultDiskFull:
		n := nm.DiskNode
		if n == nil {
			return nil, errors.New("no node on a tmpfs")
		}
		used[n.ID] = true
		headroom := int64(rng.Intn(2)) * 4 << 20
		filled, err := fillDisk(n.Data, headroom)
		if err != nil {
			return nil, err
		}
		nm.Rec.Event(kind, "%s's disk filled (%d MiB filler, %d MiB left free)", n.ID, filled>>20, headroom>>20)
		// Bulk writes push every node towards a new 64 MiB segment, which
		// the full node cannot allocate, and a leadership transfer makes
		// every node write its term and vote to its (bolt) stable store.
		bctx, cancel := context.WithTimeout(ctx, hold+15*time.Second)
		var acked atomic.Int64
		var wg sync.WaitGroup
		base := rng.Intn(1_000_000)
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				acked.Add(nm.Work.RunBulk(bctx, fmt.Sprintf("b%d.%d", base, i), 60<<10, 8, 36<<20, nm.Rec))
			}(i)
		}
		select {
		case <-bctx.Done():
		case <-time.After(hold / 2):
		}
		tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
		if r, err := nm.C.Admin.TransferLeader(tctx, ""); err == nil {
			nm.Rec.Event(kind, "leadership transferred to %s while %s's disk is full", r.LeaderId, n.ID)
		} else {
			nm.Rec.Event(kind, "leadership transfer while %s's disk is full: %v", n.ID, err)
		}
		tcancel()
		wg.Wait()
		cancel()
		nm.Rec.Event(kind, "bulk writes acknowledged %d MiB; %s running=%v", acked.Load()>>20, n.ID, n.Running())
		return func(ctx context.Context) {
			os.Remove(filepath.Join(n.Data, fillerName))
			nm.Rec.Event("heal", "%s's disk has space again", n.ID)
			if !n.Running() {
				nm.Rec.Event(kind, "%s exited while its disk was full: %s", n.ID, refusalLine(n.LogSinceStart()))
				nm.outcome(FaultDiskFull + ": node exited")
				nm.restart(ctx, n, "after its disk was full")
			} else {
				nm.outcome(FaultDiskFull + ": node stayed up")
			}
		}, nil
	}
	return nil, fmt.Errorf("unknown fault %q", kind)
}

// lostUnsyncedMajority slows the fsyncs of the leader and one follower,
// SIGKILLs both at the same moment while writes wait for those fsyncs (a
// simultaneous machine crash of a majority: each loses what it had not
// fsynced), restarts both and waits for a leader.
func (nm *Nemesis) lostUnsyncedMajority(ctx context.Context, rng *rand.Rand, used map[string]bool) error {
	c := nm.C
	l := nm.leader(ctx)
	if l == nil || used[l.ID] || !l.Running() {
		return errors.New("no leader to crash")
	}
	used[l.ID] = true
	f := pickNode(rng, c.Nodes, used)
	if f == nil {
		delete(used, l.ID)
		return errors.New("no follower to crash with the leader")
	}
	used[f.ID] = true
	victims := []*Node{l, f}
	undelay := func() {
		for _, n := range victims {
			setFsyncDelay(n, 0)
		}
	}
	for _, n := range victims {
		if err := setFsyncDelay(n, unsyncedFsyncDelay); err != nil {
			undelay()
			return err
		}
	}
	// Under load: both have writes waiting for a slow fsync when they die.
	time.Sleep(time.Duration(700+rng.Intn(800)) * time.Millisecond)
	at := nm.Rec.Now()
	errs := make([]error, len(victims))
	var wg sync.WaitGroup
	for i, n := range victims {
		wg.Add(1)
		go func(i int, n *Node) {
			defer wg.Done()
			errs[i] = c.Kill(n)
		}(i, n)
	}
	wg.Wait()
	undelay()
	if err := errors.Join(errs...); err != nil {
		for _, n := range victims {
			nm.restart(ctx, n, "after a failed majority crash")
		}
		return err
	}
	ids := []string{l.ID, f.ID}
	nm.Rec.Event(FaultLostUnsyncedMajority, "SIGKILL %s (leader) and %s at once during %s fsyncs: both lost what they wrote since their last fsync",
		l.ID, f.ID, unsyncedFsyncDelay)
	for i, n := range victims {
		wg.Add(1)
		go func(i int, n *Node) {
			defer wg.Done()
			if nm.restart(ctx, n, "after a majority crash") != restartOK {
				errs[i] = fmt.Errorf("%s did not restart", n.ID)
			}
		}(i, n)
	}
	wg.Wait()
	if errors.Join(errs...) == nil {
		nm.outcome(FaultLostUnsyncedMajority + ": both restarted")
	}
	nm.recovered(ctx, history.MajorityCrash{Nodes: ids, At: at, Bound: MajorityCrashBound(nm.SyncInterval, unsyncedFsyncDelay)})
	return nil
}

// rebuildDamaged finds the cuts below a node's applied index ("raft
// replaced log entries this node had applied") that the nodes' logs
// report since it last looked, and rebuilds every node that reported one,
// as docs/durability.md tells an operator to (member remove, wipe, start
// empty, member add): a restart would clear the mark but not a snapshot
// holding entries the group lost. After a majority crash of a
// quorum-memory group such a cut is an expected outcome; otherwise
// committed entries were lost, a violation. It returns the number of nodes
// it rebuilt.
func (nm *Nemesis) rebuildDamaged(ctx context.Context, durability string) int {
	nm.mu.Lock()
	crashes := len(nm.Crashes)
	if nm.rebuilt == nil {
		nm.rebuilt = map[string]int{}
	}
	nm.mu.Unlock()
	rebuilt := 0
	for _, n := range nm.C.Nodes {
		b, _ := os.ReadFile(n.Log)
		nm.mu.Lock()
		k := cutMarks(string(b)) - nm.rebuilt[n.ID]
		if k > 0 {
			nm.cuts += k
			nm.rebuilt[n.ID] += k
		}
		nm.mu.Unlock()
		if k <= 0 {
			continue
		}
		if durability == raftlog.QuorumMemory && crashes > 0 {
			nm.Rec.Event("damaged", "%s reported %d cut(s) below its applied index and marked itself damaged: raft replaced entries it had applied (a majority crash under %s); rebuilding it",
				n.ID, k, durability)
			nm.mu.Lock()
			nm.Outcomes["majority crash: node marked damaged, rebuilt"]++
			nm.mu.Unlock()
		} else {
			nm.violation(history.VDamaged, "%s reported %d cut(s) below its applied index: raft replaced entries it had applied (durability %s, %d majority crash(es)): the group lost committed entries",
				n.ID, k, durability, crashes)
		}
		if err := nm.C.Rejoin(ctx, n); err != nil {
			nm.violation(history.VLiveness, "rebuild of the damaged %s failed: %v", n.ID, err)
			continue
		}
		rebuilt++
		nm.Rec.Event("repair", "%s rebuilt and a voter again", n.ID)
	}
	if rebuilt > 0 {
		if err := nm.C.WaitSettled(ctx, 60*time.Second); err != nil {
			nm.violation(history.VLiveness, "after rebuilding the damaged nodes: %v", err)
		}
	}
	return rebuilt
}

// cutMarks counts the lines of a server log that report a cut below the
// applied index (each cut is reported once as a damaged log entry; the
// node's damaged mark names the first of them).
func cutMarks(log string) int {
	n := 0
	for _, l := range strings.Split(log, "\n") {
		if isCutMark(l) {
			n++
		}
	}
	return n
}

func isCutMark(line string) bool {
	return strings.Contains(line, "damaged log entry: it is not served") && strings.Contains(line, raftlog.ErrCutBelowApplied.Error())
}

// cutTimes are the times, since start, of the lines of a server log that
// report a cut below the applied index (each line begins with its time).
func cutTimes(log string, start time.Time) []time.Duration {
	var out []time.Duration
	for _, l := range strings.Split(log, "\n") {
		if !isCutMark(l) {
			continue
		}
		stamp, _, _ := strings.Cut(l, " ")
		if t, err := time.Parse(time.RFC3339Nano, stamp); err == nil {
			out = append(out, t.Sub(start))
		}
	}
	return out
}

// nodeCuts are the cuts below the applied index that every node's log
// reports, on the clock that began at start.
func nodeCuts(nodes []*Node, start time.Time) []history.NodeCut {
	var out []history.NodeCut
	for _, n := range nodes {
		b, _ := os.ReadFile(n.Log)
		for _, at := range cutTimes(string(b), start) {
			out = append(out, history.NodeCut{Node: n.ID, At: at})
		}
	}
	return out
}

// pickMaybeLeader picks the leader half the time, else any running node
// not used yet.
func (nm *Nemesis) pickMaybeLeader(ctx context.Context, rng *rand.Rand, used map[string]bool) *Node {
	if rng.Intn(2) == 0 {
		if l := nm.leader(ctx); l != nil && !used[l.ID] && l.Running() {
			return l
		}
	}
	return pickNode(rng, nm.C.Nodes, used)
}

// setFsyncDelay makes every fsync of n's log wait d (0: none): the file
// the servers' lazy file system reads (raftlog, --chaos-lazyfs).
func setFsyncDelay(n *Node, d time.Duration) error {
	p := filepath.Join(n.Data, "CHAOS_FSYNC_DELAY")
	if d <= 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("fsync delay of %s: %w", n.ID, err)
		}
		return nil
	}
	if err := os.WriteFile(p, []byte(d.String()), 0o644); err != nil {
		return fmt.Errorf("fsync delay of %s: %w", n.ID, err)
	}
	return nil
}

// damageStopped stops a running follower, damages its data with damage,
// and starts it. With mustRefuse it must refuse to start with a message
// (a damaged log); otherwise the outcome is only recorded. Either way it is
// then repaired (member remove, wipe, start empty, member add), so that
// the run's final checks look at healthy data.
func (nm *Nemesis) damageStopped(ctx context.Context, kind string, rng *rand.Rand, used map[string]bool,
	damage func(string, *rand.Rand) (string, error), mustRefuse bool) error {
	c := nm.C
	n, desc, err := nm.stopAndDamage(ctx, kind, rng, used, damage)
	if err != nil {
		return err
	}
	nm.Rec.Event(kind, "stopped %s; %s", n.ID, desc)
	nm.mu.Lock()
	nm.damaged[n.ID] = true
	nm.mu.Unlock()
	if err := c.StartNode(n); err != nil {
		return err
	}
	res, log := nm.awaitStart(ctx, n)
	switch res {
	case restartRefused:
		nm.Rec.Event(kind, "%s refused to start: %s", n.ID, refusalLine(log))
		nm.judgeRefusal(n, log, false)
		nm.outcome(kind + ": refused to start")
	case restartOK:
		if mustRefuse {
			nm.violation(history.VNemesis, "%s started and answered with damaged data (%s): it must refuse", n.ID, desc)
			nm.outcome(kind + ": NOT DETECTED")
		} else {
			nm.outcome(kind + ": started")
		}
	default:
		nm.violation(history.VNemesis, "%s neither started nor refused clearly after damage (%s); log tail: %s", n.ID, desc, tail(log, 400))
	}
	nm.Rec.Event(kind, "repairing %s: member remove, wipe, start empty, member add", n.ID)
	if err := c.Rejoin(ctx, n); err != nil {
		nm.violation(history.VLiveness, "repair of %s failed: %v", n.ID, err)
	}
	nm.mu.Lock()
	delete(nm.damaged, n.ID)
	nm.mu.Unlock()
	return nil
}

// stopAndDamage stops a running follower not used yet in the episode and
// damages its data; when the damage cannot be done it starts the node
// again as it is.
func (nm *Nemesis) stopAndDamage(ctx context.Context, kind string, rng *rand.Rand, used map[string]bool,
	damage func(string, *rand.Rand) (string, error)) (*Node, string, error) {
	var cand []*Node
	for _, f := range nm.followers(ctx) {
		if !used[f.ID] && f.Running() {
			cand = append(cand, f)
		}
	}
	if len(cand) == 0 {
		return nil, "", errors.New("no running follower")
	}
	sort.Slice(cand, func(i, j int) bool { return cand[i].ID < cand[j].ID })
	n := cand[rng.Intn(len(cand))]
	used[n.ID] = true
	if err := nm.C.Stop(n, 10*time.Second); err != nil {
		return nil, "", err
	}
	desc, err := damage(n.Data, rng)
	if err != nil {
		nm.Rec.Event(kind, "%s: cannot damage (%v); restarting it as is", n.ID, err)
		nm.restart(ctx, n, "after a graceful stop")
		return nil, "", err
	}
	return n, desc, nil
}

// corruptIndex damages a queue index file (DamageIndex): half the time of
// a running node, leader or not, which goes on serving; else of a follower
// stopped for it, which must then start (the index is derived state, not
// a reason to refuse). Either way the node stays as it is: consumers keep
// reading through it and everything served is checked as always.
func (nm *Nemesis) corruptIndex(ctx context.Context, rng *rand.Rand, used map[string]bool) error {
	if rng.Intn(2) == 0 {
		n := nm.pickMaybeLeader(ctx, rng, used)
		if n == nil {
			return errors.New("no running node")
		}
		used[n.ID] = true
		desc, err := DamageIndex(n.Data, rng)
		if err != nil {
			return err
		}
		nm.Rec.Event(FaultCorruptIndex, "running %s: %s", n.ID, desc)
		nm.outcome(FaultCorruptIndex + ": running node damaged")
		return nil
	}
	n, desc, err := nm.stopAndDamage(ctx, FaultCorruptIndex, rng, used, DamageIndex)
	if err != nil {
		return err
	}
	nm.Rec.Event(FaultCorruptIndex, "stopped %s; %s", n.ID, desc)
	if nm.restart(ctx, n, "over a damaged queue index") == restartOK {
		nm.outcome(FaultCorruptIndex + ": stopped follower started")
	}
	return nil
}

// corruptRunning flips a byte inside a committed body in the running
// leader's log (the page cache its reads come from), then wipes and re-adds
// a follower, so the leader must send it the whole log, the damaged entry
// too, and finally restarts the leader, which must refuse its damaged log
// (and is repaired). Consumers keep reading meanwhile: whatever any node
// serves or stores is checked as always, and the logs on disk at the end.
func (nm *Nemesis) corruptRunning(ctx context.Context, rng *rand.Rand, used map[string]bool) error {
	c := nm.C
	l := nm.leader(ctx)
	if l == nil || used[l.ID] {
		return errors.New("no leader")
	}
	var f *Node
	for _, n := range nm.followers(ctx) {
		if !used[n.ID] && n.Running() {
			f = n
			break
		}
	}
	if f == nil {
		return errors.New("no running follower")
	}
	used[l.ID], used[f.ID] = true, true
	bodies := nm.Rec.AckedBodies(rng, 50)
	if nm.Retention {
		// Old bodies may be deleted already: take them from the upper half
		// of what the leader holds.
		bodies = nil
		if st, err := c.StatusOf(ctx, l); err == nil && self(st) != nil {
			lo, hi := self(st).FirstIndex, self(st).AppliedIndex
			bodies = nm.Rec.AckedBodiesIn(rng, 50, lo+(hi-lo)/2, hi)
		}
	}
	desc, file, err := FlipByte(l.Data, FlipBody, bodies, rng, nm.Retention)
	if err != nil {
		return err
	}
	nm.mu.Lock()
	nm.damaged[l.ID] = true
	nm.mu.Unlock()
	nm.Rec.Event(FaultCorruptRunning, "leader %s keeps running; %s", l.ID, desc)
	nm.Rec.Event(FaultCorruptRunning, "re-adding %s empty: the leader must send it the whole log", f.ID)
	if err := c.Rejoin(ctx, f); err != nil {
		nm.Rec.Event(FaultCorruptRunning, "re-adding %s: %v", f.ID, err)
		nm.outcome(FaultCorruptRunning + ": follower not re-added while the leader's log was damaged")
	} else {
		nm.outcome(FaultCorruptRunning + ": follower re-added from the damaged leader")
	}
	if !l.Running() {
		nm.Rec.Event(FaultCorruptRunning, "%s exited by itself: %s", l.ID, refusalLine(l.LogSinceStart()))
		nm.outcome(FaultCorruptRunning + ": damaged node exited")
	} else {
		nm.judgeRunningDamage(ctx, l)
		c.Stop(l, 10*time.Second)
	}
	// Retention may have deleted the damaged segment while the node ran:
	// then it restarts without the damage.
	_, statErr := os.Stat(file)
	if errors.Is(statErr, os.ErrNotExist) {
		nm.Rec.Event(FaultCorruptRunning, "%s: retention deleted the damaged segment %s before the restart", l.ID, filepath.Base(file))
		nm.outcome(FaultCorruptRunning + ": damaged segment deleted by retention")
		nm.mu.Lock()
		delete(nm.damaged, l.ID)
		nm.mu.Unlock()
		nm.restart(ctx, l, "after retention deleted its damaged segment")
	} else if nm.restart(ctx, l, "after its running log was damaged") == restartOK {
		nm.violation(history.VNemesis, "%s restarted with a damaged log (%s): it must refuse", l.ID, desc)
	}
	// A follower that did not catch up from the damaged leader gets another
	// chance from the healthy group.
	if err := c.WaitSettled(ctx, 30*time.Second); err != nil {
		nm.Rec.Event(FaultCorruptRunning, "not settled after repairing %s: %v; re-adding %s again", l.ID, err, f.ID)
		if err := c.Rejoin(ctx, f); err != nil {
			nm.violation(history.VLiveness, "re-adding %s after the damaged leader was repaired: %v", f.ID, err)
		}
	}
	return nil
}

// judgeRunningDamage records whether the running node l met the damaged
// entry (its status says damaged: its caches may have served the entry
// instead, and then it has not), and if it did, that it no longer leads: a
// damaged node hands leadership over and never campaigns (DESIGN.md "Bad
// input and faults").
func (nm *Nemesis) judgeRunningDamage(ctx context.Context, l *Node) {
	st, err := nm.C.StatusOf(ctx, l)
	if err != nil || self(st) == nil {
		nm.Rec.Event(FaultCorruptRunning, "%s does not answer its status: %v", l.ID, err)
		return
	}
	me := self(st)
	if !me.Damaged {
		nm.Rec.Event(FaultCorruptRunning, "%s has not met the damaged entry (its caches served it)", l.ID)
		nm.outcome(FaultCorruptRunning + ": damage not met while running")
		return
	}
	nm.Rec.Event(FaultCorruptRunning, "%s says it is damaged at index %d: %s", l.ID, me.DamagedIndex, me.DamagedReason)
	nm.outcome(FaultCorruptRunning + ": running node marked itself damaged")
	deadline := time.Now().Add(15 * time.Second)
	for {
		cur := nm.C.Leader(ctx)
		if cur != nil && cur != l {
			nm.Rec.Event(FaultCorruptRunning, "%s leads instead of the damaged %s", cur.ID, l.ID)
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if cur == l {
				nm.violation(history.VNemesis, "%s is damaged (index %d) and still leads 15 s later: a damaged node must hand leadership over", l.ID, me.DamagedIndex)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// judgeRefusal checks how a node refused a damaged log: with a clear
// message (and, for a damaged body, "log is damaged"), never by crashing.
func (nm *Nemesis) judgeRefusal(n *Node, log string, wantDamaged bool) {
	if i := strings.Index(log, "panic:"); i >= 0 {
		nm.violation(history.VStartPanic, "%s crashed instead of refusing its damaged log with a message: %s", n.ID, panicSummary(log[i:]))
		return
	}
	if !refusalMessage(log) {
		nm.violation(history.VNemesis, "%s refused to start without saying its log is damaged: %s", n.ID, tail(log, 400))
		return
	}
	if wantDamaged && !strings.Contains(log, "log is damaged") {
		nm.violation(history.VNemesis, "%s refused its corrupt log without the message \"log is damaged\": %s", n.ID, refusalLine(log))
	}
}

// panicSummary is the panic line and the first frame of raftmq code.
func panicSummary(s string) string {
	lines := strings.Split(s, "\n")
	out := strings.TrimSpace(lines[0])
	for i, l := range lines {
		if strings.Contains(l, "raftmq/") && i+1 < len(lines) {
			return out + " at " + strings.TrimSpace(l) + " " + strings.TrimSpace(lines[i+1])
		}
	}
	return out
}

type restartResult int

const (
	restartOK restartResult = iota
	restartRefused
	restartStuck
)

// awaitStart waits until n answers (started) or exits (refused).
func (nm *Nemesis) awaitStart(ctx context.Context, n *Node) (restartResult, string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err, exited := nm.C.WaitExit(n, 0); exited {
			log := n.LogSinceStart()
			if err == nil {
				return restartStuck, log + "\n(exit status 0)"
			}
			return restartRefused, log
		}
		if st, err := nm.C.StatusOf(ctx, n); err == nil && answeredBy(st, n) {
			if _, exited := nm.C.WaitExit(n, 0); !exited {
				return restartOK, ""
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return restartStuck, n.LogSinceStart()
}

// answeredBy reports whether st is node n's own answer: its id and its
// Raft address. Another process may hold n's client address while n is
// down (the port is free then), a raftmq node of another group among
// them, and its answer must not pass for n's start.
func answeredBy(st *api.StatusResponse, n *Node) bool {
	if st.GetAnsweredBy() != n.ID {
		return false
	}
	for _, ns := range st.GetNodes() {
		if ns.GetId() == n.ID {
			return ns.GetRaftAddress() == n.Raft
		}
	}
	return false
}

// restart starts a stopped node. A node that refuses to start is repaired
// (Rejoin); that is a violation unless its data was damaged on purpose.
func (nm *Nemesis) restart(ctx context.Context, n *Node, why string) restartResult {
	if n.Running() {
		return restartOK
	}
	if err := nm.C.StartNode(n); err != nil {
		nm.violation(history.VLiveness, "restart %s %s: %v", n.ID, why, err)
		return restartStuck
	}
	res, log := nm.awaitStart(ctx, n)
	nm.mu.Lock()
	damaged := nm.damaged[n.ID]
	nm.mu.Unlock()
	switch res {
	case restartOK:
		nm.Rec.Event("restart", "%s restarted %s", n.ID, why)
	case restartRefused, restartStuck:
		nm.Rec.Event("restart", "%s did not start %s: %s", n.ID, why, refusalLine(log))
		if !damaged {
			nm.violation(history.VNemesis, "%s did not start %s: %s", n.ID, why, tail(log, 600))
		} else {
			nm.judgeRefusal(n, log, false)
		}
		nm.Rec.Event("repair", "repairing %s: member remove, wipe, start empty, member add", n.ID)
		if err := nm.C.Rejoin(ctx, n); err != nil {
			nm.violation(history.VLiveness, "repair of %s failed: %v", n.ID, err)
		} else {
			nm.Rec.Event("repair", "%s repaired and a voter again", n.ID)
		}
	}
	nm.mu.Lock()
	delete(nm.damaged, n.ID)
	nm.mu.Unlock()
	return res
}

// HealAll undoes everything: traffic passes, paused nodes continue, full
// disks get space, stopped nodes start (repaired if they refuse), and every
// node is a voter again.
func (nm *Nemesis) HealAll(ctx context.Context) {
	c := nm.C
	c.Heal()
	for _, n := range c.Nodes {
		c.Resume(n)
		os.Remove(filepath.Join(n.Data, fillerName))
	}
	for _, n := range c.Nodes {
		if !n.Running() {
			nm.restart(ctx, n, "when healing")
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		voters, nonvoters, err := c.Members(ctx)
		if err != nil {
			time.Sleep(300 * time.Millisecond)
			continue
		}
		missing := 0
		for _, n := range c.Nodes {
			if voters[n.ID] {
				continue
			}
			missing++
			nm.Rec.Event("heal", "%s is not a voter (non-voter=%v): adding it", n.ID, nonvoters[n.ID])
			if nonvoters[n.ID] {
				actx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err = c.Admin.AddMember(actx, n.ID, n.Raft)
				cancel()
			} else {
				err = c.Rejoin(ctx, n)
			}
			if err != nil {
				nm.Rec.Event("heal", "adding %s: %v", n.ID, err)
			}
		}
		if missing == 0 {
			return
		}
	}
}

const fillerName = "CHAOS_FILLER"

// fillDisk writes a filler file into dir until the file system is full,
// then gives headroom bytes back (a little room lets a write past the
// preallocated segment succeed, so the failure moves to the next segment's
// allocation).
func fillDisk(dir string, headroom int64) (int64, error) {
	f, err := os.OpenFile(filepath.Join(dir, fillerName), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("filler: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for i := 0; i < 8192; i++ {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			break // ENOSPC: full
		}
	}
	small := make([]byte, 4096)
	for i := 0; i < 512; i++ {
		w, err := f.Write(small)
		n += int64(w)
		if err != nil {
			break
		}
	}
	if headroom > 0 && n > headroom {
		n -= headroom
		if err := f.Truncate(n); err != nil {
			return n, fmt.Errorf("filler: %w", err)
		}
	}
	return n, nil
}

func refusalLine(log string) string {
	for _, l := range strings.Split(log, "\n") {
		ll := strings.ToLower(l)
		if strings.Contains(ll, "damaged") || strings.Contains(ll, "lost entries") || strings.Contains(ll, "corrupt") ||
			strings.Contains(ll, "error") || strings.Contains(ll, "panic") {
			return strings.TrimSpace(l)
		}
	}
	return tail(log, 300)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
