package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/history"
)

// broken is the number of broken promises the check found.
func (r demoResult) broken() int {
	return r.Lost + r.Duplicated + r.Misplaced + r.OffsetGaps + r.OrderViolations + r.OtherErrors
}

// verify consumes the topic from the earliest offset with a new consumer
// group and checks it against what every producer was told
// (internal/history): every acknowledged message exactly once where its
// ack said, as sent; offsets dense; per key the send order kept.
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

	h := &history.History{Topic: d.topic, Final: history.LogOf(history.Records(recs))}
	d.rec.Fill(h)
	rep := history.Check(h)
	examples := map[string][]string{}
	for _, v := range rep.Violations {
		examples[v.Kind] = appendMax(examples[v.Kind], v.Detail)
	}
	group2 := func(kinds ...string) (n int, ex []string) {
		for _, k := range kinds {
			n += rep.Counts[k]
			for _, e := range examples[k] {
				ex = appendMax(ex, e)
			}
			delete(examples, k)
		}
		return n, ex
	}
	d.res.Lost, d.res.Duplicated = rep.Lost, rep.Duplicated
	_, lostEx := group2(history.VLost)
	_, dupEx := group2(history.VDuplicate)
	var misEx, gapEx, orderEx, otherEx []string
	d.res.Misplaced, misEx = group2(history.VMisplaced, history.VAckPosition)
	d.res.OffsetGaps, gapEx = group2(history.VGap)
	d.res.OrderViolations, orderEx = group2(history.VKeyOrder, history.VRealTime)
	// The consumer read every queue up to the end the group reported.
	for q, e := range end {
		next := uint64(0)
		if es := h.Final[q]; len(es) > 0 {
			next = es[len(es)-1].Offset + 1
		}
		if next < e {
			d.res.OffsetGaps++
			gapEx = appendMax(gapEx, fmt.Sprintf("queue %d: read up to %d, end is %d", q, next, e))
		}
	}
	for k, ex := range examples {
		d.res.OtherErrors += rep.Counts[k]
		for _, e := range ex {
			otherEx = appendMax(otherEx, k+": "+e)
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
	report("OTHER ERRORS", d.res.OtherErrors, otherEx)
	if d.res.broken() == 0 {
		d.logf("checked: all %d acknowledged messages present exactly once at their acknowledged offsets; offsets dense; per-key order kept", rep.AckedMessages)
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
