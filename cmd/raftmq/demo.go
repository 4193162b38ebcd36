package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "watch a three-node group lose its leader (SIGKILL, SIGSTOP or a partition) under load and lose nothing",
		Description: "Starts three `raftmq server` processes of this binary on free 127.0.0.1 ports in a temporary\n" +
			"directory, produces numbered messages with several idempotent producers, kills the leader\n" +
			"with SIGKILL, measures how long writes were unavailable, restarts the killed node and waits\n" +
			"until it has rejoined as a caught-up follower. A read act follows (--reads): more producers\n" +
			"load the leader, a new consumer reads the topic from its start, and once a second the demo\n" +
			"prints the share of messages each node served and the routing reason; halfway it SIGKILLs\n" +
			"the follower serving most and shows its readers coming back, then restarts it. Finally it\n" +
			"reads everything back and checks that\n" +
			"every acknowledged message is there exactly once, in order per queue and per key.\n\n" +
			"--fault pause freezes the leader with SIGSTOP for --fault-for instead, then SIGCONT; --fault\n" +
			"partition runs every link of the nodes (Raft in both directions, and the client API) through\n" +
			"proxies the demo owns and blackholes the leader's for --fault-for: connections stay open and\n" +
			"nothing passes, then it heals. Either way the old leader must rejoin as a caught-up follower.\n" +
			"The window of a fault is the time from the fault to the first acknowledged write after it.\n" +
			"--cli sends every message with a fresh `raftmq produce` process instead (a user's shell loop).\n\n" +
			"Write unavailability of a kill is the longest gap between two consecutive acknowledgements\n" +
			"(of any producer) from the kill until writes flow again: it runs from the last write\n" +
			"acknowledged before the leader died to the first acknowledged after the new leader took over.\n\n" +
			"With --docker it runs the same scenario against the docker compose group (`make up` first):\n" +
			"services n1, n2, n3 of docker-compose.yml, killed with `compose kill` and restarted with\n" +
			"`compose start`.\n\n" +
			"Exits non-zero if an acknowledged message is missing or duplicated, or order is broken.",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "kills", Value: 1, Usage: "how many times to fault the leader (and bring it back)"},
			&cli.StringFlag{Name: "fault", Value: "kill", Usage: "what happens to the leader: kill (SIGKILL, restart), pause (SIGSTOP, SIGCONT) or partition (blackhole all its links, heal)"},
			&cli.DurationFlag{Name: "fault-for", Value: 3 * time.Second, Usage: "with --fault pause or partition: how long the leader stays paused or cut off"},
			&cli.BoolFlag{Name: "cli", Usage: "send every message with a fresh `raftmq produce` process (of this binary) instead of SDK producers"},
			&cli.DurationFlag{Name: "reads", Value: 8 * time.Second, Usage: "length of the read act after the faults (load the leader, read from the start, stop a follower halfway); 0 skips it"},
			&cli.IntFlag{Name: "transfers", Usage: "after the kills, move leadership this many times with a planned leader transfer and measure the write pause"},
			&cli.IntFlag{Name: "producers", Value: 4, Usage: "concurrent idempotent producers (one request in flight each)"},
			&cli.IntFlag{Name: "rate", Value: 400, Usage: "messages per second over all producers (0: as fast as they go)"},
			&cli.IntFlag{Name: "queues", Value: 4, Usage: "queues of the demo topic"},
			&cli.DurationFlag{Name: "steady", Value: time.Second, Usage: "how long to produce undisturbed before each kill"},
			&cli.DurationFlag{Name: "heartbeat-timeout", Usage: "passed to the servers", DefaultText: "the server's, 250ms"},
			&cli.DurationFlag{Name: "election-timeout", Usage: "passed to the servers", DefaultText: "the server's, 250ms"},
			&cli.StringFlag{Name: "log-store", Usage: "passed to the servers: wal or bolt", DefaultText: "the server's"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the temporary directory with the nodes' data and logs"},
			&cli.StringFlag{Name: "dir", Usage: "put the nodes' data and logs here instead of a temporary directory (kept)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object with the results at the end (the live log goes to stderr)"},
			&cli.BoolFlag{Name: "docker", Usage: "run against the docker compose group (n1, n2, n3) instead of local processes"},
			&cli.IntFlag{Name: "groups", Value: 1, Usage: "run this many three-node groups and a name server; producers go through the several-group client and the leader of one group after the other is killed (--kills): the other groups' longest gap between acknowledgements meanwhile is shown"},
			&cli.DurationFlag{Name: "slow-send", Value: cluster.DefaultConfig().SlowSend, Usage: "with --groups: a send to a group unanswered this long makes the producers avoid that group (the several-group client's SlowSend)"},
			&cli.StringFlag{Name: "compose-file", Usage: "with --docker: the compose file, or files comma-separated layered in order (default: docker-compose.yml, with --groups docker-compose.cluster.yml, here or in a parent directory; `make demo-secure` passes docker-compose.yml,docker-compose.secure.yml)"},
			&cli.StringFlag{Name: "compose-project", Value: "raftmq-cluster", Usage: "with --docker --groups: the compose project of the cluster (make up-cluster's)"},
			&cli.StringFlag{Name: "namesrv", Value: "127.0.0.1:9876;127.0.0.1:9886", Usage: "with --docker --groups: the cluster's name servers as published on this host"},
		}, clientTLSFlags()...),
		Action: runDemo,
	}
}

// demoAck is one acknowledged message.
type demoAck struct {
	body     string
	key      string
	queue    int32
	offset   uint64
	producer int
	seq      int
	acked    time.Duration // since the demo started
}

type demoResult struct {
	Mode              string         `json:"mode"`
	Fault             string         `json:"fault"`         // kill, pause or partition
	FaultForMs        float64        `json:"fault_for_ms"`  // how long a pause or partition lasted
	Producers1Shot    bool           `json:"cli_producers"` // every message sent by a fresh CLI process
	WindowMs          []float64      `json:"window_ms"`     // fault -> first acknowledged write after it
	WindowMedian      float64        `json:"window_median_ms"`
	WindowMax         float64        `json:"window_max_ms"`
	OK                bool           `json:"ok"`
	Error             string         `json:"error,omitempty"`
	Kills             int            `json:"kills"`
	Transfers         int            `json:"transfers"`
	Producers         int            `json:"producers"`
	Rate              int            `json:"rate"`
	HeartbeatTimeout  string         `json:"heartbeat_timeout,omitempty"`
	ElectionTimeout   string         `json:"election_timeout,omitempty"`
	Topic             string         `json:"topic"`
	Acknowledged      int            `json:"acknowledged"`
	Failed            int            `json:"failed"` // sends that were never acknowledged
	Consumed          int            `json:"consumed"`
	Lost              int            `json:"lost"`
	Duplicated        int            `json:"duplicated"`
	Misplaced         int            `json:"misplaced"`              // acked (queue, offset) holds another message
	OffsetGaps        int            `json:"offset_gaps"`            // missing offsets inside a queue
	OrderViolations   int            `json:"order_errors"`           // a key's messages out of send order
	OtherErrors       int            `json:"other_errors,omitempty"` // anything else internal/history reports (unsent, corrupt, refused yet stored)
	UnavailableMs     []float64      `json:"unavailable_ms"`
	RecoveryMs        []float64      `json:"recovery_ms"`       // fault -> first acknowledgement after the gap
	LeaderVisibleMs   []float64      `json:"leader_visible_ms"` // kill -> a status poll first showed the new leader
	RejoinMs          []float64      `json:"rejoin_ms"`         // restart -> healthy, caught-up follower
	UnavailableMedian float64        `json:"unavailable_median_ms"`
	UnavailableMax    float64        `json:"unavailable_max_ms"`
	TransferPauseMs   []float64      `json:"transfer_pause_ms"` // longest gap between acknowledgements around each transfer
	TransferTookMs    []float64      `json:"transfer_took_ms"`  // as the old leader reports it
	Leaders           []string       `json:"leaders"`
	Killed            []string       `json:"killed"`
	KilledAtUnixMs    []int64        `json:"killed_at_unix_ms"` // to line up with the servers' logs
	ServedBy          map[string]int `json:"served_by"`
	Reads             *readsResult   `json:"reads,omitempty"`
	AppliedIndex      uint64         `json:"applied_index"`
	ElapsedS          float64        `json:"elapsed_s"`
	Dir               string         `json:"dir,omitempty"`
}

type demo struct {
	start time.Time
	out   io.Writer
	grp   localgroup.Launcher
	cl    *client.Client
	res   demoResult
	// tls and cred: the client TLS and credentials of a group with TLS
	// or --auth (--tls-ca, --access-key ...); clientArgs the same as flags,
	// for the --cli producers.
	tls        *tls.Config
	cred       *client.Credentials
	clientArgs []string
	probe      localgroup.Prober

	topic     string
	kills     int
	readsFor  time.Duration
	producers int
	rate      int
	fault     string
	faultFor  time.Duration
	cliExe    string // with --cli: the binary whose `produce` sends each message

	awayMu sync.Mutex
	away   string // client address of the node under a fault, left out of status polls

	rec *history.Recorder // every send and what its producer was told

	mu       sync.Mutex
	acks     []demoAck
	ackTimes []time.Duration // every acknowledgement, in arrival order
	failed   []string
	lastErr  error
	ackCount atomic.Int64
}

func (d *demo) since() time.Duration { return time.Since(d.start) }

func (d *demo) logf(format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.2fs] %s\n", d.since().Seconds(), fmt.Sprintf(format, args...))
}

func runDemo(c *cli.Context) (err error) {
	if n := c.Int("groups"); n > 1 {
		return runGroupsDemo(c, n)
	}
	ctx := c.Context
	d := &demo{start: time.Now(), rec: history.NewRecorder(), out: c.App.Writer, producers: max(c.Int("producers"), 1), rate: max(c.Int("rate"), 0)}
	asJSON := c.Bool("json")
	if asJSON {
		d.out = c.App.ErrWriter
	}
	d.kills = max(c.Int("kills"), 0)
	d.readsFor = max(c.Duration("reads"), 0)
	d.fault, d.faultFor = c.String("fault"), c.Duration("fault-for")
	switch d.fault {
	case "kill", "pause", "partition":
	default:
		return fmt.Errorf("--fault %q: want kill, pause or partition", d.fault)
	}
	if d.fault != "kill" && d.faultFor <= 0 {
		return fmt.Errorf("--fault-for %s: want more than 0", d.faultFor)
	}
	if d.tls, err = clientTLS(c); err != nil {
		return err
	}
	if d.cred, err = clientCredentials(c); err != nil {
		return err
	}
	d.probe = localgroup.Prober{TLS: d.tls}
	for _, f := range []string{"tls-ca", "tls-cert", "tls-key", "tls-server-name", "access-key", "secret-key-file"} {
		if v := c.String(f); v != "" {
			d.clientArgs = append(d.clientArgs, "--"+f, v)
		}
	}
	if c.Bool("cli") {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("--cli: find this executable: %w", err)
		}
		d.cliExe = exe
	}
	d.res = demoResult{Mode: "local", Fault: d.fault, Producers1Shot: d.cliExe != "", WindowMs: []float64{},
		Producers: d.producers, Rate: d.rate,
		UnavailableMs: []float64{}, RecoveryMs: []float64{}, LeaderVisibleMs: []float64{}, RejoinMs: []float64{},
		TransferPauseMs: []float64{}, TransferTookMs: []float64{}, Transfers: max(c.Int("transfers"), 0),
		Leaders: []string{}, Killed: []string{}, KilledAtUnixMs: []int64{}}
	if d.fault != "kill" {
		d.res.FaultForMs = ms(d.faultFor)
	}
	if c.IsSet("heartbeat-timeout") {
		d.res.HeartbeatTimeout = c.Duration("heartbeat-timeout").String()
	}
	if c.IsSet("election-timeout") {
		d.res.ElectionTimeout = c.Duration("election-timeout").String()
	}
	defer func() {
		if err != nil && ctx.Err() != nil {
			err = errors.New("interrupted")
		}
		d.res.Topic = d.topic
		med, worst := medianMax(d.res.UnavailableMs)
		d.res.UnavailableMedian, d.res.UnavailableMax = round2(med), round2(worst)
		med, worst = medianMax(d.res.WindowMs)
		d.res.WindowMedian, d.res.WindowMax = round2(med), round2(worst)
		d.res.ElapsedS = round2(d.since().Seconds())
		d.res.OK = err == nil
		if err != nil {
			d.res.Error = err.Error()
		}
		if asJSON {
			if perr := printJSON(c.App.Writer, d.res); perr != nil && err == nil {
				err = perr
			}
		}
	}()

	if c.Bool("docker") {
		d.res.Mode = "docker"
		if d.fault != "kill" {
			return errors.New("--docker: only --fault kill")
		}
		if c.IsSet("heartbeat-timeout") || c.IsSet("election-timeout") || c.IsSet("log-store") {
			return errors.New("--docker: set RAFTMQ_HEARTBEAT_TIMEOUT / RAFTMQ_ELECTION_TIMEOUT / RAFTMQ_LOG_STORE for `make up` instead of flags")
		}
		d.logf("looking for the docker compose group (services n1, n2, n3)")
		g, err := attachCompose(ctx, c.String("compose-file"), d.tls)
		if err != nil {
			return err
		}
		d.grp = g
		d.topic = fmt.Sprintf("demo-%d", time.Now().Unix())
	} else {
		var sargs []string
		for _, f := range []string{"heartbeat-timeout", "election-timeout"} {
			if c.IsSet(f) {
				sargs = append(sargs, "--"+f, c.Duration(f).String())
			}
		}
		if c.IsSet("log-store") {
			sargs = append(sargs, "--log-store", c.String("log-store"))
		}
		g, err := localgroup.New(localgroup.Config{Nodes: 3, Dir: c.String("dir"), Keep: c.Bool("keep"), ServerArgs: sargs,
			Partitionable: d.fault == "partition"})
		if err != nil {
			return err
		}
		d.grp = g.AsLauncher()
		d.topic = "demo"
		if c.Bool("keep") || c.String("dir") != "" {
			d.res.Dir = g.Dir()
		}
		d.logf("starting 3 nodes (raftmq server) in %s", g.Dir())
		if err := g.StartAll(ctx); err != nil {
			g.Close()
			return fmt.Errorf("start the group: %w", err)
		}
	}
	defer func() {
		if g, ok := localgroup.GroupOf(d.grp); ok && err != nil && d.res.Dir == "" {
			// Keep the evidence of a failed run.
			g.SetKeep(true)
			d.res.Dir = g.Dir()
		}
		if cerr := d.grp.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if d.res.Dir != "" {
			d.logf("data and logs kept in %s", d.res.Dir)
		}
	}()
	d.logf("%s", d.grp.Describe())

	cfg := client.DefaultConfig()
	cfg.Servers = d.grp.Addrs()
	cfg.TLS, cfg.Credentials = d.tls, d.cred
	if d.cl, err = client.New(cfg); err != nil {
		return err
	}
	defer d.cl.Close()
	if err := d.run(ctx, c.Int("kills"), c.Int("transfers"), c.Int("queues"), c.Duration("steady")); err != nil {
		return err
	}
	if !asJSON {
		d.summary()
	}
	if d.res.broken() > 0 {
		msg := fmt.Sprintf("FAILED: %d lost, %d duplicated, %d misplaced, %d offset gaps, %d order errors",
			d.res.Lost, d.res.Duplicated, d.res.Misplaced, d.res.OffsetGaps, d.res.OrderViolations)
		if d.res.OtherErrors > 0 {
			msg += fmt.Sprintf(", %d other errors", d.res.OtherErrors)
		}
		return &exitError{1, errors.New(msg)}
	}
	return nil
}

func (d *demo) summary() {
	r := d.res
	w := d.out
	fmt.Fprintln(w)
	fmt.Fprintln(w, "summary")
	switch r.Fault {
	case "pause":
		fmt.Fprintf(w, "  faults                 %d (SIGSTOP of the leader for %.1fs, then SIGCONT)\n", r.Kills, r.FaultForMs/1000)
	case "partition":
		fmt.Fprintf(w, "  faults                 %d (all links of the leader blackholed for %.1fs, then healed)\n", r.Kills, r.FaultForMs/1000)
	default:
		fmt.Fprintf(w, "  kills                  %d (SIGKILL of the leader, then restart)\n", r.Kills)
	}
	if r.Producers1Shot {
		fmt.Fprintln(w, "  producers              one fresh `raftmq produce` process per message")
	}
	fmt.Fprintf(w, "  leaders                %s\n", strings.Join(r.Leaders, " -> "))
	if len(r.WindowMs) > 0 {
		var parts []string
		for _, v := range r.WindowMs {
			parts = append(parts, fmt.Sprintf("%.0f", v))
		}
		med, worst := medianMax(r.WindowMs)
		fmt.Fprintf(w, "  %-22s median %.0f ms, worst %.0f ms  (ms per fault: %s)\n", r.Fault+" window", med, worst, strings.Join(parts, " "))
		fmt.Fprintf(w, "                         = from the %s to the first acknowledged write after it\n", r.Fault)
	}
	if len(r.UnavailableMs) > 0 {
		var parts []string
		for _, v := range r.UnavailableMs {
			parts = append(parts, fmt.Sprintf("%.0f", v))
		}
		med, worst := medianMax(r.UnavailableMs)
		fmt.Fprintf(w, "  write unavailability   median %.0f ms, worst %.0f ms  (ms per fault: %s)\n", med, worst, strings.Join(parts, " "))
		fmt.Fprintln(w, "                         = longest gap between two acknowledgements around each fault")
	}
	if len(r.TransferPauseMs) > 0 {
		med, worst := medianMax(r.TransferPauseMs)
		fmt.Fprintf(w, "  leader transfers       %d: write pause median %.1f ms, worst %.1f ms\n", len(r.TransferPauseMs), med, worst)
	}
	fmt.Fprintf(w, "  acknowledged           %d messages from %d producers", r.Acknowledged, r.Producers)
	if r.Failed > 0 {
		fmt.Fprintf(w, " (%d sends gave up)", r.Failed)
	}
	fmt.Fprintln(w)
	if line := d.readsSummary(); line != "" {
		fmt.Fprintf(w, "  reads (leader loaded)  %s\n", line)
	}
	fmt.Fprintf(w, "  consumed               %d\n", r.Consumed)
	fmt.Fprintf(w, "  lost / duplicated      %d / %d\n", r.Lost, r.Duplicated)
	fmt.Fprintf(w, "  offsets / key order    %d gaps / %d errors\n", r.OffsetGaps, r.OrderViolations)
	if r.broken() == 0 {
		fmt.Fprintln(w, "  result                 OK: nothing acknowledged was lost or duplicated")
	} else {
		fmt.Fprintln(w, "  result                 FAILED")
	}
}

func medianMax(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	s := append([]float64{}, v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[len(s)-1]
}

func ms(d time.Duration) float64 { return round2(float64(d) / float64(time.Millisecond)) }

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
