package load

import (
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Meter computes the load signal, which says how close this node is to
// being the group's bottleneck (1 = at capacity):
//
//	load = max(cpu:      process CPU time / (wall time x CPU budget),
//	           queue:    produce queue fill,
//	           pipeline: Raft entries in flight / MaxInflight,
//	           reads:    messages served per second / readCapacity)
//
// sampled every StatePeriod, cpu and pipeline smoothed over about a second.
// The mean produce latency is sampled too, for /metrics only. The CPU budget is this node's fair share of the
// CPU it can run on:
//
//	budget = min(min(GOMAXPROCS, cgroup CPU quota) / brokers in this process,
//	             cores / nodes of the group on this host)
//
// so three nodes on one machine each count a third of its cores (their sum
// is what the machine has), a container limited to 0.6 CPU counts 0.6, and
// one node per machine counts the machine. Config.CPUBudget replaces the
// computed budget; SetOverride replaces the whole signal (tests,
// operators). Measurements behind the default threshold: broker/DESIGN.md.
//
// Its methods are safe for concurrent use; mu is never held while calling
// out (the queue and in-process functions are called without it).
type Meter struct {
	mu       sync.Mutex
	lastCPU  time.Duration
	lastWall time.Time
	cpu      float64 // share of the budget used over the last sample
	readRate float64
	limit    float64 // cores: min(GOMAXPROCS, cgroup quota, NumCPU)
	fixed    float64 // Config.CPUBudget; 0: computed
	sharing  int     // nodes of the group on this host, this one included

	pipeline float64       // raft pipeline fill (inflight entries / MaxInflight), averaged
	latency  float64       // mean produce latency (s) over the last sample; 0 when none
	latSum   atomic.Uint64 // ns of produce latency observed since the last sample
	latN     atomic.Uint64

	reads    atomic.Int64
	override atomic.Uint64 // float64 bits; NaN = none
	avgBytes atomic.Uint64

	queueFill func() float64 // produce queue fill, 0..1
	inProcess func() int     // live brokers of this process: they share its CPU time
}

// readCapacity is the pull rate (messages/s) counted as fully loaded.
const readCapacity = 200000

// New returns a meter. fixed is the CPU budget in cores (0: computed);
// queueFill reports the produce queue's fill (0..1); inProcess counts the
// live brokers of this process, which share its CPU time (in-process test
// groups). Either function may be nil (an empty queue, one broker).
func New(fixed float64, queueFill func() float64, inProcess func() int) *Meter {
	if queueFill == nil {
		queueFill = func() float64 { return 0 }
	}
	if inProcess == nil {
		inProcess = func() int { return 1 }
	}
	l := &Meter{lastWall: time.Now(), lastCPU: processCPU(), limit: cpuLimit(), fixed: fixed, sharing: 1,
		queueFill: queueFill, inProcess: inProcess}
	l.override.Store(math.Float64bits(math.NaN()))
	l.avgBytes.Store(1024)
	return l
}

func (l *Meter) brokers() float64 { return float64(max(l.inProcess(), 1)) }

// budget is the CPU (in cores) this node counts as its own.
func (l *Meter) budget() float64 {
	if l.fixed > 0 {
		return l.fixed
	}
	// The process's limit is shared by its brokers; the machine's cores by
	// the group's nodes on it (those of this process included).
	return min(l.limit/l.brokers(), float64(runtime.NumCPU())/float64(max(l.sharing, 1)))
}

// SetSharing sets how many nodes of the group run on this host, this one
// included (see SameHost).
func (l *Meter) SetSharing(n int) {
	l.mu.Lock()
	l.sharing = max(n, 1)
	l.mu.Unlock()
}

// ObserveProduce records one produce request's latency.
func (l *Meter) ObserveProduce(d time.Duration) {
	l.latSum.Add(uint64(d))
	l.latN.Add(1)
}

// Sample takes one sample (every StatePeriod); pipelineFill is the raft
// pipeline's fill (entries in flight / their bound).
func (l *Meter) Sample(pipelineFill float64) {
	now, cpu, inProc := time.Now(), processCPU(), l.brokers()
	sum, n := l.latSum.Swap(0), l.latN.Swap(0)
	l.mu.Lock()
	defer l.mu.Unlock()
	dt := now.Sub(l.lastWall)
	if dt <= 0 {
		return
	}
	used := float64(cpu-l.lastCPU) / float64(dt) // cores of the whole process
	// Smoothed over about a second (five samples): one busy sample does
	// not move readers, a sustained load does within a second.
	l.cpu = 0.6*l.cpu + 0.4*(used/inProc/l.budget())
	l.readRate = float64(l.reads.Swap(0)) / dt.Seconds()
	l.pipeline = 0.7*l.pipeline + 0.3*pipelineFill
	l.latency = 0
	if n > 0 {
		l.latency = float64(sum) / float64(n) / 1e9
	}
	l.lastWall, l.lastCPU = now, cpu
}

// ObservePull records one pull that served n messages of bodyBytes in all:
// the read rate, and the mean message size that AvgMessageBytes reports.
func (l *Meter) ObservePull(n, bodyBytes int) {
	if n <= 0 {
		return
	}
	l.reads.Add(int64(n))
	avg := l.avgBytes.Load()
	l.avgBytes.Store((avg*7 + uint64(bodyBytes/n)) / 8)
}

// Parts are the signal's components, for /metrics and the design notes.
type Parts struct {
	CPU, Queue, Reads float64
	Pipeline          float64
	Latency           float64 // s
	Budget            float64 // cores
	Sharing           int
}

// Parts returns the signal's components as last sampled.
func (l *Meter) Parts() Parts {
	l.mu.Lock()
	p := Parts{CPU: l.cpu, Reads: l.readRate / readCapacity, Pipeline: l.pipeline, Latency: l.latency, Budget: l.budget(), Sharing: l.sharing}
	l.mu.Unlock()
	p.Queue = l.queueFill()
	return p
}

// Value is the load signal: the override when one is set, else the largest
// of its parts.
func (l *Meter) Value() float64 {
	if o := math.Float64frombits(l.override.Load()); !math.IsNaN(o) {
		return o
	}
	p := l.Parts()
	return max(p.CPU, p.Queue, p.Reads, p.Pipeline)
}

// AvgMessageBytes is the mean size of the message bodies pulls served,
// smoothed; 1024 before the first.
func (l *Meter) AvgMessageBytes() uint64 { return max(l.avgBytes.Load(), 1) }

// SetOverride fixes the load signal at v (NaN restores measuring).
func (l *Meter) SetOverride(v float64) { l.override.Store(math.Float64bits(v)) }

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuLimit is the CPU this process may use, in cores: the least of
// GOMAXPROCS, the machine's cores and the cgroup's CPU quota.
func cpuLimit() float64 {
	c := float64(min(runtime.GOMAXPROCS(0), runtime.NumCPU()))
	if q, ok := cgroupCPUQuota(); ok && q < c {
		c = q
	}
	return c
}

// cgroupCPUQuota reads the CPU bandwidth limit of this process's cgroup
// (v2 cpu.max, else v1 cpu.cfs_quota_us / cpu.cfs_period_us), in cores.
func cgroupCPUQuota() (float64, bool) {
	if b, err := os.ReadFile("/sys/fs/cgroup/cpu.max"); err == nil {
		return parseCPUMax(string(b))
	}
	q, err1 := os.ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	p, err2 := os.ReadFile("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return parseCPUMax(strings.TrimSpace(string(q)) + " " + strings.TrimSpace(string(p)))
}

// parseCPUMax parses "QUOTA PERIOD" (QUOTA "max" or negative: no limit).
func parseCPUMax(s string) (float64, bool) {
	f := strings.Fields(s)
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	q, err1 := strconv.ParseFloat(f[0], 64)
	p, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return q / p, true
}

// hostOf is the host part of addr, with every loopback address the same
// host; "" when it names no host (":9000", "0.0.0.0:9000").
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	if h == "localhost" {
		return "loopback"
	}
	if ip := net.ParseIP(h); ip != nil {
		switch {
		case ip.IsLoopback():
			return "loopback"
		case ip.IsUnspecified():
			return ""
		}
	}
	return h
}

// SameHost counts the addresses on the host of self (self included once).
func SameHost(self string, others []string) int {
	h := hostOf(self)
	n := 1
	if h == "" {
		return n
	}
	for _, o := range others {
		if hostOf(o) == h {
			n++
		}
	}
	return n
}
