package server_test

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
)

// TestStartTimeAgainstLogSize measures how long a one-node group takes from
// server.Start to a ready leader as its log grows (docs/BENCHMARKS.md "Start
// time against log size"). It is a measurement, not a check, and builds
// logs of gigabytes, so it runs only when RAFTMQ_START_BENCH_MB lists the
// log sizes in MB, e.g.
//
//	RAFTMQ_START_BENCH_MB=100,500,1000 go test -run TestStartTimeAgainstLogSize -v -timeout 30m ./broker/server/
//
// (make bench-start). The log is built through the broker with 1 KiB
// messages, 16 per request from 16 producers (group commit makes entries of
// several requests); one snapshot is taken at the end of each build and
// 8 MB more are produced after it, so the node restarts as a running node
// would: a snapshot, and a log tail after it to replay. Each size is
// restarted RAFTMQ_START_BENCH_RUNS times (default 3) after a graceful
// Close. RAFTMQ_START_BENCH_DIR sets the data directory (default a temp
// directory, removed at the end). RAFTMQ_START_BENCH_LATENCY=1 then also
// measures synchronous produce latency on the largest log while the
// background check runs, unpaced and paced, against no check.
func TestStartTimeAgainstLogSize(t *testing.T) {
	spec := os.Getenv("RAFTMQ_START_BENCH_MB")
	if spec == "" {
		t.Skip("set RAFTMQ_START_BENCH_MB (e.g. 100,500,1000) to measure start time against log size")
	}
	var sizes []int
	for _, f := range strings.Split(spec, ",") {
		mb, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || mb <= 0 {
			t.Fatalf("RAFTMQ_START_BENCH_MB %q: want MB sizes like 100,500,1000", spec)
		}
		sizes = append(sizes, mb)
	}
	runs := 3
	if r := os.Getenv("RAFTMQ_START_BENCH_RUNS"); r != "" {
		var err error
		if runs, err = strconv.Atoi(r); err != nil || runs < 1 {
			t.Fatalf("RAFTMQ_START_BENCH_RUNS %q", r)
		}
	}
	cfg, _ := singleNode(t)
	if d := os.Getenv("RAFTMQ_START_BENCH_DIR"); d != "" {
		cfg.DataDir = d
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	// Keep the node's own lines (verification, start) but not raft's chatter.
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "n1", Level: hclog.Info, Output: testWriter{t}, Exclude: func(_ hclog.Level, msg string, _ ...interface{}) bool {
		return !strings.Contains(msg, "verif") && !strings.Contains(msg, "log check") && !strings.Contains(msg, "checking the log") && !strings.Contains(msg, "node started")
	}})
	ctx := ctxT(t, 60*time.Minute)
	start := func() (*server.Server, time.Duration, time.Duration) {
		t.Helper()
		t0 := time.Now()
		s, err := server.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		started := time.Since(t0)
		waitFor(t, 5*time.Minute, "a ready leader", func() bool { return s.Node().Ready() && s.Broker().Readiness() == nil })
		return s, started, time.Since(t0)
	}
	s, _, _ := start()
	if _, err := s.Broker().CreateTopic(ctx, "t", 8, false); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	var produced atomic.Int64
	produce := func(until int64) {
		var wg sync.WaitGroup
		for p := 0; p < 16; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				msgs := make([]broker.ProduceMessage, 16)
				for i := range msgs {
					msgs[i] = broker.ProduceMessage{Body: body}
				}
				for produced.Load() < until && ctx.Err() == nil {
					if _, err := s.Broker().Produce(ctx, broker.ProduceRequest{Topic: "t", Messages: msgs}); err != nil {
						t.Errorf("produce: %v", err)
						return
					}
					produced.Add(int64(len(msgs) * len(body)))
				}
			}(p)
		}
		wg.Wait()
	}
	t.Logf("| log (MB of bodies) | entries | log dir (MB) | replayed entries | Start returned | ready leader |")
	for _, mb := range sizes {
		t0 := time.Now()
		produce(int64(mb) << 20)
		if t.Failed() {
			return
		}
		if _, err := s.Node().Snapshot(); err != nil {
			t.Fatal(err)
		}
		produce(produced.Load() + 8<<20)
		last, snap := s.RaftLog().LastIndex(), s.Node().LastSnapshotIndex()
		t.Logf("built %d MB in %s", produced.Load()>>20, time.Since(t0).Round(time.Millisecond))
		for r := 0; r < runs; r++ {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var started, ready time.Duration
			s, started, ready = start()
			t.Logf("| %d | %d | %d | %d | %s | %s |", produced.Load()>>20, last, dirMB(t, filepath.Join(cfg.DataDir, "log")),
				last-snap, started.Round(time.Millisecond), ready.Round(time.Millisecond))
		}
	}
	if os.Getenv("RAFTMQ_START_BENCH_LATENCY") == "" {
		s.Close()
		return
	}
	// What the background check costs producers: synchronous 1 KiB
	// produces right after a start on the largest log, while the check
	// runs unpaced, at the default pace, and with no check at all.
	// Alternated, twice, to spread the machine's drift.
	t.Logf("| background check | produces | p50 | p90 | p99 | checked meanwhile (MB) |")
	for round := 0; round < 2; round++ {
		for _, mode := range []struct {
			name string
			mode server.VerifyMode
			mbps int
		}{{"off", server.VerifyOff, 0}, {"32 MB/s (default)", server.VerifyBackground, 32}, {"unpaced", server.VerifyBackground, 0}} {
			s.Close()
			os.Remove(filepath.Join(cfg.DataDir, "LOG_CHECKED")) // each run checks from the start
			cfg.VerifyLog, cfg.VerifyLogMBps = mode.mode, mode.mbps
			s, _, _ = start()
			const n = 2000
			lat := make([]time.Duration, 0, n)
			msg := []broker.ProduceMessage{{Body: body}}
			for i := 0; i < n; i++ {
				t0 := time.Now()
				if _, err := s.Broker().Produce(ctx, broker.ProduceRequest{Topic: "t", Messages: msg}); err != nil {
					t.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			p, _ := s.RaftLog().BackgroundProgress()
			t.Logf("| %s | %d | %s | %s | %s | %d |", mode.name, n, lat[n/2].Round(time.Microsecond), lat[n*9/10].Round(time.Microsecond),
				lat[n*99/100].Round(time.Microsecond), p.Bytes/1e6)
		}
	}
	s.Close()
}

// dirMB is the size of the files in dir in MB.
func dirMB(t *testing.T, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n >> 20
}
