package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/raftmq/raftmq/broker/load"
)

type metrics struct {
	reg             *prometheus.Registry
	produceMessages prometheus.Counter
	produceBytes    prometheus.Counter
	produceErrors   *prometheus.CounterVec
	produceLatency  prometheus.Histogram
	batchRequests   prometheus.Histogram
	batchBytes      prometheus.Histogram
	pullMessages    *prometheus.CounterVec
	suggestions     *prometheus.CounterVec
	roleChanges     *prometheus.CounterVec
	retentionCuts   *prometheus.CounterVec
	txnDecisions    *prometheus.CounterVec
	ops             *opsMetrics
}

func newMetrics(b *Broker) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		produceMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raftmq_produce_messages_total", Help: "Messages acknowledged by this node as leader."}),
		produceBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raftmq_produce_bytes_total", Help: "Bytes of messages acknowledged by this node as leader."}),
		produceErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raftmq_produce_errors_total", Help: "Produce requests that failed, by kind."}, []string{"kind"}),
		produceLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "raftmq_produce_seconds", Help: "Time from receiving a produce request to its acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		batchRequests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "raftmq_batch_requests", Help: "Produce requests per Raft entry (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "raftmq_batch_bytes", Help: "Size of Raft entries written by group commit.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 9)}),
		pullMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raftmq_pull_messages_total", Help: "Messages served to consumers, by the role of this node."}, []string{"role"}),
		suggestions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raftmq_pull_suggestions_total", Help: "Next-pull suggestions given, by target (self, leader, follower) and reason."}, []string{"target", "reason"}),
		roleChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raftmq_role_changes_total", Help: "Raft role changes of this node, by new role."}, []string{"role"}),
		retentionCuts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raftmq_retention_cuts_total", Help: "Retention cuts this node replicated as leader, by limit (age, size)."}, []string{"by"}),
		txnDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raftmq_txn_decisions_total", Help: "Transactional half messages this node decided as leader, by decision (commit, rollback, discard)."}, []string{"decision"}),
	}
	m.produceLatency = latencyTap{m.produceLatency, b.load}
	m.ops = newOpsMetrics(b, m.reg)
	m.reg.MustRegister(m.produceMessages, m.produceBytes, m.produceErrors, m.produceLatency, m.batchRequests,
		m.batchBytes, m.pullMessages, m.suggestions, m.roleChanges, m.retentionCuts, m.txnDecisions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("raftmq_txn_pending", "Transactional half messages stored and not decided yet (this node's applied state).",
		func() float64 { return float64(b.TxnPending()) })
	gauge("raftmq_txn_oldest_pending_seconds", "Age of the oldest undecided transactional half message (0: none), as this node reads it.",
		func() float64 { return b.txnOldestAge().Seconds() })
	gauge("raftmq_produce_pending_bytes", "Bytes of produce requests this node holds (queued for raft or in it).",
		func() float64 { return float64(b.pending.Held()) })
	gauge("raftmq_produce_waiting_bytes", "Bytes of produce requests waiting for room in the budget.",
		func() float64 { return float64(b.pending.Waiting()) })
	gauge("raftmq_produce_budget_bytes", "Bytes of produce requests this node admits now: --max-pending-mb, or what it answers in 0.5 s while requests queue.",
		func() float64 { return float64(b.pending.Limit()) })
	gauge("raftmq_term", "Current Raft term.", func() float64 { return float64(b.node.Stats().Term) })
	gauge("raftmq_is_leader", "1 when this node is the leader.", func() float64 {
		if b.node.Ready() {
			return 1
		}
		return 0
	})
	gauge("raftmq_applied_index", "Last log index applied to the FSM.", func() float64 { return float64(b.fsm.Applied()) })
	gauge("raftmq_commit_index", "Raft commit index.", func() float64 { return float64(b.node.Stats().CommitIndex) })
	gauge("raftmq_last_index", "Last log index stored.", func() float64 { return float64(b.node.Stats().LastIndex) })
	gauge("raftmq_first_index", "Lowest log index whose message bodies this node holds.", func() float64 { return float64(b.rlog.FirstIndex()) })
	gauge("raftmq_batch_version", "Highest batch format version this node writes as leader: the highest every member of the group reads (3 in this release).",
		func() float64 { return float64(b.w.BatchVersion()) })
	gauge("raftmq_log_floor", "Log index below which retention has dropped every message.", func() float64 { return float64(b.fsm.LogFloor()) })
	gauge("raftmq_damaged", "1 when this node met a damaged log entry: it serves no reads, does not lead and must be repaired.", func() float64 {
		if _, ok := b.Damaged(); ok {
			return 1
		}
		return 0
	})
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "raftmq_queue_index_rebuilds_total",
		Help: "Queue indexes this node found damaged and rebuilt from its log."}, func() float64 {
		n, _ := b.fsm.IndexRebuilds()
		return float64(n)
	}))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "raftmq_queue_index_refused_total",
		Help: "Damaged queue index ranges this node could not rebuild (its log no longer holds them): peers serve them."}, func() float64 {
		_, n := b.fsm.IndexRebuilds()
		return float64(n)
	}))
	gauge("raftmq_load", "Load signal used by read routing (0..1+): the max of the raftmq_load_part gauges, or the override.", func() float64 { return b.load.Value() })
	gauge("raftmq_loaded", "1 when raftmq_load is at or above --load-threshold.", func() float64 {
		if b.load.Value() >= b.cfg.LoadThreshold {
			return 1
		}
		return 0
	})
	gauge("raftmq_load_cpu_budget_cores", "CPU the load signal counts as this node's (GOMAXPROCS, cgroup quota, cores / nodes of the group on this host).",
		func() float64 { return b.load.Parts().Budget })
	for _, part := range []struct {
		name string
		f    func(load.Parts) float64
	}{{"cpu", func(p load.Parts) float64 { return p.CPU }}, {"produce_queue", func(p load.Parts) float64 { return p.Queue }},
		{"reads", func(p load.Parts) float64 { return p.Reads }}, {"pipeline", func(p load.Parts) float64 { return p.Pipeline }},
		{"produce_latency_seconds", func(p load.Parts) float64 { return p.Latency }}} {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_load_part",
			Help:        "Components of the load signal: cpu (share of the CPU budget), produce_queue (fill), reads (rate / 200k msg/s).",
			ConstLabels: prometheus.Labels{"part": part.name}}, func() float64 { return part.f(b.load.Parts()) }))
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "raftmq_leader_changes_total", Help: "Leader changes observed by this node."},
		func() float64 { return float64(b.node.Stats().LeaderChanges) }))
	return m
}

// Registry is the node's Prometheus registry, for /metrics.
func (b *Broker) Registry() *prometheus.Registry { return b.m.reg }

// latencyTap feeds produce latencies to the load meter as well.
type latencyTap struct {
	prometheus.Histogram
	l *load.Meter
}

func (t latencyTap) Observe(v float64) {
	t.Histogram.Observe(v)
	t.l.ObserveProduce(time.Duration(v * float64(time.Second)))
}
