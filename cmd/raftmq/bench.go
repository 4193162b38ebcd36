package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/prometheus/procfs"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/bench"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// benchFlags returns fresh flags for one bench subcommand (addEnv appends
// to a flag's EnvVars, so subcommands must not share flag values).
func benchFlags(defaultCount int64, extra ...cli.Flag) []cli.Flag {
	countUsage := "stop after this many messages (0: no count bound)"
	if defaultCount == 0 {
		countUsage = "stop after this many messages (0: read to the end offsets seen at the start)"
	}
	fs := clientFlags(
		&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Value: "bench", Usage: "topic"},
		&cli.Int64Flag{Name: "count", Aliases: []string{"n"}, Value: defaultCount, Usage: countUsage},
		&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Value: 30 * time.Second, Usage: "stop after this long (0: no time bound)"},
		&cli.IntFlag{Name: "size", Value: 1024, Usage: "message body size in bytes"},
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON for machines"},
		&cli.BoolFlag{Name: "local", Usage: "start a local group of 3 server processes for the run (and report their peak RSS)"},
		&cli.StringSliceFlag{Name: "server-flag", Usage: "with --local: extra flag for every server, e.g. --server-flag=--max-batch-bytes=524288 (repeatable)"},
		&cli.StringFlag{Name: "local-dir", Usage: "with --local: keep the group's data and logs in this directory (default: a temporary one, removed)"},
		&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of this client's run to this file (servers: http://HTTP/debug/pprof/profile)"},
		&cli.BoolFlag{Name: "purge", Usage: "delete the topic after the run (its messages are then reclaimed by retention)"},
	)
	return append(fs, extra...)
}

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure produce and consume throughput and latency",
		Description: "Runs against a group (-s) or a local 3-process group it starts itself (--local). Progress goes\n" +
			"to stderr once a second; the summary (or --json) to stdout. MB/s counts 10^6 bytes of bodies.\n\n" +
			"   raftmq bench produce --local --size 1024 --producers 4 --window 256\n" +
			"   raftmq bench produce -s 127.0.0.1:9001 --producers 1 --window 1 --count 20000\n" +
			"   raftmq bench consume -s 127.0.0.1:9001 --follower-reads=false",
		Subcommands: []*cli.Command{
			{
				Name:  "produce",
				Usage: "send messages as fast as the window allows; report msg/s, MB/s and send→ack latency",
				Description: "Each producer has its own connection and producer id, and --window goroutines that each\n" +
					"send --batch messages per Send and wait for the ack (--window 1: synchronous); the SDK\n" +
					"coalesces concurrent Sends of a producer into shared requests. The run ends at --count\n" +
					"messages or after --duration, whichever comes first. Latency is per Send, from the call to\n" +
					"the ack (quorum fsync and apply on the leader), including coalescing and retries. With\n" +
					"--namesrv and no --broker-name the run covers every group of the cluster: each producer\n" +
					"spreads its messages over the topic's queues in all of them (the topic is created on every\n" +
					"group when none holds it), and the result counts what each group acknowledged.",
				Flags: benchFlags(200000,
					&cli.IntFlag{Name: "producers", Aliases: []string{"P"}, Value: 4, Usage: "producers (each its own connection)"},
					&cli.IntFlag{Name: "window", Aliases: []string{"w"}, Value: 256, Usage: "Sends in flight per producer (1 = synchronous)"},
					&cli.IntFlag{Name: "batch", Aliases: []string{"b"}, Value: 1, Usage: "messages per Send"},
					&cli.IntFlag{Name: "queues", Value: 4, Usage: "queues of the topic when the run creates it (through --namesrv: of each group)"},
					namesrvFlag(),
				),
				Action: runBenchProduce,
			},
			{
				Name:  "consume",
				Usage: "read the topic from its start to its end; report msg/s, MB/s and which nodes served",
				Description: "Consumers pin the topic's queues between them (consumer i reads queues i, i+n, ...) under a\n" +
					"fresh group, read from the earliest offsets to the end offsets seen at the start (or\n" +
					"--count, or --duration) and commit nothing. With --local the new group is empty, so the run\n" +
					"first fills the topic with --fill messages of --size bytes (not timed). With --namesrv and\n" +
					"no --broker-name the run reads every group that holds the topic: consumer i reads groups\n" +
					"i, i+n, ... of them (not more consumers than groups).",
				Flags: benchFlags(0,
					&cli.IntFlag{Name: "consumers", Aliases: []string{"c"}, Value: 1, Usage: "consumers (each its own connection)"},
					&cli.BoolFlag{Name: "follower-reads", Value: true, Usage: "follow the group's suggestion of which node to pull from (false: leader only)"},
					&cli.IntFlag{Name: "max-messages", Value: 1024, Usage: "messages per pull of one queue"},
					&cli.Int64Flag{Name: "fill", Value: 200000, Usage: "with --local: messages to produce before consuming"},
					&cli.IntFlag{Name: "queues", Value: 4, Usage: "with --local: queues of the filled topic"},
					namesrvFlag(),
				),
				Action: runBenchConsume,
			},
			{
				Name:  "e2e",
				Usage: "produce and consume at once; report both rates and the end-to-end latency",
				Description: "Consumers (as bench consume, starting at the topic's end) read what the producers (as bench\n" +
					"produce) send during --duration. End-to-end latency is from a message's store time on the\n" +
					"leader to its arrival at a consumer, at the millisecond resolution of store times. With\n" +
					"--namesrv and no --broker-name the run covers every group of the cluster, as bench produce\n" +
					"and bench consume do.",
				Flags: benchFlags(0,
					&cli.IntFlag{Name: "producers", Aliases: []string{"P"}, Value: 4, Usage: "producers (each its own connection)"},
					&cli.IntFlag{Name: "window", Aliases: []string{"w"}, Value: 16, Usage: "Sends in flight per producer (1 = synchronous)"},
					&cli.IntFlag{Name: "batch", Aliases: []string{"b"}, Value: 1, Usage: "messages per Send"},
					&cli.IntFlag{Name: "queues", Value: 4, Usage: "queues of the topic when the run creates it (through --namesrv: of each group)"},
					&cli.IntFlag{Name: "consumers", Aliases: []string{"c"}, Value: 2, Usage: "consumers (each its own connection)"},
					&cli.BoolFlag{Name: "follower-reads", Value: true, Usage: "follow the group's suggestion of which node to pull from (false: leader only)"},
					namesrvFlag(),
				),
				Action: runBenchE2E,
			},
		},
	}
}

// benchTarget is where a bench runs: the -s servers, every group behind
// the name servers, or a local group.
type benchTarget struct {
	servers     []string
	nameServers []string            // every group registered with them (bench produce and consume)
	tls         *tls.Config         // -s with --tls-ca: TLS; nil: plaintext
	creds       *client.Credentials // -s with --access-key (or the context's): signed calls
	group       *localgroup.Group
}

// startBenchTarget is the -s servers (or --broker-name's behind
// --namesrv), every group registered with --namesrv when wide, or with
// --local a local group it starts.
func startBenchTarget(c *cli.Context, wide bool) (*benchTarget, error) {
	if wide && c.Bool("local") {
		return nil, usageError(c, "--local starts its own group: drop --namesrv")
	}
	if !c.Bool("local") {
		if c.IsSet("server-flag") || c.IsSet("local-dir") {
			return nil, errors.New("--server-flag and --local-dir need --local")
		}
		tc, err := clientTLS(c)
		if err != nil {
			return nil, err
		}
		creds, err := clientCredentials(c)
		if err != nil {
			return nil, err
		}
		if wide {
			return &benchTarget{nameServers: []string{c.String("namesrv")}, tls: tc, creds: creds}, nil
		}
		servers, err := groupServers(c)
		if err != nil {
			return nil, err
		}
		return &benchTarget{servers: servers, tls: tc, creds: creds}, nil
	}
	if c.IsSet("tls-ca") {
		return nil, errors.New("--local starts a plaintext group: for TLS start the group yourself and give -s with --tls-ca")
	}
	if c.IsSet("servers") {
		return nil, errors.New("--local starts its own group: drop -s/--servers")
	}
	// A local group started with --server-flag=--auth=enforcing (and a
	// first admin) is signed to with --access-key.
	creds, err := clientCredentials(c)
	if err != nil {
		return nil, err
	}
	var args []string
	for _, f := range c.StringSlice("server-flag") {
		args = append(args, strings.Fields(f)...)
	}
	g, err := localgroup.New(localgroup.Config{Nodes: 3, Dir: c.String("local-dir"), Keep: c.IsSet("local-dir"), ServerArgs: args})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.App.ErrWriter, "starting a local group of 3 nodes in %s\n", g.Dir())
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	if err := g.StartAll(ctx); err != nil {
		g.Close()
		return nil, fmt.Errorf("start local group: %w", err)
	}
	leader, _, err := g.WaitLeader(ctx, "")
	if err != nil {
		g.Close()
		return nil, fmt.Errorf("start local group: %w", err)
	}
	fmt.Fprintf(c.App.ErrWriter, "local group up: leader %s, servers %s\n", leader.ID, g.ClientAddrs())
	return &benchTarget{servers: []string{g.ClientAddrs()}, group: g, creds: creds}, nil
}

// nodeRSS is a server's memory at the end of a local run.
type nodeRSS struct {
	ID        string `json:"id"`
	PID       int    `json:"pid"`
	PeakBytes uint64 `json:"peak_rss_bytes"` // VmHWM
	RSSBytes  uint64 `json:"rss_bytes"`      // VmRSS at the end
	Leader    bool   `json:"leader"`
}

// finish reads the servers' memory (local runs) and stops them.
func (t *benchTarget) finish(ctx context.Context) []nodeRSS {
	if t.group == nil {
		return nil
	}
	defer t.group.Close()
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	leaderID := ""
	if l, _, err := t.group.Leader(lctx); err == nil {
		leaderID = l.ID
	}
	var out []nodeRSS
	for _, n := range t.group.Nodes() {
		pid := n.PID()
		if pid == 0 || !n.Running() {
			continue
		}
		peak, cur, err := procMemory(pid)
		if err != nil {
			continue
		}
		out = append(out, nodeRSS{ID: n.ID, PID: pid, PeakBytes: peak, RSSBytes: cur, Leader: n.ID == leaderID})
	}
	return out
}

// procMemory reads VmHWM (peak resident set) and VmRSS of a process.
func procMemory(pid int) (peak, cur uint64, err error) {
	p, err := procfs.NewProc(pid)
	if err == nil {
		var st procfs.ProcStatus
		if st, err = p.NewStatus(); err == nil {
			return st.VmHWM, st.VmRSS, nil
		}
	}
	return 0, 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
}

// benchTargetOf is where bench produce, consume and e2e run: with --namesrv and
// no --broker-name every group of the cluster.
func benchTargetOf(c *cli.Context) (*benchTarget, error) {
	wide, err := viaNamesrv(c)
	if err != nil {
		return nil, err
	}
	return startBenchTarget(c, wide)
}

// String names the target for the run's first line.
func (t *benchTarget) String() string {
	if len(t.nameServers) > 0 {
		return "every group registered with " + strings.Join(t.nameServers, ";")
	}
	return strings.Join(t.servers, ",")
}

// purgeTopic deletes the bench topic after a run with --purge, on every
// group that holds it when t is the name servers' cluster.
func purgeTopic(c *cli.Context, t *benchTarget, topic string) error {
	if !c.Bool("purge") {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if len(t.nameServers) > 0 {
		var cl *cluster.Cluster
		if cl, err = newCluster(c); err != nil {
			return err
		}
		defer cl.Close()
		_, err = cl.DeleteTopic(ctx, topic, true, nil)
	} else {
		var cl *client.Client
		if cl, err = client.New(client.Config{Servers: t.servers, RetryTimeout: 30 * time.Second, TLS: t.tls, Credentials: t.creds}); err != nil {
			return err
		}
		defer cl.Close()
		err = cl.DeleteTopic(ctx, topic, true)
	}
	if err != nil {
		return fmt.Errorf("--purge: delete topic %s: %w", topic, err)
	}
	fmt.Fprintf(c.App.ErrWriter, "deleted topic %s\n", topic)
	return nil
}

// benchBound says when a bench run stops.
func benchBound(count int64, d time.Duration) string {
	switch {
	case count > 0 && d > 0:
		return fmt.Sprintf("until %s messages or %s", groupDigits(uint64(count)), d)
	case count > 0:
		return fmt.Sprintf("until %s messages", groupDigits(uint64(count)))
	case d > 0:
		return "for " + d.String()
	}
	return "until interrupted"
}

func benchProgress(w io.Writer, verb string) func(bench.Progress) {
	return func(p bench.Progress) {
		errs := ""
		if p.Errors > 0 {
			errs = fmt.Sprintf("  %d errors", p.Errors)
		}
		fmt.Fprintf(w, "%6.1fs  %12s msgs %s  %10s msg/s%s\n", p.Elapsed.Seconds(), groupDigits(p.Messages), verb, groupDigits(uint64(p.Rate)), errs)
	}
}

func runBenchProduce(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("bench produce takes no arguments, got %q", c.Args().Slice())
	}
	count := c.Int64("count")
	t, err := benchTargetOf(c)
	if err != nil {
		return err
	}
	cfg := bench.ProduceConfig{
		Servers: t.servers, NameServers: t.nameServers, TLS: t.tls, Credentials: t.creds, Topic: c.String("topic"), Queues: int32(c.Int("queues")), Size: c.Int("size"),
		Producers: c.Int("producers"), Window: c.Int("window"), Batch: c.Int("batch"),
		Count: count, Duration: c.Duration("duration"), Timeout: c.Duration("timeout"),
		Progress: benchProgress(c.App.ErrWriter, "acked"),
	}
	fmt.Fprintf(c.App.ErrWriter, "bench produce: topic %s, %d B messages, %d producers x %d requests in flight x %d messages, %s, against %s\n",
		cfg.Topic, cfg.Size, cfg.Producers, cfg.Window, cfg.Batch, benchBound(cfg.Count, cfg.Duration), t)
	res, nodes, runErr := profiled(c, t, func() (*bench.ProduceResult, error) {
		res, err := bench.RunProduce(c.Context, cfg)
		return res, errors.Join(err, purgeTopic(c, t, cfg.Topic))
	})
	if res == nil {
		return clean(runErr)
	}
	err = reportBench(c, struct {
		*bench.ProduceResult
		Nodes []nodeRSS `json:"nodes,omitempty"`
	}{res, nodes}, func(w io.Writer) { printProduce(w, res); printNodes(w, nodes) },
		runErr, res.Errors, res.FirstError, "Send(s)")
	// The summary line comes last, as with produce. The warm-up messages
	// (one per producer, outside the clock) are not counted.
	if err != nil {
		fmt.Fprintln(c.App.ErrWriter, "raftmq:", err)
	}
	fmt.Fprintln(c.App.ErrWriter, sendSummary(res.Messages, res.Failed, res.Unknown))
	if err != nil {
		return reported{exitCode(err)}
	}
	return nil
}

// profiled runs a bench case under the CPU profile --cpuprofile asks for,
// then stops t's local group (if any) and returns its nodes' memory.
func profiled[R any](c *cli.Context, t *benchTarget, run func() (*R, error)) (*R, []nodeRSS, error) {
	stop, err := startCPUProfile(c.String("cpuprofile"))
	if err != nil {
		t.finish(context.Background())
		return nil, nil, err
	}
	res, runErr := run()
	stop()
	return res, t.finish(context.Background()), runErr
}

// reportBench prints a bench result, as JSON (asJSON, with the nodes' RSS)
// with --json or else as text, and turns the run's error or its failed
// operations into the command's error.
func reportBench(c *cli.Context, asJSON any, text func(io.Writer), runErr error, errors uint64, first, what string) error {
	if c.Bool("json") {
		if err := printJSON(c.App.Writer, asJSON); err != nil {
			return err
		}
	} else {
		text(c.App.Writer)
	}
	if runErr != nil {
		return clean(runErr)
	}
	if errors > 0 {
		return &exitError{1, fmt.Errorf("%d %s failed; first: %s", errors, what, first)}
	}
	return nil
}

func runBenchConsume(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("bench consume takes no arguments, got %q", c.Args().Slice())
	}
	t, err := benchTargetOf(c)
	if err != nil {
		return err
	}
	if t.group != nil && c.Int64("fill") > 0 {
		fmt.Fprintf(c.App.ErrWriter, "filling topic %s with %d messages of %d B (not timed)\n", c.String("topic"), c.Int64("fill"), c.Int("size"))
		_, err := bench.RunProduce(c.Context, bench.ProduceConfig{Servers: t.servers, TLS: t.tls, Credentials: t.creds, Topic: c.String("topic"),
			Queues: int32(c.Int("queues")), Size: c.Int("size"), Producers: 4, Window: 256, Batch: 1,
			Count: c.Int64("fill"), Timeout: c.Duration("timeout")})
		if err != nil {
			t.finish(context.Background())
			return fmt.Errorf("fill: %w", clean(err))
		}
	}
	cfg := bench.ConsumeConfig{
		Servers: t.servers, NameServers: t.nameServers, TLS: t.tls, Credentials: t.creds, Topic: c.String("topic"), Consumers: c.Int("consumers"), FollowerReads: c.Bool("follower-reads"),
		MaxMessages: uint32(max(c.Int("max-messages"), 0)), Count: c.Int64("count"), Duration: c.Duration("duration"),
		Timeout: c.Duration("timeout"), Progress: benchProgress(c.App.ErrWriter, "read"),
	}
	fmt.Fprintf(c.App.ErrWriter, "bench consume: topic %s, %d consumers, follower reads %v, %s, against %s\n",
		cfg.Topic, cfg.Consumers, cfg.FollowerReads, benchBound(cfg.Count, cfg.Duration), t.String())
	res, nodes, runErr := profiled(c, t, func() (*bench.ConsumeResult, error) {
		res, err := bench.RunConsume(c.Context, cfg)
		return res, errors.Join(err, purgeTopic(c, t, cfg.Topic))
	})
	if res == nil {
		return clean(runErr)
	}
	return reportBench(c, struct {
		*bench.ConsumeResult
		Nodes []nodeRSS `json:"nodes,omitempty"`
	}{res, nodes}, func(w io.Writer) { printConsume(w, res); printNodes(w, nodes) },
		runErr, res.Errors, res.FirstError, "poll(s)")
}

func runBenchE2E(c *cli.Context) error {
	if c.Duration("duration") <= 0 {
		return usageError(c, "--duration must be above 0: the run produces and consumes for that long")
	}
	t, err := benchTargetOf(c)
	if err != nil {
		return err
	}
	pcfg := bench.ProduceConfig{
		Servers: t.servers, NameServers: t.nameServers, TLS: t.tls, Credentials: t.creds, Topic: c.String("topic"), Queues: int32(c.Int("queues")), Size: c.Int("size"),
		Producers: c.Int("producers"), Window: c.Int("window"), Batch: c.Int("batch"),
		Count: c.Int64("count"), Duration: c.Duration("duration"), Timeout: c.Duration("timeout"),
	}
	ccfg := bench.ConsumeConfig{
		Servers: t.servers, NameServers: t.nameServers, TLS: t.tls, Credentials: t.creds, Topic: pcfg.Topic, Consumers: c.Int("consumers"), FollowerReads: c.Bool("follower-reads"),
		Duration: pcfg.Duration + 2*time.Second, Timeout: pcfg.Timeout, Live: true,
		Progress: benchProgress(c.App.ErrWriter, "read"),
	}
	fmt.Fprintf(c.App.ErrWriter, "bench e2e: topic %s, %d B messages, %d producers x %d in flight, %d consumers, follower reads %v, for %s, against %s\n",
		pcfg.Topic, pcfg.Size, pcfg.Producers, pcfg.Window, ccfg.Consumers, ccfg.FollowerReads, pcfg.Duration, t)
	type both struct {
		Produce *bench.ProduceResult `json:"produce"`
		Consume *bench.ConsumeResult `json:"consume"`
	}
	res, nodes, runErr := profiled(c, t, func() (*both, error) {
		// The topic must exist before the consumers describe it.
		if _, err := bench.RunProduce(c.Context, bench.ProduceConfig{Servers: pcfg.Servers, NameServers: pcfg.NameServers, TLS: pcfg.TLS, Credentials: pcfg.Credentials,
			Topic: pcfg.Topic, Queues: pcfg.Queues, Size: 1, Producers: 1, Window: 1, Count: 1, Timeout: pcfg.Timeout}); err != nil {
			return nil, err
		}
		var out both
		var cerr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			out.Consume, cerr = bench.RunConsume(c.Context, ccfg)
		}()
		time.Sleep(time.Second) // the consumers join at the topic's end first
		var perr error
		out.Produce, perr = bench.RunProduce(c.Context, pcfg)
		<-done
		return &out, errors.Join(perr, cerr, purgeTopic(c, t, pcfg.Topic))
	})
	if res == nil {
		return clean(runErr)
	}
	var errs uint64
	first := ""
	if res.Produce != nil {
		errs, first = res.Produce.Errors, res.Produce.FirstError
	}
	return reportBench(c, struct {
		*both
		Nodes []nodeRSS `json:"nodes,omitempty"`
	}{res, nodes}, func(w io.Writer) {
		if res.Produce != nil {
			printProduce(w, res.Produce)
		}
		if res.Consume != nil {
			printConsume(w, res.Consume)
			if l := res.Consume.EndToEnd; l != nil {
				fmt.Fprintf(w, "  end to end  p50 %s  p99 %s  max %s  (%s messages)\n", msString(l.P50), msString(l.P99), msString(l.Max), groupDigits(l.Count))
			}
		}
		printNodes(w, nodes)
	}, runErr, errs, first, "Send(s)")
}

func printProduce(w io.Writer, r *bench.ProduceResult) {
	mode := fmt.Sprintf("%d in flight", r.Window)
	if r.Window == 1 {
		mode = "synchronous"
	}
	fmt.Fprintf(w, "produce: %s messages of %d B to %s (%d queues) in %.2f s: %d producer(s), %s, %d message(s) per Send\n",
		groupDigits(r.Messages), r.Size, r.Topic, r.Queues, r.Seconds, r.Producers, mode, r.Batch)
	fmt.Fprintf(w, "  throughput  %s msg/s   %.1f MB/s   errors %d   elections during the run %s\n", groupDigits(uint64(r.MsgsPerSec)),
		r.MBPerSec, r.Errors, electionsText(r.Elections))
	l := r.Latency
	fmt.Fprintf(w, "  latency     send→ack per Send: p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (mean %s, %s Sends)\n",
		msString(l.P50), msString(l.P90), msString(l.P99), msString(l.P999), msString(l.Max), msString(l.Mean), groupDigits(l.Count))
	if len(r.Groups) > 0 {
		fmt.Fprint(w, "  groups      acknowledged by")
		for _, g := range sortedKeys(r.Groups) {
			fmt.Fprintf(w, " %s %s", g, groupDigits(r.Groups[g]))
		}
		fmt.Fprintln(w)
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first error %s\n", r.FirstError)
	}
}

func printConsume(w io.Writer, r *bench.ConsumeResult) {
	state := "read to the end"
	if r.EndToEnd != nil {
		state = "read live from the end"
	} else if !r.Complete {
		state = fmt.Sprintf("stopped before the end (%s of %s available)", groupDigits(r.Messages), groupDigits(r.Available))
	}
	fmt.Fprintf(w, "consume: %s messages (%.1f MB) of %s (%d queues) in %.2f s by %d consumer(s), follower reads %v: %s\n",
		groupDigits(r.Messages), float64(r.Bytes)/1e6, r.Topic, r.Queues, r.Seconds, r.Consumers, r.FollowerReads, state)
	fmt.Fprintf(w, "  throughput  %s msg/s   %.1f MB/s   errors %d   elections during the run %s\n", groupDigits(uint64(r.MsgsPerSec)),
		r.MBPerSec, r.Errors, electionsText(r.Elections))
	fmt.Fprintf(w, "  served by   leader %s (%.1f%%), followers %s (%.1f%%):", groupDigits(r.FromLeader), 100*(1-r.FollowerShare),
		groupDigits(r.FromFollowers), 100*r.FollowerShare)
	for _, n := range r.Nodes() {
		fmt.Fprintf(w, " %s %s", n, groupDigits(r.ServedBy[n]))
	}
	fmt.Fprintln(w)
	l := r.PollLatency
	fmt.Fprintf(w, "  poll        p50 %s  p99 %s  max %s  (%s polls)\n", msString(l.P50), msString(l.P99), msString(l.Max), groupDigits(l.Count))
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first error %s\n", r.FirstError)
	}
}

func printNodes(w io.Writer, nodes []nodeRSS) {
	for _, n := range nodes {
		role := "follower"
		if n.Leader {
			role = "leader"
		}
		fmt.Fprintf(w, "  server %s (%s, pid %d): peak RSS %.1f MiB, now %.1f MiB\n", n.ID, role, n.PID,
			float64(n.PeakBytes)/(1<<20), float64(n.RSSBytes)/(1<<20))
	}
}

func electionsText(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return strconv.FormatInt(n, 10)
}

func msString(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

// groupDigits formats 1234567 as 1,234,567.
func groupDigits(n uint64) string { return humanize.Comma(int64(min(n, math.MaxInt64))) }

// startCPUProfile profiles this process into path ("" does nothing); the
// returned function stops the profile.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
