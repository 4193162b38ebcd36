package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/composegroup"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
)

// groupsQueueStride separates the groups' queues in the history the
// exactly-once check reads: queue q of the i-th group is i*stride+q there.
const groupsQueueStride = 1000

// groupsResult is the JSON of `demo --groups N`.
type groupsResult struct {
	Mode         string        `json:"mode"`
	Groups       []groupResult `json:"groups"`
	NameServer   string        `json:"namesrv"`
	Topic        string        `json:"topic"`
	Producers    int           `json:"producers"`
	Rate         int           `json:"rate"`
	SlowSendMs   float64       `json:"slow_send_ms"`
	Kills        int           `json:"kills"`
	Acknowledged int           `json:"acknowledged"`
	Failed       int           `json:"failed"`
	Consumed     int           `json:"consumed"`
	Lost         int           `json:"lost"`
	Duplicated   int           `json:"duplicated"`
	Misplaced    int           `json:"misplaced"`
	OffsetGaps   int           `json:"offset_gaps"`
	OtherErrors  int           `json:"other_errors,omitempty"`
	// The worst of the groups' figures.
	WindowMaxMs       float64 `json:"window_max_ms"`       // a killed group: kill -> its first acknowledgement after
	SurvivorGapMaxMs  float64 `json:"survivor_gap_max_ms"` // the others: longest gap between their acks meanwhile
	OK                bool    `json:"ok"`
	Error             string  `json:"error,omitempty"`
	ElapsedS          float64 `json:"elapsed_s"`
	Dir               string  `json:"dir,omitempty"`
	HeartbeatTimeout  string  `json:"heartbeat_timeout,omitempty"`
	ElectionTimeout   string  `json:"election_timeout,omitempty"`
	SurvivorTargetMs  float64 `json:"survivor_target_ms"`
	SurvivorTargetMet bool    `json:"survivor_target_met"`
}

// groupResult is one group's part of groupsResult.
type groupResult struct {
	Name         string   `json:"name"`
	Nodes        []string `json:"nodes"` // client API addresses
	Queues       int      `json:"queues"`
	Acknowledged int      `json:"acknowledged"`
	Consumed     int      `json:"consumed"`
	Leaders      []string `json:"leaders"`
	Killed       []string `json:"killed"`
	// Kills of this group's leader: from the kill to this group's first
	// acknowledgement after it, and the longest gap between its
	// acknowledgements around it.
	WindowMs      []float64 `json:"window_ms"`
	UnavailableMs []float64 `json:"unavailable_ms"`
	RejoinMs      []float64 `json:"rejoin_ms"`
	// Kills in other groups: the longest gap between this group's
	// acknowledgements while the killed group failed over.
	SurvivorGapMs []float64 `json:"survivor_gap_ms"`
}

// groupsDemo runs several local groups and a name server.
type groupsDemo struct {
	start     time.Time
	out       io.Writer
	ns        *namesrv.Server
	names     []string
	grps      map[string]localgroup.Launcher
	cl        *cluster.Cluster
	res       groupsResult
	topic     string
	producers int
	rate      int
	rec       *history.Recorder
	cleanup   func(failed bool) // what setup needs undone once the groups are closed

	mu       sync.Mutex
	ackTimes map[string][]time.Duration // per group, in arrival order
	acked    int
	failed   []string
	lastErr  error
	ackCount atomic.Int64
}

func (d *groupsDemo) since() time.Duration { return time.Since(d.start) }

func (d *groupsDemo) logf(format string, args ...any) {
	fmt.Fprintf(d.out, "[%6.2fs] %s\n", d.since().Seconds(), fmt.Sprintf(format, args...))
}

func (d *groupsDemo) index(group string) int {
	for i, n := range d.names {
		if n == group {
			return i
		}
	}
	return -1
}

// runGroupsDemo is `demo --groups N` (N >= 2): N three-node groups
// registered with one name server, producers through the several-group
// client, the leader of one group after the other killed.
func runGroupsDemo(c *cli.Context, n int) (err error) {
	ctx := c.Context
	d := &groupsDemo{start: time.Now(), out: c.App.Writer, rec: history.NewRecorder(), producers: max(c.Int("producers"), 1),
		rate: max(c.Int("rate"), 0), grps: map[string]localgroup.Launcher{}, ackTimes: map[string][]time.Duration{}, topic: "demo"}
	asJSON := c.Bool("json")
	if asJSON {
		d.out = c.App.ErrWriter
	}
	slow := c.Duration("slow-send")
	d.res = groupsResult{Mode: "local", Producers: d.producers, Rate: d.rate, SlowSendMs: ms(slow), SurvivorTargetMs: 100}
	switch {
	case c.String("fault") != "kill":
		return errors.New("--groups: only --fault kill")
	case c.Bool("cli") || c.Int("transfers") > 0:
		return errors.New("--groups: no --cli or --transfers")
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
		d.res.ElapsedS = round2(d.since().Seconds())
		for _, g := range d.res.Groups {
			_, w := medianMax(g.WindowMs)
			d.res.WindowMaxMs = max(d.res.WindowMaxMs, w)
			_, s := medianMax(g.SurvivorGapMs)
			d.res.SurvivorGapMaxMs = max(d.res.SurvivorGapMaxMs, s)
		}
		d.res.SurvivorTargetMet = d.res.SurvivorGapMaxMs < d.res.SurvivorTargetMs
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

	var nameServers []string
	if c.Bool("docker") {
		d.res.Mode = "docker"
		if c.IsSet("heartbeat-timeout") || c.IsSet("election-timeout") || c.IsSet("log-store") {
			return errors.New("--docker: set RAFTMQ_HEARTBEAT_TIMEOUT / RAFTMQ_ELECTION_TIMEOUT / RAFTMQ_LOG_STORE for `make up-cluster` instead of flags")
		}
		if nameServers, err = d.attachCompose(ctx, c, n); err != nil {
			return err
		}
	} else {
		if nameServers, err = d.startLocal(ctx, c, n); err != nil {
			return err
		}
	}
	defer func() {
		for _, name := range d.names {
			if cerr := d.grps[name].Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		d.cleanup(err != nil)
	}()

	cfg := cluster.DefaultConfig()
	cfg.NameServers = nameServers
	cfg.RefreshInterval = 2 * time.Second
	cfg.SlowSend = slow
	if d.cl, err = cluster.New(cfg); err != nil {
		return err
	}
	defer d.cl.Close()
	if err := d.run(ctx, c.Int("kills"), max(c.Int("queues"), 1), c.Duration("steady")); err != nil {
		return err
	}
	if !asJSON {
		d.summary()
	}
	if b := d.res.Lost + d.res.Duplicated + d.res.Misplaced + d.res.OffsetGaps + d.res.OtherErrors; b > 0 {
		return &exitError{1, fmt.Errorf("FAILED: %d lost, %d duplicated, %d misplaced, %d offset gaps, %d other errors",
			d.res.Lost, d.res.Duplicated, d.res.Misplaced, d.res.OffsetGaps, d.res.OtherErrors)}
	}
	return nil
}

// startLocal starts a name server in this process and n groups of three
// `raftmq server` processes registered with it, and returns its address.
func (d *groupsDemo) startLocal(ctx context.Context, c *cli.Context, n int) ([]string, error) {
	dir, keep := c.String("dir"), c.Bool("keep") || c.String("dir") != ""
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "raftmq-demo-"); err != nil {
			return nil, err
		}
	}
	var sargs []string
	for _, f := range []string{"heartbeat-timeout", "election-timeout"} {
		if c.IsSet(f) {
			sargs = append(sargs, "--"+f, c.Duration(f).String())
		}
	}
	if c.IsSet("log-store") {
		sargs = append(sargs, "--log-store", c.String("log-store"))
	}

	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("start the name server: %w", err)
	}
	d.ns = ns
	d.res.NameServer = d.ns.Addr()
	d.logf("name server on %s (in this process)", d.ns.Addr())
	locals := map[string]*localgroup.Group{}
	d.cleanup = func(failed bool) {
		for _, g := range locals {
			if failed {
				g.SetKeep(true) // the evidence of a failed run
			} else {
				g.SetKeep(keep)
			}
			g.Close()
		}
		ns.Close()
		if failed || keep {
			d.res.Dir = dir
			d.logf("data and logs kept in %s", dir)
		} else {
			os.RemoveAll(dir)
		}
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("g%c", 'a'+i)
		g, gerr := localgroup.New(localgroup.Config{Nodes: 3, Dir: filepath.Join(dir, name), Keep: true, Remoting: true,
			ServerArgs: append([]string{"--broker-name", name, "--cluster", "demo", "--namesrv", d.ns.Addr(), "--register-period", "1s"}, sargs...)})
		if gerr != nil {
			d.cleanup(true)
			return nil, gerr
		}
		d.names = append(d.names, name)
		locals[name] = g
		d.grps[name] = g.AsLauncher()
	}
	for _, name := range d.names {
		g := locals[name]
		d.logf("starting group %s: 3 nodes (raftmq server) in %s", name, g.Dir())
		if err := g.StartAll(ctx); err != nil {
			d.cleanup(true)
			return nil, fmt.Errorf("start group %s: %w", name, err)
		}
		d.addGroup(name)
	}
	return []string{ns.Addr()}, nil

}

func (d *groupsDemo) addGroup(name string) {
	d.res.Groups = append(d.res.Groups, groupResult{Name: name, Nodes: d.grps[name].Addrs(), Leaders: []string{},
		Killed: []string{}, WindowMs: []float64{}, UnavailableMs: []float64{}, RejoinMs: []float64{}, SurvivorGapMs: []float64{}})
}

// attachCompose finds the groups of the running compose cluster through
// its name servers (--namesrv, the host's published addresses), each
// group's nodes being services of the compose file named by their ids.
func (d *groupsDemo) attachCompose(ctx context.Context, c *cli.Context, n int) ([]string, error) {
	file := c.String("compose-file")
	if file == "" {
		f, err := findUp("docker-compose.cluster.yml")
		if err != nil {
			return nil, fmt.Errorf("--docker: %w; run from the repository or pass --compose-file", err)
		}
		file = f
	}
	nss := []string{c.String("namesrv")}
	d.res.NameServer = c.String("namesrv")
	d.cleanup = func(bool) {}
	d.topic = fmt.Sprintf("demo-%d", time.Now().Unix())
	d.logf("looking for the compose cluster of %s through the name servers %s", file, c.String("namesrv"))
	cfg := cluster.DefaultConfig()
	cfg.NameServers = nss
	cl, err := cluster.New(cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	gs, err := cl.Refresh(sctx)
	if err != nil {
		return nil, fmt.Errorf("--docker: the name servers %s do not answer (run `make up-cluster` first): %w", c.String("namesrv"), err)
	}
	var names []string
	for name := range gs {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) < n {
		return nil, fmt.Errorf("--docker: the name servers know %d groups (%s), --groups wants %d", len(names), strings.Join(names, ", "), n)
	}
	for _, name := range names[:n] {
		gc, err := cl.Client(sctx, name)
		if err != nil {
			return nil, fmt.Errorf("--docker: group %s: %w", name, err)
		}
		st, err := gc.Status(sctx)
		if err != nil {
			return nil, fmt.Errorf("--docker: group %s has no leader: %w", name, clean(err))
		}
		var services []string
		for _, node := range st.Nodes {
			services = append(services, node.Id)
		}
		sort.Strings(services)
		g, err := composegroup.Attach(sctx, composegroup.Config{File: file, Project: c.String("compose-project"), Services: services})
		if err != nil {
			return nil, fmt.Errorf("--docker: group %s: %w", name, err)
		}
		d.names = append(d.names, name)
		d.grps[name] = g
		d.addGroup(name)
		d.logf("group %s: %s", name, g.Describe())
	}
	return nss, nil
}

func (d *groupsDemo) run(ctx context.Context, kills, queues int, steady time.Duration) error {
	for i, name := range d.names {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		st, err := d.waitLeader(wctx, name, "")
		cancel()
		if err != nil {
			return fmt.Errorf("group %s: no leader within 30s: %w", name, err)
		}
		d.res.Groups[i].Leaders = append(d.res.Groups[i].Leaders, st.LeaderId)
		d.logf("group %s: leader %s (%s), term %d", name, st.LeaderId, d.grps[name].AddrOf(st.LeaderId), st.Term)
	}
	// Every group registered and known to the client.
	if err := d.waitFor(ctx, 60*time.Second, "every group registered with the name server", func(c context.Context) (bool, string) {
		gs, err := d.cl.Refresh(c)
		if err != nil {
			return false, err.Error()
		}
		return len(gs) == len(d.names), fmt.Sprintf("%d of %d groups", len(gs), len(d.names))
	}); err != nil {
		return err
	}
	total := queues * len(d.names)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	plan, err := d.cl.CreateTopic(tctx, d.topic, total, nil, true)
	cancel()
	if err != nil {
		return fmt.Errorf("create topic %s: %w", d.topic, clean(err))
	}
	var parts []string
	for _, name := range d.names {
		parts = append(parts, fmt.Sprintf("%d on %s", plan[name], name))
		d.res.Groups[d.index(name)].Queues = plan[name]
	}
	d.logf("created topic %s with %d queues (%s)", d.topic, total, strings.Join(parts, ", "))
	if err := d.waitFor(ctx, 60*time.Second, "the route of "+d.topic+" over every group", func(c context.Context) (bool, string) {
		if _, err := d.cl.Refresh(c); err != nil {
			return false, err.Error()
		}
		r, err := d.cl.Route(c, d.topic)
		if err != nil {
			return false, err.Error()
		}
		return len(r.Queues) == total, fmt.Sprint(r.Queues)
	}); err != nil {
		return err
	}

	p := d.cl.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 1; i <= d.producers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.produce(pctx, ctx, p, i)
		}()
	}
	rateDesc := "as fast as they go"
	if d.rate > 0 {
		rateDesc = fmt.Sprintf("%d msg/s in all", d.rate)
	}
	d.logf("%d producers through the name server, one request in flight each, unkeyed messages spread over every queue of every group (%s)", d.producers, rateDesc)
	stop := func() {
		stopProducing()
		wg.Wait()
	}
	for k := 1; k <= kills; k++ {
		if err := sleepCtx(ctx, steady); err != nil {
			stop()
			return err
		}
		if err := d.killOnce(ctx, k, kills, d.names[(k-1)%len(d.names)]); err != nil {
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
	d.res.Acknowledged, d.res.Failed = d.acked, len(d.failed)
	lastErr := d.lastErr
	for i, name := range d.names {
		d.res.Groups[i].Acknowledged = len(d.ackTimes[name])
	}
	d.mu.Unlock()
	if d.res.Failed > 0 {
		d.logf("stopped producing: %d acknowledged, %d NOT acknowledged (last error: %v)", d.res.Acknowledged, d.res.Failed, lastErr)
	} else {
		d.logf("stopped producing: %d messages acknowledged", d.res.Acknowledged)
	}
	return d.verify(ctx)
}

// produce sends numbered unkeyed messages through the several-group
// producer until pctx ends; a send in progress then finishes unless ctx
// ends too.
func (d *groupsDemo) produce(pctx, ctx context.Context, p *cluster.Producer, i int) {
	pace := newPacer(d.rate, d.producers)
	for seq := 1; pctx.Err() == nil; seq++ {
		if !pace.wait(pctx) {
			return
		}
		body := fmt.Sprintf("p%d-%d", i, seq)
		msg := client.Message{Body: []byte(body)}
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		invoke := d.rec.Now()
		acks, err := p.Send(sctx, d.topic, cluster.Message{Message: msg})
		cancel()
		var hacks []*api.Ack
		group := ""
		if err == nil && len(acks) == 1 {
			group = acks[0].Group
			a := proto.Clone(acks[0].Ack).(*api.Ack)
			a.Queue += int32(d.index(group) * groupsQueueStride)
			hacks = []*api.Ack{a}
		}
		d.rec.AddOp(history.Sent(fmt.Sprintf("p%d", i), uint64(seq), []client.Message{msg}, invoke, d.rec.Now(), hacks, err))
		now := d.since()
		d.mu.Lock()
		if group == "" {
			if err == nil {
				err = fmt.Errorf("%d acks for one message", len(acks))
			}
			d.failed = append(d.failed, body)
			d.lastErr = err
		} else {
			d.acked++
			d.ackTimes[group] = append(d.ackTimes[group], now)
		}
		d.mu.Unlock()
		if group != "" {
			d.ackCount.Add(1)
		}
	}
}

// killOnce SIGKILLs the leader of group name, measures that group's
// window and the other groups' longest gaps meanwhile, restarts the node
// and waits until it is a caught-up follower.
func (d *groupsDemo) killOnce(ctx context.Context, k, kills int, name string) error {
	g, gi := d.grps[name], d.index(name)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	leader, err := d.waitLeader(wctx, name, "")
	cancel()
	if err != nil {
		return fmt.Errorf("kill %d: group %s: %w", k, name, err)
	}
	victim := leader.LeaderId
	victimAddr := g.AddrOf(victim)
	killAt := d.since()
	killWall := time.Now()
	how, err := g.Kill(ctx, victim)
	if took := time.Since(killWall); err == nil && took > 100*time.Millisecond {
		how += fmt.Sprintf("; the command took %.1fs, which the window below includes", took.Seconds())
	}
	if err != nil {
		return fmt.Errorf("kill %d: group %s: %w", k, name, err)
	}
	d.res.Kills++
	d.res.Groups[gi].Killed = append(d.res.Groups[gi].Killed, victim)
	d.logf("killed (SIGKILL) leader %s of group %s (%s)  [kill %d/%d]", victim, name, how, k, kills)

	wctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	st, err := d.waitLeader(wctx, name, victim)
	cancel()
	if err != nil {
		g.Start(ctx, victim)
		return fmt.Errorf("kill %d: group %s: %w", k, name, err)
	}
	d.res.Groups[gi].Leaders = append(d.res.Groups[gi].Leaders, st.LeaderId)
	d.logf("group %s: new leader %s (term %d), seen by polling status %.0f ms after the kill", name, st.LeaderId, st.Term, ms(d.since()-killAt))

	// The killed group's window ends with the longest gap between its
	// acknowledgements that ends after the kill (an acknowledgement of a
	// request the old leader committed can arrive just after it); wait
	// until the group took a write after its new leader showed up.
	seen := d.since()
	if err := d.waitFor(ctx, 60*time.Second, "an acknowledgement from group "+name+" after its new leader", func(context.Context) (bool, string) {
		return d.firstAfter(name, seen) > 0, fmt.Sprintf("last send error: %v", d.lastError())
	}); err != nil {
		return fmt.Errorf("kill %d: %w", k, err)
	}
	// A little past the window, so that a gap across its end is whole.
	base := d.ackCount.Load()
	if err := d.waitFor(ctx, 30*time.Second, "writes flowing again", func(context.Context) (bool, string) {
		return d.ackCount.Load() >= base+int64(2*d.producers), ""
	}); err != nil {
		return fmt.Errorf("kill %d: %w", k, err)
	}
	gap, first := d.longestGap(name, killAt, d.since())
	window := first - killAt
	d.res.Groups[gi].WindowMs = append(d.res.Groups[gi].WindowMs, ms(window))
	d.res.Groups[gi].UnavailableMs = append(d.res.Groups[gi].UnavailableMs, ms(gap))
	d.logf("group %s: writes resumed %.0f ms after the kill (the end of the longest gap between its acknowledgements, %.0f ms)", name, ms(window), ms(gap))
	for oi, other := range d.names {
		if other == name {
			continue
		}
		og, _ := d.longestGap(other, killAt, first)
		d.res.Groups[oi].SurvivorGapMs = append(d.res.Groups[oi].SurvivorGapMs, ms(og))
		d.logf("group %s meanwhile: longest gap between its acknowledgements %.0f ms", other, ms(og))
	}

	restartAt := time.Now()
	if _, err := g.Start(ctx, victim); err != nil {
		return fmt.Errorf("kill %d: restart %s of group %s: %w", k, victim, name, err)
	}
	addrs := g.Addrs()
	var applied uint64
	if err := d.waitFor(ctx, 60*time.Second, victim+" of group "+name+" rejoined as a caught-up follower", func(c context.Context) (bool, string) {
		a, why := localgroup.FollowerCaughtUp(c, addrs, victim, victimAddr, 500*time.Millisecond)
		applied = a
		return why == "", why
	}); err != nil {
		return fmt.Errorf("kill %d: %w\n%s", k, err, g.LogTail(victim))
	}
	rejoin := time.Since(restartAt)
	d.res.Groups[gi].RejoinMs = append(d.res.Groups[gi].RejoinMs, ms(rejoin))
	d.logf("group %s: %s restarted and rejoined as a caught-up follower, applied index %d (%.2fs)", name, victim, applied, rejoin.Seconds())
	return nil
}

// waitLeader polls group's nodes (but the one of node not) until one
// reports a leader other than not.
func (d *groupsDemo) waitLeader(ctx context.Context, group, not string) (*api.StatusResponse, error) {
	g := d.grps[group]
	skip := g.AddrOf(not)
	return localgroup.Prober{}.WaitLeader(ctx, func() []string {
		var addrs []string
		for _, a := range g.Addrs() {
			if not == "" || a != skip {
				addrs = append(addrs, a)
			}
		}
		return addrs
	}, not, nil)
}

// firstAfter is group's first acknowledgement after from, 0 if none yet.
func (d *groupsDemo) firstAfter(group string, from time.Duration) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.ackTimes[group] {
		if t > from {
			return t
		}
	}
	return 0
}

// longestGap is the longest gap between consecutive acknowledgements of
// group that overlaps [from, to], and when it ended.
func (d *groupsDemo) longestGap(group string, from, to time.Duration) (gap, end time.Duration) {
	d.mu.Lock()
	times := append([]time.Duration{}, d.ackTimes[group]...)
	d.mu.Unlock()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	for i := 1; i < len(times); i++ {
		if times[i] <= from || times[i-1] >= to {
			continue
		}
		if g := times[i] - times[i-1]; g > gap {
			gap, end = g, times[i]
		}
	}
	return gap, end
}

func (d *groupsDemo) lastError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastErr
}

// waitFor polls cond (each call bounded to 5s) until it holds or timeout
// passes.
func (d *groupsDemo) waitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, why := cond(cctx)
		cancel()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s: %s", what, timeout, why)
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// verify reads every queue of every group from its start with a new
// consumer group and checks what the producers were told against it:
// every acknowledged message exactly once at its group, queue and offset.
func (d *groupsDemo) verify(ctx context.Context) error {
	cg := fmt.Sprintf("demo-check-%d", time.Now().UnixNano())
	d.logf("consuming %s from every group's queues from the start (consumer group %s)", d.topic, cg)
	vctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	end, err := d.cl.EndOffsets(vctx, d.topic)
	if err != nil {
		return fmt.Errorf("end offsets: %w", clean(err))
	}
	ccfg := client.DefaultConsumerConfig(d.topic, cg)
	ccfg.Wait = 200 * time.Millisecond
	cons, err := d.cl.NewConsumer(vctx, cluster.ConsumerConfig{Consumer: ccfg})
	if err != nil {
		return err
	}
	var msgs []*api.Message
	perGroup := map[string]int{}
	for !cons.CaughtUp(end) {
		rs, err := cons.Poll(vctx)
		if err != nil {
			if vctx.Err() != nil {
				return fmt.Errorf("consume: read %d messages before giving up: %w", len(msgs), err)
			}
			sleepCtx(vctx, 50*time.Millisecond)
			continue
		}
		for _, r := range rs {
			m := proto.Clone(r.Message).(*api.Message)
			m.Queue += int32(d.index(r.Group) * groupsQueueStride)
			msgs = append(msgs, m)
			perGroup[r.Group]++
		}
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	cons.Close(cctx)
	ccancel()
	d.res.Consumed = len(msgs)
	var parts []string
	for i, name := range d.names {
		d.res.Groups[i].Consumed = perGroup[name]
		parts = append(parts, fmt.Sprintf("%d from %s", perGroup[name], name))
	}
	d.logf("consumed %d messages (%s)", len(msgs), strings.Join(parts, ", "))

	h := &history.History{Topic: d.topic, Final: history.LogOf(msgs)}
	d.rec.Fill(h)
	rep := history.Check(h)
	for kind, n := range rep.Counts {
		switch kind {
		case history.VLost, history.VDuplicate:
		case history.VMisplaced, history.VAckPosition:
			d.res.Misplaced += n
		case history.VGap:
			d.res.OffsetGaps += n
		default:
			d.res.OtherErrors += n
		}
	}
	d.res.Lost, d.res.Duplicated = rep.Lost, rep.Duplicated
	for q, e := range end {
		next := uint64(0)
		if es := h.Final[int32(d.index(q.Group)*groupsQueueStride)+q.Queue]; len(es) > 0 {
			next = es[len(es)-1].Offset + 1
		}
		if next < e {
			d.res.OffsetGaps++
			d.logf("OFFSET GAP: %s: read up to %d, end is %d", q, next, e)
		}
	}
	if errs := rep.Errors(); errs != "" {
		d.logf("%s", cutString(errs, 3000))
		return nil
	}
	d.logf("checked: all %d acknowledged messages present exactly once at their acknowledged group, queue and offset; offsets dense", rep.AckedMessages)
	return nil
}

func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (d *groupsDemo) summary() {
	r := d.res
	w := d.out
	fmt.Fprintln(w)
	fmt.Fprintln(w, "summary")
	fmt.Fprintf(w, "  groups                 %d of 3 nodes, one name server; %d kills of a leader (SIGKILL, then restart)\n", len(r.Groups), r.Kills)
	for _, g := range r.Groups {
		fmt.Fprintf(w, "  group %-16s %d queues, %d acknowledged, %d read back; leaders %s\n", g.Name, g.Queues, g.Acknowledged, g.Consumed, strings.Join(g.Leaders, " -> "))
		if len(g.WindowMs) > 0 {
			med, worst := medianMax(g.WindowMs)
			fmt.Fprintf(w, "    its leader killed    window median %.0f ms, worst %.0f ms (kill -> writes resumed in it)\n", med, worst)
		}
		if len(g.SurvivorGapMs) > 0 {
			med, worst := medianMax(g.SurvivorGapMs)
			fmt.Fprintf(w, "    another group's kill longest gap between its acknowledgements: median %.0f ms, worst %.0f ms (target under %.0f ms)\n", med, worst, r.SurvivorTargetMs)
		}
	}
	fmt.Fprintf(w, "  acknowledged           %d messages from %d producers", r.Acknowledged, r.Producers)
	if r.Failed > 0 {
		fmt.Fprintf(w, " (%d sends gave up)", r.Failed)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  consumed               %d\n", r.Consumed)
	fmt.Fprintf(w, "  lost / duplicated      %d / %d\n", r.Lost, r.Duplicated)
	if r.Lost+r.Duplicated+r.Misplaced+r.OffsetGaps+r.OtherErrors == 0 {
		fmt.Fprintln(w, "  result                 OK: nothing acknowledged was lost or duplicated, in any group")
	} else {
		fmt.Fprintln(w, "  result                 FAILED")
	}
}
