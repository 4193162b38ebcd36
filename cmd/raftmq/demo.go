package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
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
		Flags: []cli.Flag{
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
			&cli.StringFlag{Name: "compose-file", Usage: "with --docker: the compose file (default: docker-compose.yml here or in a parent directory)"},
		},
		Action: runDemo,
	}
}

// demoGroup is what the demo needs of a group: local processes or compose services.
type demoGroup interface {
	// Describe says in one line what runs where.
	Describe() string
	// Addrs are the client addresses of every node (for the SDK).
	Addrs() []string
	// Kill crashes node id and says how (e.g. "pid 1234").
	Kill(ctx context.Context, id string) (string, error)
	// Start starts node id again with its data.
	Start(ctx context.Context, id string) (string, error)
	// AddrOf is the client address of node id, "" if unknown.
	AddrOf(id string) string
	// LogTail is the end of node id's log, for error reports.
	LogTail(id string) string
	// Close stops what the demo started (local) or restarts what it killed (docker).
	Close() error
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
	Misplaced         int            `json:"misplaced"`    // acked (queue, offset) holds another message
	OffsetGaps        int            `json:"offset_gaps"`  // missing offsets inside a queue
	OrderViolations   int            `json:"order_errors"` // a key's messages out of send order
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
	grp   demoGroup
	cl    *client.Client
	res   demoResult

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
	ctx := c.Context
	d := &demo{start: time.Now(), out: c.App.Writer, producers: max(c.Int("producers"), 1), rate: max(c.Int("rate"), 0)}
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
		g, err := newComposeGroup(ctx, c.String("compose-file"))
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
		d.grp = &localDemoGroup{g}
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
		if l, ok := d.grp.(*localDemoGroup); ok && err != nil && d.res.Dir == "" {
			// Keep the evidence of a failed run.
			l.g.SetKeep(true)
			d.res.Dir = l.g.Dir()
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
	if bad := d.res.Lost + d.res.Duplicated + d.res.Misplaced + d.res.OffsetGaps + d.res.OrderViolations; bad > 0 {
		return &exitError{1, fmt.Errorf("FAILED: %d lost, %d duplicated, %d misplaced, %d offset gaps, %d order errors",
			d.res.Lost, d.res.Duplicated, d.res.Misplaced, d.res.OffsetGaps, d.res.OrderViolations)}
	}
	return nil
}

func (d *demo) run(ctx context.Context, kills, transfers, queues int, steady time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	leader, err := d.waitLeader(wctx, "")
	cancel()
	if err != nil {
		return fmt.Errorf("no leader within 30s: %w", err)
	}
	d.res.Leaders = append(d.res.Leaders, leader.LeaderId)
	d.logf("leader is %s (%s), term %d", leader.LeaderId, leader.LeaderAddress, leader.Term)

	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = d.cl.CreateTopic(tctx, d.topic, int32(max(queues, 1)), true)
	cancel()
	if err != nil {
		return fmt.Errorf("create topic %s: %w", d.topic, clean(err))
	}
	d.logf("created topic %s with %d queues", d.topic, max(queues, 1))

	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 1; i <= d.producers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.produce(pctx, ctx, i)
		}()
	}
	rateDesc := "as fast as they go"
	if d.rate > 0 {
		rateDesc = fmt.Sprintf("%d msg/s in all", d.rate)
	}
	d.logf("%d idempotent producers sending numbered messages (%s)", d.producers, rateDesc)
	stop := func() {
		stopProducing()
		wg.Wait()
	}

	for k := 1; k <= kills; k++ {
		if err := sleepCtx(ctx, steady); err != nil {
			stop()
			return err
		}
		if err := d.faultOnce(ctx, k); err != nil {
			stop()
			return err
		}
	}
	for k := 1; k <= transfers; k++ {
		if err := sleepCtx(ctx, steady/2); err != nil {
			stop()
			return err
		}
		if err := d.transferOnce(ctx, k); err != nil {
			stop()
			return err
		}
	}
	if d.readsFor > 0 {
		if err := d.readAct(ctx, d.readsFor); err != nil {
			stop()
			return err
		}
	}
	if err := sleepCtx(ctx, steady); err != nil {
		stop()
		return err
	}
	stop()
	d.mu.Lock()
	acked, failed, lastErr := len(d.acks), len(d.failed), d.lastErr
	d.mu.Unlock()
	d.res.Acknowledged, d.res.Failed = acked, failed
	if failed > 0 {
		d.logf("stopped producing: %d acknowledged, %d NOT acknowledged (last error: %v)", acked, failed, lastErr)
	} else {
		d.logf("stopped producing: %d messages acknowledged", acked)
	}
	if err := d.converge(ctx); err != nil {
		return err
	}
	return d.verify(ctx)
}

// produce sends numbered messages, one request in flight, until pctx ends;
// a send in progress then finishes (retrying across leader changes) unless
// ctx ends too.
func (d *demo) produce(pctx, ctx context.Context, i int) {
	p := d.cl.NewProducer()
	var interval time.Duration
	if d.rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(d.producers) / float64(d.rate))
	}
	next := time.Now()
	for seq := 1; pctx.Err() == nil; seq++ {
		if interval > 0 {
			next = next.Add(interval)
			if wait := time.Until(next); wait > 0 {
				select {
				case <-time.After(wait):
				case <-pctx.Done():
					return
				}
			} else if wait < -time.Second {
				next = time.Now() // do not burst after an outage
			}
		}
		body := fmt.Sprintf("p%d-%d", i, seq)
		key := fmt.Sprintf("p%d-k%d", i, seq%3)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var acks []*api.Ack
		var err error
		if d.cliExe != "" {
			acks, err = d.produceCLI(sctx, key, body)
		} else {
			acks, err = p.Send(sctx, d.topic, client.Message{Key: key, Body: []byte(body)})
		}
		cancel()
		now := d.since()
		d.mu.Lock()
		if err != nil || len(acks) != 1 {
			if err == nil {
				err = fmt.Errorf("%d acks for one message", len(acks))
			}
			d.failed = append(d.failed, body)
			d.lastErr = err
		} else {
			d.acks = append(d.acks, demoAck{body: body, key: key, queue: acks[0].Queue, offset: acks[0].Offset, producer: i, seq: seq, acked: now})
			d.ackTimes = append(d.ackTimes, now)
		}
		d.mu.Unlock()
		if err == nil {
			d.ackCount.Add(1)
		}
	}
}

// produceCLI sends one message with a fresh `raftmq produce` process, as a
// shell loop would, and returns its acknowledgement.
func (d *demo) produceCLI(ctx context.Context, key, body string) ([]*api.Ack, error) {
	cmd := exec.CommandContext(ctx, d.cliExe, "produce", "-s", strings.Join(d.grp.Addrs(), ","), "-t", d.topic,
		"-k", key, "--format", "json", "--timeout", "30s", body)
	cmd.Env = localgroup.Env()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("raftmq produce: %w: %s", err, strings.TrimSpace(errOut.String()))
	}
	var a ackJSON
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &a); err != nil {
		return nil, fmt.Errorf("raftmq produce: read its acknowledgement %q: %w", out.String(), err)
	}
	return []*api.Ack{{Queue: a.Queue, Offset: a.Offset, Id: a.ID}}, nil
}

// faultOnce kills, pauses or cuts off the leader, measures the write
// outage, brings the node back (restart, SIGCONT or heal; a pause or
// partition lasts faultFor) and waits until it is a caught-up follower again.
func (d *demo) faultOnce(ctx context.Context, k int) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	st, err := d.waitLeader(wctx, "")
	cancel()
	if err != nil {
		return fmt.Errorf("%s %d: no leader: %w", d.fault, k, err)
	}
	victim := st.LeaderId
	d.setAway(d.grp.AddrOf(victim))
	defer d.setAway("")
	killAt := d.since()
	killWall := time.Now()
	how, err := d.applyFault(ctx, victim)
	if err != nil {
		return fmt.Errorf("%s %d: %w", d.fault, k, err)
	}
	d.res.Killed = append(d.res.Killed, victim)
	d.res.Kills = len(d.res.Killed)
	d.res.KilledAtUnixMs = append(d.res.KilledAtUnixMs, killWall.UnixMilli())
	if took := time.Since(killWall); took > 100*time.Millisecond {
		how += fmt.Sprintf("; the command took %.1fs, so only the gap below is accurate", took.Seconds())
	}
	d.logf("%s leader %s (%s)  [%s %d/%d]", faultVerb[d.fault], victim, how, d.fault, k, d.kills)

	// A new leader, as the others report it.
	wctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	nst, err := d.waitLeader(wctx, victim)
	cancel()
	if err != nil {
		d.undoFault(ctx, victim)
		return fmt.Errorf("%s %d: no new leader after %s %s within 30s: %w", d.fault, k, faultVerb[d.fault], victim, err)
	}
	visible := d.since() - killAt
	d.res.Leaders = append(d.res.Leaders, nst.LeaderId)
	d.res.LeaderVisibleMs = append(d.res.LeaderVisibleMs, ms(visible))
	d.logf("new leader %s (term %d), seen by polling status %.0f ms after the %s", nst.LeaderId, nst.Term, ms(visible), d.fault)

	// Writes flow again once every producer has had an acknowledgement
	// after the new leader showed up.
	base := d.ackCount.Load()
	deadline := time.Now().Add(40 * time.Second)
	for d.ackCount.Load() < base+int64(2*d.producers) {
		if time.Now().After(deadline) {
			d.undoFault(ctx, victim)
			return fmt.Errorf("%s %d: writes did not resume within 40s after %s took over (last send error: %v)", d.fault, k, nst.LeaderId, d.lastError())
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			d.undoFault(ctx, victim)
			return err
		}
	}
	gap, end := d.longestGap(killAt)
	d.res.UnavailableMs = append(d.res.UnavailableMs, ms(gap))
	d.res.RecoveryMs = append(d.res.RecoveryMs, ms(end-killAt))
	d.res.WindowMs = append(d.res.WindowMs, ms(end-killAt))
	d.logf("writes resumed: first ack %.0f ms after the %s; unavailable for %.0f ms (longest gap between acknowledgements)",
		ms(end-killAt), d.fault, ms(gap))

	if d.fault != "kill" {
		if err := sleepCtx(ctx, time.Until(killWall.Add(d.faultFor))); err != nil {
			d.undoFault(ctx, victim)
			return err
		}
	}
	restartAt := time.Now()
	how, err = d.undoFault(ctx, victim)
	if err != nil {
		return fmt.Errorf("%s %d: bring %s back: %w", d.fault, k, victim, err)
	}
	d.logf("%s %s (%s)", undoVerb[d.fault], victim, how)
	applied, err := d.waitRejoin(ctx, victim, 60*time.Second)
	if err != nil {
		return fmt.Errorf("%s %d: %w\n%s", d.fault, k, err, d.grp.LogTail(victim))
	}
	rejoin := time.Since(restartAt)
	d.res.RejoinMs = append(d.res.RejoinMs, ms(rejoin))
	d.logf("%s rejoined as a healthy follower, applied index %d caught up with the leader (%.2fs after %s)", victim, applied, rejoin.Seconds(), undoVerb[d.fault])
	return nil
}

var (
	faultVerb = map[string]string{"kill": "killed (SIGKILL)", "pause": "paused (SIGSTOP)", "partition": "cut off (blackholed)"}
	undoVerb  = map[string]string{"kill": "restarted", "pause": "resumed (SIGCONT)", "partition": "healed"}
)

// faulter is what a group needs for --fault pause and partition.
type faulter interface {
	Pause(id string) (string, error)
	Resume(id string) (string, error)
	Cut(id string) (string, error)
	Heal(id string) (string, error)
}

func (d *demo) applyFault(ctx context.Context, id string) (string, error) {
	if d.fault == "kill" {
		return d.grp.Kill(ctx, id)
	}
	f, ok := d.grp.(faulter)
	if !ok {
		return "", fmt.Errorf("this group cannot %s a node", d.fault)
	}
	if d.fault == "pause" {
		return f.Pause(id)
	}
	return f.Cut(id)
}

// undoFault restarts, resumes or heals node id.
func (d *demo) undoFault(ctx context.Context, id string) (string, error) {
	if d.fault == "kill" {
		return d.grp.Start(ctx, id)
	}
	f, ok := d.grp.(faulter)
	if !ok {
		return "", fmt.Errorf("this group cannot %s a node", d.fault)
	}
	if d.fault == "pause" {
		return f.Resume(id)
	}
	return f.Heal(id)
}

func (d *demo) setAway(addr string) {
	d.awayMu.Lock()
	d.away = addr
	d.awayMu.Unlock()
}

// pollAddrs are the nodes status polls ask: all but one under a fault,
// whose answer would only come when its poll times out.
func (d *demo) pollAddrs() []string {
	d.awayMu.Lock()
	away := d.away
	d.awayMu.Unlock()
	var out []string
	for _, a := range d.grp.Addrs() {
		if a != away {
			out = append(out, a)
		}
	}
	return out
}

// transferOnce moves leadership to the most caught-up follower and
// measures the write pause.
func (d *demo) transferOnce(ctx context.Context, k int) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := d.waitLeader(wctx, "")
	if err != nil {
		return fmt.Errorf("transfer %d: no leader: %w", k, err)
	}
	t0 := d.since()
	r, err := d.cl.TransferLeader(wctx, "")
	if err != nil {
		return fmt.Errorf("transfer %d: %w", k, clean(err))
	}
	base := d.ackCount.Load()
	for d.ackCount.Load() < base+int64(2*d.producers) {
		if err := sleepCtx(wctx, 5*time.Millisecond); err != nil {
			return fmt.Errorf("transfer %d: writes did not resume: %w (last send error: %v)", k, err, d.lastError())
		}
	}
	gap, _ := d.longestGap(t0)
	d.res.Leaders = append(d.res.Leaders, r.LeaderId)
	d.res.TransferPauseMs = append(d.res.TransferPauseMs, ms(gap))
	d.res.TransferTookMs = append(d.res.TransferTookMs, round2(float64(r.TookUs)/1000))
	d.logf("leader transfer %s -> %s (took %.1f ms on the leader): writes paused %.1f ms (longest gap between acknowledgements)",
		st.LeaderId, r.LeaderId, float64(r.TookUs)/1000, ms(gap))
	return nil
}

func (d *demo) lastError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastErr
}

// longestGap returns the longest gap between consecutive acknowledgements
// that ends after from, and when it ended.
func (d *demo) longestGap(from time.Duration) (gap, end time.Duration) {
	d.mu.Lock()
	times := append([]time.Duration{}, d.ackTimes...)
	d.mu.Unlock()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	for i := 1; i < len(times); i++ {
		if times[i] < from {
			continue
		}
		if g := times[i] - times[i-1]; g > gap {
			gap, end = g, times[i]
		}
	}
	return gap, end
}

// waitLeader polls every node until one reports a leader other than not.
func (d *demo) waitLeader(ctx context.Context, not string) (*api.StatusResponse, error) {
	var last error
	for {
		st, err := localgroup.LeaderStatus(ctx, d.pollAddrs(), 500*time.Millisecond)
		if err == nil && st.LeaderId != not && st.LeaderAddress != "" {
			return st, nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = fmt.Errorf("%s still leads", not)
			}
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitRejoin polls until node id reports itself a follower of a known
// leader, the leader reports it healthy, and its applied index has reached
// the leader's applied index as it was just before.
func (d *demo) waitRejoin(ctx context.Context, id string, timeout time.Duration) (uint64, error) {
	addr := d.grp.AddrOf(id)
	cl, err := client.New(client.Config{Servers: []string{addr}, RequestTimeout: time.Second})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	var why string
	for {
		why = func() string {
			lst, err := localgroup.LeaderStatus(ctx, d.grp.Addrs(), 500*time.Millisecond)
			if err != nil {
				return err.Error()
			}
			var leaderApplied uint64
			healthy := false
			for _, n := range lst.Nodes {
				if n.Id == lst.LeaderId {
					leaderApplied = n.AppliedIndex
				}
				if n.Id == id {
					healthy = n.Healthy
				}
			}
			if lst.AnsweredBy != lst.LeaderId {
				// Only the leader's own applied index is current.
				lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				l, err := cl.StatusOf(lctx, lst.LeaderAddress)
				cancel()
				if err != nil {
					return "leader does not answer: " + err.Error()
				}
				if self := localgroup.SelfStatus(l); self != nil {
					leaderApplied = self.AppliedIndex
				}
			}
			sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			st, err := cl.StatusOf(sctx, addr)
			cancel()
			if err != nil {
				return "does not answer: " + err.Error()
			}
			self := localgroup.SelfStatus(st)
			switch {
			case self == nil:
				return "does not list itself"
			case self.Role != "follower":
				return "role " + self.Role
			case st.LeaderId == "":
				return "knows no leader"
			case !healthy:
				return "the leader does not report it healthy yet"
			case self.AppliedIndex < leaderApplied:
				return fmt.Sprintf("applied %d < leader's %d", self.AppliedIndex, leaderApplied)
			}
			d.res.AppliedIndex = self.AppliedIndex
			return ""
		}()
		if why == "" {
			return d.res.AppliedIndex, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s did not rejoin as a caught-up follower within %s: %s", id, timeout, why)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// converge waits until every node has applied the same index.
func (d *demo) converge(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	cl, err := client.New(client.Config{Servers: d.grp.Addrs(), RequestTimeout: time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	var last string
	for {
		applied := map[string]uint64{}
		var ids []string
		for _, a := range d.grp.Addrs() {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := cl.StatusOf(sctx, a)
			cancel()
			if err != nil {
				continue
			}
			if self := localgroup.SelfStatus(st); self != nil {
				applied[self.Id] = self.AppliedIndex
				ids = append(ids, self.Id)
			}
		}
		sort.Strings(ids)
		var parts []string
		same := len(ids) == len(d.grp.Addrs())
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("%s %d", id, applied[id]))
			if applied[id] != applied[ids[0]] {
				same = false
			}
		}
		last = strings.Join(parts, ", ")
		if same {
			d.res.AppliedIndex = applied[ids[0]]
			d.logf("every node has applied index %d", applied[ids[0]])
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("applied indexes did not converge within 30s: %s", last)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// verify consumes the topic from the earliest offset with a new consumer
// group and checks every acknowledged message.
func (d *demo) verify(ctx context.Context) error {
	group := fmt.Sprintf("demo-check-%d", time.Now().UnixNano())
	d.logf("consuming %s from the earliest offset (consumer group %s, follower reads on)", d.topic, group)
	vctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	ti, err := d.cl.DescribeTopic(vctx, d.topic)
	if err != nil {
		return fmt.Errorf("describe topic: %w", clean(err))
	}
	end := map[int32]uint64{}
	var total uint64
	for _, q := range ti.QueueInfo {
		end[q.Queue] = q.MaxOffset
		total += q.MaxOffset - q.MinOffset
	}
	cfg := client.DefaultConsumerConfig(d.topic, group)
	cfg.Wait = 200 * time.Millisecond
	cons, err := d.cl.NewConsumer(cfg)
	if err != nil {
		return err
	}
	var recs []client.Record
	for !cons.CaughtUp(end) {
		rs, err := cons.Poll(vctx)
		if err != nil {
			if vctx.Err() != nil {
				return fmt.Errorf("consume: read %d of %d messages before giving up: %w", len(recs), total, err)
			}
			if !client.Retryable(err) {
				return fmt.Errorf("consume: %w", clean(err))
			}
			sleepCtx(vctx, 50*time.Millisecond)
			continue
		}
		recs = append(recs, rs...)
	}
	d.res.ServedBy = cons.ServedBy()
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	cons.Close(cctx)
	ccancel()
	d.res.Consumed = len(recs)
	var served []string
	for n, c := range d.res.ServedBy {
		served = append(served, fmt.Sprintf("%s %d", n, c))
	}
	sort.Strings(served)
	d.logf("consumed %d messages (served by %s)", len(recs), strings.Join(served, ", "))

	sort.Slice(recs, func(i, j int) bool {
		if recs[i].Queue != recs[j].Queue {
			return recs[i].Queue < recs[j].Queue
		}
		return recs[i].Offset < recs[j].Offset
	})
	type loc struct {
		q   int32
		off uint64
	}
	seen := map[string]int{}
	at := map[loc]string{}
	for _, r := range recs {
		seen[string(r.Body)]++
		at[loc{r.Queue, r.Offset}] = string(r.Body)
	}
	// Every acknowledged message exactly once, where its ack said.
	d.mu.Lock()
	acks := append([]demoAck{}, d.acks...)
	d.mu.Unlock()
	var lostEx, dupEx, misEx []string
	for _, a := range acks {
		switch n := seen[a.body]; {
		case n == 0:
			d.res.Lost++
			lostEx = appendMax(lostEx, a.body)
		case n > 1:
			d.res.Duplicated++
			dupEx = appendMax(dupEx, fmt.Sprintf("%s x%d", a.body, n))
		}
		if b, ok := at[loc{a.queue, a.offset}]; ok && b != a.body {
			d.res.Misplaced++
			misEx = appendMax(misEx, fmt.Sprintf("%s acked at %d:%d which holds %s", a.body, a.queue, a.offset, b))
		}
	}
	// Also duplicates of messages whose send was never acknowledged.
	ackedSet := make(map[string]bool, len(acks))
	for _, a := range acks {
		ackedSet[a.body] = true
	}
	for b, n := range seen {
		if n > 1 && !ackedSet[b] {
			d.res.Duplicated++
			dupEx = appendMax(dupEx, fmt.Sprintf("%s x%d (not acknowledged)", b, n))
		}
	}
	// Dense offsets per queue, and per key the producer's send order.
	var gapEx, orderEx []string
	next := map[int32]uint64{}
	for q := range end {
		next[q] = 0
	}
	for _, q := range ti.QueueInfo {
		next[q.Queue] = q.MinOffset
	}
	lastSeq := map[string]int{}
	for _, r := range recs {
		if r.Offset != next[r.Queue] {
			d.res.OffsetGaps++
			gapEx = appendMax(gapEx, fmt.Sprintf("queue %d: offset %d follows %d", r.Queue, r.Offset, int64(next[r.Queue])-1))
		}
		next[r.Queue] = r.Offset + 1
		_, seqStr, ok := strings.Cut(string(r.Body), "-")
		seq, err := strconv.Atoi(seqStr)
		if !ok || err != nil {
			continue
		}
		if prev, ok := lastSeq[r.Key]; ok && seq <= prev {
			d.res.OrderViolations++
			orderEx = appendMax(orderEx, fmt.Sprintf("key %s: %s at %d:%d after seq %d", r.Key, r.Body, r.Queue, r.Offset, prev))
		}
		lastSeq[r.Key] = seq
	}
	for q, e := range end {
		if next[q] != e {
			d.res.OffsetGaps++
			gapEx = appendMax(gapEx, fmt.Sprintf("queue %d: read up to %d, end is %d", q, next[q], e))
		}
	}
	report := func(what string, n int, ex []string) {
		if n > 0 {
			d.logf("%s: %d, e.g. %s", what, n, strings.Join(ex, "; "))
		}
	}
	report("LOST (acknowledged, not found)", d.res.Lost, lostEx)
	report("DUPLICATED", d.res.Duplicated, dupEx)
	report("MISPLACED (not at the acknowledged offset)", d.res.Misplaced, misEx)
	report("OFFSET GAPS", d.res.OffsetGaps, gapEx)
	report("ORDER ERRORS", d.res.OrderViolations, orderEx)
	if d.res.Lost+d.res.Duplicated+d.res.Misplaced+d.res.OffsetGaps+d.res.OrderViolations == 0 {
		d.logf("checked: all %d acknowledged messages present exactly once at their acknowledged offsets; offsets dense; per-key order kept", len(acks))
	}
	return nil
}

// appendMax appends v to s while s holds fewer than 5 examples.
func appendMax(s []string, v string) []string {
	if len(s) < 5 {
		s = append(s, v)
	}
	return s
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
	if r.Lost+r.Duplicated+r.Misplaced+r.OffsetGaps+r.OrderViolations == 0 {
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

// localDemoGroup adapts localgroup.Group to the demo.
type localDemoGroup struct{ g *localgroup.Group }

func (l *localDemoGroup) Describe() string {
	var parts []string
	for _, n := range l.g.Nodes() {
		parts = append(parts, fmt.Sprintf("%s pid %d client %s raft %s", n.ID, n.PID(), n.Client, n.Raft))
	}
	return "nodes: " + strings.Join(parts, "; ") + " (logs: " + filepath.Join(l.g.Dir(), "n*.log") + ")"
}

func (l *localDemoGroup) Addrs() []string { return strings.Split(l.g.ClientAddrs(), ",") }

func (l *localDemoGroup) Kill(_ context.Context, id string) (string, error) {
	pid, err := l.g.Kill(id)
	return fmt.Sprintf("pid %d", pid), err
}

func (l *localDemoGroup) Start(ctx context.Context, id string) (string, error) {
	if err := l.g.Start(ctx, id); err != nil {
		return "", err
	}
	return fmt.Sprintf("pid %d", l.g.Node(id).PID()), nil
}

func (l *localDemoGroup) AddrOf(id string) string {
	if n := l.g.Node(id); n != nil {
		return n.Client
	}
	return ""
}

func (l *localDemoGroup) LogTail(id string) string {
	if n := l.g.Node(id); n != nil {
		return n.LogTail(15)
	}
	return ""
}

func (l *localDemoGroup) Close() error { return l.g.Close() }

func (l *localDemoGroup) Pause(id string) (string, error) {
	pid, err := l.g.Pause(id)
	return fmt.Sprintf("pid %d", pid), err
}

func (l *localDemoGroup) Resume(id string) (string, error) {
	pid, err := l.g.Resume(id)
	return fmt.Sprintf("pid %d", pid), err
}

func (l *localDemoGroup) Cut(id string) (string, error) {
	return "its Raft links both ways and its client API", l.g.Cut(id)
}

func (l *localDemoGroup) Heal(id string) (string, error) {
	return "every link passes again", l.g.Heal(id)
}

// composeGroup is the docker compose group of docker-compose.yml: services
// n1, n2, n3 whose node ids equal their service names.
type composeGroup struct {
	cmd      []string // docker compose -f FILE, or docker-compose -f FILE
	services []string
	addr     map[string]string // service -> published client address
	killed   map[string]bool
}

func newComposeGroup(ctx context.Context, file string) (*composeGroup, error) {
	if file == "" {
		f, err := findUp("docker-compose.yml")
		if err != nil {
			return nil, fmt.Errorf("--docker: %w; run from the repository or pass --compose-file", err)
		}
		file = f
	}
	var cmd []string
	vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	if exec.CommandContext(vctx, "docker", "compose", "version").Run() == nil {
		cmd = []string{"docker", "compose"}
	} else if exec.CommandContext(vctx, "docker-compose", "version").Run() == nil {
		cmd = []string{"docker-compose"}
	}
	cancel()
	if cmd == nil {
		return nil, errors.New("--docker: neither `docker compose` nor `docker-compose` works")
	}
	g := &composeGroup{cmd: append(cmd, "-f", file), services: []string{"n1", "n2", "n3"}, addr: map[string]string{}, killed: map[string]bool{}}
	for _, s := range g.services {
		out, err := g.run(ctx, "port", s, "9000")
		addr := strings.TrimSpace(out)
		if err != nil || addr == "" || strings.HasSuffix(addr, ":0") {
			return nil, fmt.Errorf("--docker: service %s of %s is not running (run `make up` first): %s %v", s, file, strings.TrimSpace(out), err)
		}
		addr = strings.Replace(addr, "0.0.0.0:", "127.0.0.1:", 1)
		g.addr[s] = addr
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := localgroup.LeaderStatus(sctx, g.Addrs(), 2*time.Second); err != nil {
		return nil, fmt.Errorf("--docker: the compose group at %s has no leader (run `make up` first): %w", strings.Join(g.Addrs(), ","), err)
	}
	return g, nil
}

func (g *composeGroup) run(ctx context.Context, args ...string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, g.cmd[0], append(append([]string{}, g.cmd[1:]...), args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w", strings.Join(g.cmd, " "), strings.Join(args, " "), err)
	}
	return out.String(), nil
}

func (g *composeGroup) Describe() string {
	var parts []string
	for _, s := range g.services {
		parts = append(parts, s+" "+g.addr[s])
	}
	return "docker compose services: " + strings.Join(parts, ", ")
}

func (g *composeGroup) Addrs() []string {
	var out []string
	for _, s := range g.services {
		out = append(out, g.addr[s])
	}
	return out
}

// service maps a node id to its service: by the node's client address as
// the group reports it, else by name.
func (g *composeGroup) service(id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := localgroup.LeaderStatus(ctx, g.Addrs(), 2*time.Second); err == nil {
		for _, n := range st.Nodes {
			if n.Id != id {
				continue
			}
			for s, a := range g.addr {
				if a == n.ClientAddress {
					return s, nil
				}
			}
		}
	}
	if _, ok := g.addr[id]; ok {
		return id, nil
	}
	return "", fmt.Errorf("no compose service for node %s", id)
}

func (g *composeGroup) Kill(ctx context.Context, id string) (string, error) {
	s, err := g.service(id)
	if err != nil {
		return "", err
	}
	if out, err := g.run(ctx, "kill", s); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
	}
	g.killed[s] = true
	return "compose kill " + s, nil
}

func (g *composeGroup) Start(ctx context.Context, id string) (string, error) {
	s, err := g.service(id)
	if err != nil {
		return "", err
	}
	if out, err := g.run(ctx, "start", s); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
	}
	delete(g.killed, s)
	return "compose start " + s, nil
}

func (g *composeGroup) AddrOf(id string) string {
	if s, err := g.service(id); err == nil {
		return g.addr[s]
	}
	return ""
}

func (g *composeGroup) LogTail(id string) string {
	s, err := g.service(id)
	if err != nil {
		return ""
	}
	out, _ := g.run(context.Background(), "logs", "--tail", "15", s)
	var sb strings.Builder
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		sb.WriteString("    " + sc.Text() + "\n")
	}
	return sb.String()
}

// Close starts any service the demo killed and did not restart.
func (g *composeGroup) Close() error {
	var errs []error
	for s := range g.killed {
		if _, err := g.run(context.Background(), "start", s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// findUp looks for name in the working directory and its parents.
func findUp(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found here or in a parent directory", name)
		}
		dir = parent
	}
}
