package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/client"
)

// ConsumeConfig configures a consume run: it reads the topic from its
// earliest retained offsets up to the end offsets seen at the start.
type ConsumeConfig struct {
	Servers []string
	TLS     *tls.Config // every client's client.Config.TLS; nil: plaintext
	// Credentials, when set, are every client's client.Config.Credentials.
	Credentials *client.Credentials
	Topic       string
	// Consumers split the queues between them (consumer i reads queues
	// i, i+n, ...); each has its own client (connection). More consumers
	// than queues are not started.
	Consumers int
	// FollowerReads lets consumers follow the group's read-routing
	// suggestions; false sends every pull to the leader.
	FollowerReads bool
	// MaxMessages bounds one pull of one queue (default 1024).
	MaxMessages uint32
	// Group names the consumer group; default a fresh "bench-<random>", so
	// a run starts at the earliest offsets and commits nothing.
	Group string
	// Count and Duration bound the run besides the end of the topic; 0 =
	// no bound of that kind.
	Count    int64
	Duration time.Duration
	Timeout  time.Duration
	// Progress, when set, is called every ProgressInterval (default 1s).
	Progress         func(Progress)
	ProgressInterval time.Duration
	// Live starts at the queues' ends and reads what is produced meanwhile
	// until Count or Duration, recording EndToEnd latency.
	Live bool
}

// ConsumeResult is the outcome of a consume run. MB is 10^6 bytes of bodies.
type ConsumeResult struct {
	Topic         string  `json:"topic"`
	Queues        int     `json:"queues"`
	Consumers     int     `json:"consumers"`
	FollowerReads bool    `json:"follower_reads"`
	Available     uint64  `json:"available"` // messages between min and end offsets at the start
	Messages      uint64  `json:"messages"`
	Bytes         uint64  `json:"bytes"`
	Complete      bool    `json:"complete"` // read everything up to the end offsets seen at the start
	Errors        uint64  `json:"errors"`
	FirstError    string  `json:"first_error,omitempty"`
	Seconds       float64 `json:"seconds"`
	MsgsPerSec    float64 `json:"msgs_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	// ServedBy counts messages per serving node id; FromLeader and
	// FromFollowers split them by the serving node's role at the time.
	ServedBy      map[string]uint64 `json:"served_by"`
	FromLeader    uint64            `json:"from_leader"`
	FromFollowers uint64            `json:"from_followers"`
	FollowerShare float64           `json:"follower_share"`
	// PollLatency is per Poll (one pull per assigned queue, in parallel).
	PollLatency Summary `json:"poll_latency"`
	// EndToEnd (Live runs) is from a message's store time on the leader to
	// its arrival here, at the millisecond resolution of store times.
	EndToEnd *Summary `json:"end_to_end_latency,omitempty"`
	// Elections is how many Raft terms began during the run (-1: unknown).
	Elections int64 `json:"elections"`
	// ClientCPUSeconds is the CPU time this process used during the run.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
}

// RunConsume runs a consume benchmark.
func RunConsume(ctx context.Context, cfg ConsumeConfig) (*ConsumeResult, error) {
	if cfg.Topic == "" {
		return nil, errors.New("topic: empty")
	}
	if cfg.Consumers == 0 {
		cfg.Consumers = 1
	}
	if cfg.Consumers < 0 || cfg.Consumers > 1024 {
		return nil, fmt.Errorf("consumers %d: want 1..1024", cfg.Consumers)
	}
	if cfg.Count < 0 || cfg.Duration < 0 {
		return nil, fmt.Errorf("count %d, duration %s: must not be negative", cfg.Count, cfg.Duration)
	}
	if cfg.MaxMessages == 0 {
		cfg.MaxMessages = 1024
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = time.Second
	}
	if cfg.Group == "" {
		var b [6]byte
		rand.Read(b[:])
		cfg.Group = "bench-" + hex.EncodeToString(b[:])
	}

	admin, err := newClient(cfg.Servers, cfg.Timeout, cfg.TLS, cfg.Credentials)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	setupCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	ti, err := admin.DescribeTopic(setupCtx, cfg.Topic)
	if err != nil {
		return nil, fmt.Errorf("describe topic %s: %w", cfg.Topic, err)
	}
	end := map[int32]uint64{}
	res := &ConsumeResult{Topic: cfg.Topic, Queues: len(ti.QueueInfo), FollowerReads: cfg.FollowerReads, ServedBy: map[string]uint64{}}
	for _, q := range ti.QueueInfo {
		end[q.Queue] = q.MaxOffset
		res.Available += q.MaxOffset - q.MinOffset
	}
	n := min(cfg.Consumers, len(ti.QueueInfo))
	res.Consumers = n

	type member struct {
		cl   *client.Client
		cons *client.Consumer
		end  map[int32]uint64
	}
	members := make([]*member, n)
	defer func() {
		for _, m := range members {
			if m != nil {
				m.cl.Close()
			}
		}
	}()
	for i := range members {
		cl, err := newClient(cfg.Servers, cfg.Timeout, cfg.TLS, cfg.Credentials)
		if err != nil {
			return nil, err
		}
		m := &member{cl: cl, end: map[int32]uint64{}}
		members[i] = m
		// Learn the leader: without it "leader only" pulls go to the first
		// server of the list, whatever its role.
		cl.Status(setupCtx)
		cc := client.DefaultConsumerConfig(cfg.Topic, cfg.Group)
		cc.FollowerReads = cfg.FollowerReads
		cc.MaxMessages = cfg.MaxMessages
		cc.MaxBytes = 16 << 20
		cc.Wait = 100 * time.Millisecond
		cc.CommitInterval = 0 // commit nothing: a bench group is throwaway
		if cfg.Live {
			cc.From = "latest"
		}
		for q := i; q < len(ti.QueueInfo); q += n {
			qi := ti.QueueInfo[q].Queue
			cc.Queues = append(cc.Queues, qi)
			m.end[qi] = end[qi]
		}
		if m.cons, err = cl.NewConsumer(cc); err != nil {
			return nil, err
		}
	}

	if cfg.Live && cfg.Count == 0 && cfg.Duration == 0 {
		return nil, errors.New("a live run needs a count or a duration")
	}
	var (
		e2e                 = NewHistogram()
		hist                = NewHistogram()
		msgs, bytes, leader atomic.Uint64
		failed              atomic.Uint64
		stop                atomic.Bool
		complete            atomic.Int32
		errMu               sync.Mutex
		fatal               error
	)
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	worker := func(m *member) {
		caughtUp := func() bool {
			for _, e := range m.end {
				if e > 0 {
					return m.cons.CaughtUp(m.end)
				}
			}
			return true // nothing to read
		}
		for !stop.Load() && runCtx.Err() == nil {
			if !cfg.Live && caughtUp() {
				complete.Add(1)
				return
			}
			t0 := time.Now()
			recs, err := m.cons.Poll(runCtx)
			lat := time.Since(t0)
			if err != nil {
				if runCtx.Err() != nil {
					return
				}
				failed.Add(1)
				errMu.Lock()
				if res.FirstError == "" {
					res.FirstError = err.Error()
				}
				if !client.Retryable(err) && fatal == nil {
					fatal = err
				}
				errMu.Unlock()
				if !client.Retryable(err) {
					stop.Store(true)
					return
				}
				continue
			}
			hist.Record(lat)
			var b, l uint64
			now := time.Now()
			for i := range recs {
				if cfg.Live {
					e2e.Record(max(0, now.Sub(time.UnixMilli(recs[i].TimestampMs))))
				}
				b += uint64(len(recs[i].Body))
				if recs[i].ServedByLeader {
					l++
				}
			}
			bytes.Add(b)
			leader.Add(l)
			total := msgs.Add(uint64(len(recs)))
			if cfg.Count > 0 && total >= uint64(cfg.Count) {
				stop.Store(true)
			}
		}
	}

	term0 := term(ctx, admin)
	elapsed, cpu := runWorkers(ctx, len(members), func(i int) { worker(members[i]) }, cfg.Duration, &stop,
		cfg.ProgressInterval, cfg.Progress, &msgs, &failed)
	res.ClientCPUSeconds = cpu

	res.Messages, res.Bytes, res.Errors = msgs.Load(), bytes.Load(), failed.Load()
	res.FromLeader = leader.Load()
	res.FromFollowers = res.Messages - res.FromLeader
	if res.Messages > 0 {
		res.FollowerShare = float64(res.FromFollowers) / float64(res.Messages)
	}
	res.Complete = int(complete.Load()) == n
	res.Seconds = elapsed.Seconds()
	if res.Seconds > 0 {
		res.MsgsPerSec = float64(res.Messages) / res.Seconds
		res.MBPerSec = float64(res.Bytes) / 1e6 / res.Seconds
	}
	res.PollLatency = hist.Summary()
	if cfg.Live {
		sum := e2e.Summary()
		res.EndToEnd = &sum
	}
	res.Elections = elections(term0, term(context.Background(), admin))
	for _, m := range members {
		for node, c := range m.cons.ServedBy() {
			res.ServedBy[node] += uint64(c)
		}
	}
	if fatal != nil {
		return res, fmt.Errorf("consume: %w", fatal)
	}
	return res, nil
}

// Nodes returns the ids of ServedBy, sorted.
func (r *ConsumeResult) Nodes() []string {
	out := make([]string, 0, len(r.ServedBy))
	for n := range r.ServedBy {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
