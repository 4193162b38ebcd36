package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
)

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
	pace := newPacer(d.rate, d.producers)
	for seq := 1; pctx.Err() == nil; seq++ {
		if !pace.wait(pctx) {
			return
		}
		body := fmt.Sprintf("p%d-%d", i, seq)
		key := fmt.Sprintf("p%d-k%d", i, seq%3)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		msg := client.Message{Key: key, Body: []byte(body)}
		invoke := d.rec.Now()
		var acks []*api.Ack
		var err error
		if d.cliExe != "" {
			acks, err = d.produceCLI(sctx, key, body)
		} else {
			acks, err = p.Send(sctx, d.topic, msg)
		}
		cancel()
		d.rec.AddOp(history.Sent(fmt.Sprintf("p%d", i), uint64(seq), []client.Message{msg}, invoke, d.rec.Now(), acks, err))
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
	args := append([]string{"produce", "-s", strings.Join(d.grp.Addrs(), ","), "-t", d.topic,
		"-k", key, "--format", "json", "--timeout", "30s"}, d.clientArgs...)
	cmd := exec.CommandContext(ctx, d.cliExe, append(args, body)...)
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

// applyFault kills, pauses or cuts off node id (--fault); undoFault
// restarts, resumes or heals it.
func (d *demo) applyFault(ctx context.Context, id string) (string, error) {
	return d.doFault(ctx, id, d.grp.Kill, d.grp.Pause, localgroup.Cutter.Cut)
}

func (d *demo) undoFault(ctx context.Context, id string) (string, error) {
	return d.doFault(ctx, id, d.grp.Start, d.grp.Resume, localgroup.Cutter.Heal)
}

func (d *demo) doFault(ctx context.Context, id string, kill, pause func(context.Context, string) (string, error),
	cut func(localgroup.Cutter, string) (string, error)) (string, error) {
	switch d.fault {
	case "kill":
		return kill(ctx, id)
	case "pause":
		return pause(ctx, id)
	}
	c, ok := d.grp.(localgroup.Cutter)
	if !ok {
		return "", fmt.Errorf("this group cannot %s a node", d.fault)
	}
	return cut(c, id)
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
	return d.probe.WaitLeader(ctx, d.pollAddrs, not, func(st *api.StatusResponse) bool { return st.LeaderAddress != "" })
}

// waitRejoin polls until node id reports itself a follower of a known
// leader, the leader reports it healthy, and its applied index has reached
// the leader's applied index as it was just before.
func (d *demo) waitRejoin(ctx context.Context, id string, timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	for {
		applied, why := d.probe.FollowerCaughtUp(ctx, d.grp.Addrs(), id, d.grp.AddrOf(id), 500*time.Millisecond)
		if why == "" {
			d.res.AppliedIndex = applied
			return applied, nil
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
	cl, err := client.New(client.Config{Servers: d.grp.Addrs(), RequestTimeout: time.Second, TLS: d.tls, Credentials: d.cred})
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

// pacer spaces one producer's sends so that producers of them send rate
// messages a second together (rate 0: no spacing).
type pacer struct {
	interval time.Duration
	next     time.Time
}

func newPacer(rate, producers int) *pacer {
	p := &pacer{next: time.Now()}
	if rate > 0 {
		p.interval = time.Duration(float64(time.Second) * float64(producers) / float64(rate))
	}
	return p
}

// wait waits for the next send's turn; false when ctx ended first.
func (p *pacer) wait(ctx context.Context) bool {
	if p.interval <= 0 {
		return true
	}
	p.next = p.next.Add(p.interval)
	if wait := time.Until(p.next); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false
		}
	} else if wait < -time.Second {
		p.next = time.Now() // do not burst after an outage
	}
	return true
}
