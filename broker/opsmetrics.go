package broker

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/store"
)

// The metrics an operator alerts on: consumer lag, followers' lag, traffic
// per topic, how late messages are consumed, retries and dead letters.
// Label values that come from users (topics, groups, queues) are capped so
// that a node with very many of them does not flood its scrapes.
const (
	maxTopicLabels = 1000 // then topic="_other"
	maxLagSeries   = 5000 // group, topic and queue series of raftmq_consumer_lag_messages
	otherLabel     = "_other"
)

// topicLabels hands out a topic's label value: its name for the first
// maxTopicLabels topics seen, otherLabel after that.
type topicLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (t *topicLabels) of(topic string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[topic] {
		return topic
	}
	if len(t.seen) >= maxTopicLabels {
		return otherLabel
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.seen[topic] = true
	return topic
}

type opsMetrics struct {
	applied       appliedHistory
	topics        topicLabels
	topicProduced *prometheus.CounterVec
	topicConsumed *prometheus.CounterVec
	consumeDelay  prometheus.Histogram
	sendBacks     *prometheus.CounterVec
}

func newOpsMetrics(b *Broker, reg prometheus.Registerer) *opsMetrics {
	m := &opsMetrics{
		topicProduced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_topic_produced_messages_total",
			Help: "Messages acknowledged by this node as leader, by topic (the first 1000 topics seen; later ones as _other)."}, []string{"topic"}),
		topicConsumed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_topic_consumed_messages_total",
			Help: "Messages this node served to consumers, by topic (the first 1000 topics seen; later ones as _other)."}, []string{"topic"}),
		consumeDelay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "raftmq_consume_delay_seconds",
			Help:    "Time from a message's store to its serving to a consumer by this node (each message served).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12)}),
		sendBacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_send_backs_total",
			Help: "Consumed messages sent back by this node as leader: to the retry topic (retry) or the dead letters (dead_letter)."}, []string{"to"}),
	}
	m.sendBacks.WithLabelValues("retry")
	m.sendBacks.WithLabelValues("dead_letter")
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "raftmq_node_info",
		Help:        "Always 1; its labels name the node and its group, to join other series on (instance) by group.",
		ConstLabels: prometheus.Labels{"group": b.cfg.Group, "node": b.cfg.NodeID}})
	info.Set(1)
	reg.MustRegister(info, m.topicProduced, m.topicConsumed, m.consumeDelay, m.sendBacks, lagCollector{b})
	return m
}

// produced counts n messages acknowledged to topic.
func (m *opsMetrics) produced(topic string, n int) {
	m.topicProduced.WithLabelValues(m.topics.of(topic)).Add(float64(n))
}

// served counts the messages of one pull answer and how late they came.
func (m *opsMetrics) served(msgs []Message) {
	if len(msgs) == 0 {
		return
	}
	m.topicConsumed.WithLabelValues(m.topics.of(msgs[0].Topic)).Add(float64(len(msgs)))
	now := time.Now().UnixMilli()
	for i := range msgs {
		if ts := msgs[i].Timestamp; ts > 0 && now >= ts {
			m.consumeDelay.Observe(float64(now-ts) / 1000)
		}
	}
}

// sentBack counts one send-back.
func (m *opsMetrics) sentBack(deadLettered bool) {
	to := "retry"
	if deadLettered {
		to = "dead_letter"
	}
	m.sendBacks.WithLabelValues(to).Inc()
}

// appliedHistory is when this leader applied what: a sample per state
// period over the last minute, to tell how long ago a follower's applied
// index was the leader's.
type appliedHistory struct {
	mu      sync.Mutex
	samples [300]appliedSample // a ring
	next, n int
}

type appliedSample struct {
	at      time.Time
	applied uint64
}

// record adds this leader's applied index at now.
func (h *appliedHistory) record(now time.Time, applied uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples[h.next] = appliedSample{now, applied}
	h.next = (h.next + 1) % len(h.samples)
	h.n = min(h.n+1, len(h.samples))
}

// behind is how long ago this leader first had applied past a follower's
// applied index: 0 when the follower has all of it, the whole history when
// it lacked even the oldest sample's.
func (h *appliedHistory) behind(now time.Time, follower uint64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := 0; i < h.n; i++ { // oldest first
		s := h.samples[(h.next-h.n+i+len(h.samples))%len(h.samples)]
		if s.applied > follower {
			return now.Sub(s.at)
		}
	}
	return 0
}

var (
	lagDesc = prometheus.NewDesc("raftmq_consumer_lag_messages",
		"Messages of a queue after a consumer group's committed offset (every node reports the replicated offsets; at most 5000 series).",
		[]string{"group", "topic", "queue"}, nil)
	followerLagDesc = prometheus.NewDesc("raftmq_follower_lag_entries",
		"Log entries a follower had applied fewer than this leader, as last heard (leader only).", []string{"node"}, nil)
	followerLagSecondsDesc = prometheus.NewDesc("raftmq_follower_lag_seconds",
		"How long ago this leader had applied what a follower has applied, as last heard (0: caught up; at most a minute is told; leader only).", []string{"node"}, nil)
	followerSeenDesc = prometheus.NewDesc("raftmq_follower_last_heard_seconds",
		"Seconds since this leader last heard a follower's state (every 200 ms when well; leader only).", []string{"node"}, nil)
)

// lagCollector reads the consumer groups' and the followers' lag at each
// scrape.
type lagCollector struct{ b *Broker }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- followerLagDesc
	ch <- followerLagSecondsDesc
	ch <- followerSeenDesc
}

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	series := 0
	topics := map[string]store.TopicInfo{}
	for _, t := range b.fsm.Topics() {
		topics[t.Name] = t
	}
groups:
	for _, g := range b.fsm.Groups() {
		if _, _, member := store.SplitMemberKey(g); member {
			continue // a broadcasting member keeps its own offsets
		}
		for _, topic := range b.fsm.GroupTopics(g) {
			t, ok := topics[topic]
			if !ok {
				continue
			}
			for q, off := range b.fsm.Offsets(g, topic) {
				if int(q) >= len(t.Queues) {
					continue
				}
				r := t.Queues[q]
				lag := uint64(0)
				if off < r.Max {
					lag = r.Max - max(off, r.Min)
				}
				if series >= maxLagSeries {
					break groups
				}
				series++
				ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(lag), g, topic, strconv.Itoa(int(q)))
			}
		}
	}
	if b.node.Role() != election.Leader {
		return
	}
	applied := b.fsm.Applied()
	servers, err := b.node.Servers()
	if err != nil {
		return
	}
	for _, s := range servers {
		if s.ID == b.cfg.NodeID {
			continue
		}
		p, ok := b.view.Get(s.ID)
		if !ok {
			continue
		}
		lag := uint64(0)
		if applied > p.State.Applied {
			lag = applied - p.State.Applied
		}
		ch <- prometheus.MustNewConstMetric(followerLagDesc, prometheus.GaugeValue, float64(lag), s.ID)
		ch <- prometheus.MustNewConstMetric(followerLagSecondsDesc, prometheus.GaugeValue, b.m.ops.applied.behind(time.Now(), p.State.Applied).Seconds(), s.ID)
		ch <- prometheus.MustNewConstMetric(followerSeenDesc, prometheus.GaugeValue, time.Since(p.LastOK).Seconds(), s.ID)
	}
}
