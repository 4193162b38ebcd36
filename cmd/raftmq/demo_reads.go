package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// readsResult is what the demo's read act measured (JSON "reads").
type readsResult struct {
	Leader          string         `json:"leader"`
	Consumed        int            `json:"consumed"`
	ServedBy        map[string]int `json:"served_by"`      // node id -> messages
	FollowerShare   float64        `json:"follower_share"` // 0..1
	Reasons         map[string]int `json:"reasons"`        // suggestion reason -> messages it came with
	StoppedFollower string         `json:"stopped_follower,omitempty"`
	// ReturnedMs: from stopping the follower until every queue it was
	// serving had been read from another node (-1: none was on it, or
	// some never came back).
	ReturnedMs float64 `json:"returned_ms"`
	// ServedByAfterStop counts what was read after the follower stopped.
	ServedByAfterStop map[string]int `json:"served_by_after_stop,omitempty"`
	Duplicated        int            `json:"duplicated"` // offsets the read act's consumer got twice
	Gaps              int            `json:"gaps"`       // offsets it skipped
	LoadProducers     int            `json:"load_producers"`
}

// Loaders: senders that load the leader during the read act, each its own
// producer (own keys, so the per-key order check holds), batches of
// demoLoadBatch messages, one Send in flight.
const (
	demoLoaders   = 16
	demoLoadBatch = 32
	// demoReadRate paces the read act's consumer below what the loaders
	// write, so it reads older messages for the whole act (a consumer
	// working through a backlog) instead of catching up with the tail.
	demoReadRate = 8000
)

// readAct shows read offload: it loads the leader with producers, reads
// the topic from its start with a new consumer (which starts at the
// leader), prints once a second which node served what and why, then stops
// the follower that served the most and shows the consumer coming back,
// restarts it, and checks that the consumer got every offset once. Every
// message it produces is recorded like the other producers', so the final
// check covers them.
func (d *demo) readAct(ctx context.Context, length time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	st, err := d.waitLeader(wctx, "")
	cancel()
	if err != nil {
		return fmt.Errorf("read act: no leader: %w", err)
	}
	r := &readsResult{Leader: st.LeaderId, ServedBy: map[string]int{}, Reasons: map[string]int{}, ReturnedMs: -1, LoadProducers: demoLoaders}
	d.res.Reads = r
	d.logf("read act: loading leader %s with %d more producers (batches of %d), then reading %s from its start with a new consumer (at most %d msg/s)",
		st.LeaderId, demoLoaders, demoLoadBatch, d.topic, demoReadRate)

	lctx, stopLoad := context.WithCancel(ctx)
	var lwg sync.WaitGroup
	for i := 1; i <= demoLoaders; i++ {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			d.load(lctx, ctx, 100+i)
		}()
	}
	defer func() {
		stopLoad()
		lwg.Wait()
	}()
	// A backlog for the consumer to read, and a second for the leader's
	// smoothed load signal to rise.
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return err
	}

	cfg := client.DefaultConsumerConfig(d.topic, fmt.Sprintf("demo-reads-%d", time.Now().UnixNano()))
	cfg.Wait = 200 * time.Millisecond
	cfg.CommitInterval = 0
	cons, err := d.cl.NewConsumer(cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cons.Close(cctx)
		cancel()
	}()

	var mu sync.Mutex
	perQueue := map[int32]map[uint64]int{}
	lastFrom := map[int32]string{} // queue -> node that served it last
	var stopAt time.Time
	stopped := ""
	stranded := map[int32]bool{} // queues the stopped follower was serving, until another node serves them
	afterStop := map[string]int{}
	rctx, stopRead := context.WithCancel(ctx)
	readDone := make(chan error, 1)
	go func() {
		next := time.Now()
		for rctx.Err() == nil {
			if err := sleepCtx(rctx, time.Until(next)); err != nil {
				break
			}
			recs, err := cons.Poll(rctx)
			next = time.Now().Add(time.Duration(len(recs)) * time.Second / demoReadRate)
			if err != nil && rctx.Err() == nil && !client.Retryable(err) {
				readDone <- fmt.Errorf("read act: consume: %w", clean(err))
				return
			}
			mu.Lock()
			for _, rec := range recs {
				if perQueue[rec.Queue] == nil {
					perQueue[rec.Queue] = map[uint64]int{}
				}
				perQueue[rec.Queue][rec.Offset]++
				lastFrom[rec.Queue] = rec.ServedBy
				if stopped != "" {
					afterStop[rec.ServedBy]++
					if stranded[rec.Queue] && rec.ServedBy != stopped {
						delete(stranded, rec.Queue)
						if len(stranded) == 0 {
							r.ReturnedMs = ms(time.Since(stopAt))
						}
					}
				}
			}
			mu.Unlock()
		}
		readDone <- nil
	}()

	prevServed, prevReasons := map[string]int{}, map[string]int{}
	prevTick := time.Now()
	tick := func(phase string) {
		elapsed := time.Since(prevTick).Seconds()
		prevTick = time.Now()
		served, reasons := cons.ServedBy(), cons.Reasons()
		delta, total := map[string]int{}, 0
		for n, c := range served {
			delta[n] = c - prevServed[n]
			total += delta[n]
		}
		topReason, topN := "-", 0
		for why, c := range reasons {
			if dc := c - prevReasons[why]; dc > topN {
				topReason, topN = why, dc
			}
		}
		prevServed, prevReasons = served, reasons
		ids := d.nodeIDs()
		var parts []string
		fromFollowers := 0
		for _, id := range ids {
			share := 0.0
			if total > 0 {
				share = 100 * float64(delta[id]) / float64(total)
			}
			tag := ""
			if id == r.Leader {
				tag = " (leader)"
			} else {
				fromFollowers += delta[id]
			}
			if id == stopped {
				tag = " (stopped)"
			}
			parts = append(parts, fmt.Sprintf("%s %3.0f%%%s", id, share, tag))
		}
		fshare := 0.0
		if total > 0 {
			fshare = 100 * float64(fromFollowers) / float64(total)
		}
		d.logf("reads %-9s %6.0f msg/s   %s   from followers %3.0f%%   reason %s   leader load %s",
			phase, float64(total)/max(elapsed, 0.001), strings.Join(parts, "  "), fshare, topReason, d.leaderLoad(ctx, r.Leader))
	}

	phase := max(length/2, time.Second)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	// watch ticks once a second for one phase; it ends early when the
	// reader fails or ctx ends.
	watch := func() error {
		for deadline := time.Now().Add(phase); time.Now().Before(deadline); {
			select {
			case <-ctx.Done():
				stopRead()
				return ctx.Err()
			case err := <-readDone:
				stopRead()
				return err
			case <-t.C:
				tick("")
			}
		}
		return nil
	}
	if err := watch(); err != nil {
		return err
	}

	// Stop the follower that served the most: its readers must come back.
	victim, most := "", -1
	for n, c := range cons.ServedBy() {
		if n != r.Leader && c > most {
			victim, most = n, c
		}
	}
	if victim == "" {
		for _, id := range d.nodeIDs() {
			if id != r.Leader {
				victim = id
				break
			}
		}
	}
	if victim != "" {
		how, err := d.grp.Kill(ctx, victim)
		if err != nil {
			stopRead()
			return fmt.Errorf("read act: stop follower %s: %w", victim, err)
		}
		// Timed from when the kill is done (`compose kill` takes seconds).
		mu.Lock()
		stopped, stopAt = victim, time.Now()
		for q, n := range lastFrom {
			if n == victim {
				stranded[q] = true
			}
		}
		mu.Unlock()
		r.StoppedFollower = victim
		d.logf("read act: stopped follower %s (%s, SIGKILL); its readers must come back", victim, how)
	}
	if err := watch(); err != nil {
		return err
	}
	stopRead()
	if err := <-readDone; err != nil {
		return err
	}
	stopLoad()
	lwg.Wait()

	mu.Lock()
	r.ServedBy = cons.ServedBy()
	r.Reasons = cons.Reasons()
	r.ServedByAfterStop = afterStop
	for q, offs := range perQueue {
		lo, hi := ^uint64(0), uint64(0)
		for o, n := range offs {
			r.Consumed += n
			r.Duplicated += n - 1
			lo, hi = min(lo, o), max(hi, o)
		}
		if span := int(hi - lo + 1); span > len(offs) {
			r.Gaps += span - len(offs)
			d.logf("read act: queue %d: %d offsets missing between %d and %d", q, span-len(offs), lo, hi)
		}
	}
	mu.Unlock()
	followers := 0
	for n, c := range r.ServedBy {
		if n != r.Leader {
			followers += c
		}
	}
	if r.Consumed > 0 {
		r.FollowerShare = round2(float64(followers) / float64(r.Consumed))
	}
	mu.Lock()
	returned := "no queue was on the stopped follower"
	switch {
	case r.ReturnedMs >= 0:
		returned = fmt.Sprintf("its queues were read from another node %.0f ms after the stop", r.ReturnedMs)
	case len(stranded) > 0:
		returned = fmt.Sprintf("%d of its queues did NOT come back", len(stranded))
	}
	lost := len(stranded)
	mu.Unlock()
	d.logf("read act: consumed %d messages, served by %s; %.0f%% from followers; %s; %d duplicated, %d skipped",
		r.Consumed, servedList(r.ServedBy), 100*r.FollowerShare, returned, r.Duplicated, r.Gaps)

	if victim != "" {
		restartAt := time.Now()
		how, err := d.grp.Start(ctx, victim)
		if err != nil {
			return fmt.Errorf("read act: restart %s: %w", victim, err)
		}
		d.logf("restarted %s (%s)", victim, how)
		if _, err := d.waitRejoin(ctx, victim, 60*time.Second); err != nil {
			return fmt.Errorf("read act: %w\n%s", err, d.grp.LogTail(victim))
		}
		d.logf("%s rejoined as a healthy follower (%.2fs after restart)", victim, time.Since(restartAt).Seconds())
	}
	if r.Duplicated+r.Gaps > 0 || lost > 0 {
		return fmt.Errorf("read act: the consumer got %d offsets twice, skipped %d, and %d queues did not come back from the stopped follower", r.Duplicated, r.Gaps, lost)
	}
	return nil
}

// load sends batches of numbered messages as producer i, one Send in
// flight, until pctx ends; a send in progress finishes unless ctx ends.
func (d *demo) load(pctx, ctx context.Context, i int) {
	p := d.cl.NewProducer()
	for seq := 1; pctx.Err() == nil; {
		msgs := make([]client.Message, demoLoadBatch)
		first := seq
		for j := range msgs {
			msgs[j] = client.Message{Key: fmt.Sprintf("p%d-k%d", i, (seq+j)%3), Body: []byte(fmt.Sprintf("p%d-%d", i, seq+j))}
		}
		seq += demoLoadBatch
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		invoke := d.rec.Now()
		acks, err := p.Send(sctx, d.topic, msgs...)
		cancel()
		d.rec.AddOp(history.Sent(fmt.Sprintf("p%d", i), uint64(first), msgs, invoke, d.rec.Now(), acks, err))
		now := d.since()
		d.mu.Lock()
		if err != nil || len(acks) != len(msgs) {
			if err == nil {
				err = fmt.Errorf("%d acks for %d messages", len(acks), len(msgs))
			}
			for _, m := range msgs {
				d.failed = append(d.failed, string(m.Body))
			}
			d.lastErr = err
		} else {
			for j, a := range acks {
				d.acks = append(d.acks, demoAck{body: string(msgs[j].Body), key: msgs[j].Key, queue: a.Queue, offset: a.Offset, producer: i, seq: first + j, acked: now})
			}
			d.ackTimes = append(d.ackTimes, now)
		}
		d.mu.Unlock()
		if err == nil {
			d.ackCount.Add(1)
		}
	}
}

// nodeIDs are the group's node ids, sorted, as a status poll reports them.
func (d *demo) nodeIDs() []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := d.probe.LeaderStatus(ctx, d.grp.Addrs(), 500*time.Millisecond)
	if err != nil {
		return nil
	}
	var ids []string
	for _, n := range st.Nodes {
		ids = append(ids, n.Id)
	}
	sort.Strings(ids)
	return ids
}

// leaderLoad is the load signal the leader reports of itself, as text.
func (d *demo) leaderLoad(ctx context.Context, leader string) string {
	addr := d.grp.AddrOf(leader)
	if addr == "" {
		return "?"
	}
	st, err := d.probe.StatusOnce(ctx, addr, 500*time.Millisecond)
	if err != nil {
		return "?"
	}
	if self := localgroup.SelfStatus(st); self != nil {
		return fmt.Sprintf("%.2f", self.Load)
	}
	return "?"
}

func servedList(m map[string]int) string {
	var parts []string
	for n, c := range m {
		parts = append(parts, fmt.Sprintf("%s %d", n, c))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// readsSummary is the summary's line for the read act.
func (d *demo) readsSummary() string {
	r := d.res.Reads
	if r == nil {
		return ""
	}
	s := fmt.Sprintf("%d messages served by %s; %.0f%% from followers", r.Consumed, servedList(r.ServedBy), 100*r.FollowerShare)
	if r.StoppedFollower != "" {
		if r.ReturnedMs >= 0 {
			s += fmt.Sprintf("; %s stopped, back on another node in %.0f ms", r.StoppedFollower, r.ReturnedMs)
		} else {
			s += fmt.Sprintf("; %s stopped", r.StoppedFollower)
		}
	}
	return s
}
