package remoting

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// runtimeStats samples this node's message counters for
// GET_BROKER_RUNTIME_INFO: totals since the node started, at the start of
// today and of yesterday (local time, as RocketMQ's broker keeps them),
// and rates over the last 10 s, 1 min and 10 min.
type runtimeStats struct {
	mu      sync.Mutex
	started time.Time
	samples []counterSample // one a second, the last 601
	day     string
	morning counterSample // at the start of day (or at start-up)
	yest    counterSample // at the start of the day before
}

type counterSample struct {
	at       time.Time
	put, get float64
}

const runtimeSamples = 601

func newRuntimeStats() *runtimeStats {
	now := time.Now()
	return &runtimeStats{started: now, day: now.Format(time.DateOnly)}
}

// add records a sample.
func (r *runtimeStats) add(s counterSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := s.at.Format(time.DateOnly); d != r.day {
		r.day, r.yest, r.morning = d, r.morning, s
	}
	r.samples = append(r.samples, s)
	if len(r.samples) > runtimeSamples {
		r.samples = r.samples[len(r.samples)-runtimeSamples:]
	}
}

// rates returns put and get rates over the windows, as RocketMQ's
// putTps / getTransferredTps ("10s 1min 10min", space-separated).
func (r *runtimeStats) rates(now counterSample) (put, get string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps, gs []string
	for _, w := range []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute} {
		from := now
		for _, s := range r.samples {
			if now.at.Sub(s.at) <= w {
				from = s
				break
			}
		}
		secs := now.at.Sub(from.at).Seconds()
		p, g := 0.0, 0.0
		if secs > 0 {
			p, g = (now.put-from.put)/secs, (now.get-from.get)/secs
		}
		ps, gs = append(ps, strconv.FormatFloat(p, 'f', 2, 64)), append(gs, strconv.FormatFloat(g, 'f', 2, 64))
	}
	return ps[0] + " " + ps[1] + " " + ps[2], gs[0] + " " + gs[1] + " " + gs[2]
}

// counters reads this node's message totals from its metrics: messages
// acknowledged as leader (put) and served to consumers (get).
func (a *Adapter) counters() counterSample {
	s := counterSample{at: time.Now()}
	mfs, err := a.b.Registry().Gather()
	if err != nil {
		return s
	}
	for _, mf := range mfs {
		var dst *float64
		switch mf.GetName() {
		case "raftmq_produce_messages_total":
			dst = &s.put
		case "raftmq_pull_messages_total":
			dst = &s.get
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			*dst += m.GetCounter().GetValue()
		}
	}
	return s
}

// sampleLoop feeds runtimeStats once a second until the adapter stops.
func (a *Adapter) sampleLoop() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		a.runtime.add(a.counters())
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
	}
}

// runtimeInfo answers GET_BROKER_RUNTIME_INFO (no header; body KVTable,
// remoting/.../protocol/body/KVTable.java) with the keys mqadmin
// clusterList and brokerStatus and the dashboard's cluster page read
// (BrokerController.getRuntimeInfo's names; both spellings of the get
// rate, "getTransferedTps" of RocketMQ 4 and "getTransferredTps" of 5).
// What raftmq has no counterpart for (thread pool queues, page cache
// locks, the timer wheel) is 0; raftmq's own role and term are added.
func (a *Adapter) runtimeInfo(req *rmq.Command) *rmq.Command {
	now := a.counters()
	put, get := a.runtime.rates(now)
	a.runtime.mu.Lock()
	morning, yest, started := a.runtime.morning, a.runtime.yest, a.runtime.started
	a.runtime.mu.Unlock()
	n := func(f float64) string { return strconv.FormatInt(int64(f), 10) }
	t := map[string]string{
		"brokerVersionDesc":                    "raftmq",
		"brokerVersion":                        strconv.Itoa(int(rmq.Version)),
		"brokerActive":                         "true",
		"bootTimestamp":                        strconv.FormatInt(started.UnixMilli(), 10),
		"runtime":                              fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", int(time.Since(started).Hours())/24, int(time.Since(started).Hours())%24, int(time.Since(started).Minutes())%60, int(time.Since(started).Seconds())%60),
		"msgPutTotalTodayNow":                  n(now.put),
		"msgGetTotalTodayNow":                  n(now.get),
		"msgPutTotalTodayMorning":              n(morning.put),
		"msgGetTotalTodayMorning":              n(morning.get),
		"msgPutTotalYesterdayMorning":          n(yest.put),
		"msgGetTotalYesterdayMorning":          n(yest.get),
		"putTps":                               put,
		"getTransferredTps":                    get,
		"getTransferedTps":                     get,
		"sendThreadPoolQueueSize":              "0",
		"pullThreadPoolQueueSize":              "0",
		"sendThreadPoolQueueHeadWaitTimeMills": "0",
		"pullThreadPoolQueueHeadWaitTimeMills": "0",
		"pageCacheLockTimeMills":               "0",
		"timerReadBehind":                      "0",
		"timerOffsetBehind":                    "0",
		"timerCongestNum":                      "0",
		"timerEnqueueTps":                      "0.0",
		"timerDequeueTps":                      "0.0",
	}
	if st, err := a.b.Status(); err == nil {
		t["raftmqTerm"] = strconv.FormatUint(st.Term, 10)
		t["raftmqLeader"] = st.LeaderID
		t["raftmqNode"] = st.AnsweredBy
	}
	return jsonResponse(req, map[string]map[string]string{"table": t})
}
