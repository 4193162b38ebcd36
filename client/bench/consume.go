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
	// NameServers, when set, run the benchmark over every group that holds
	// the topic instead of one group (Servers is then unused): consumer i
	// reads groups i, i+n, ... of them, through a cluster consumer
	// (package client/cluster). More consumers than groups are not started.
	NameServers []string
	TLS         *tls.Config // every client's client.Config.TLS; nil: plaintext
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

	setupCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res := &ConsumeResult{Topic: cfg.Topic, FollowerReads: cfg.FollowerReads, ServedBy: map[string]uint64{}}
	open := openGroupReaders
	if len(cfg.NameServers) > 0 {
		open = openClusterReaders
	}
	rs, err := open(setupCtx, &cfg, res)
	if rs != nil {
		defer rs.close()
	}
	if err != nil {
		return nil, err
	}
	n := len(rs.readers)
	res.Consumers = n

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
	worker := func(m reader) {
		for !stop.Load() && runCtx.Err() == nil {
			if !cfg.Live && m.caughtUp() {
				complete.Add(1)
				return
			}
			t0 := time.Now()
			recs, err := m.poll(runCtx)
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

	term0 := rs.term(ctx)
	elapsed, cpu := runWorkers(ctx, n, func(i int) { worker(rs.readers[i]) }, cfg.Duration, &stop,
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
	res.Elections = elections(term0, rs.term(context.Background()))
	for _, m := range rs.readers {
		for node, c := range m.servedBy() {
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
