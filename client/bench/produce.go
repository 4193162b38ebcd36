// Package bench is the load generator behind `raftmq bench`: it produces to
// and consumes from a running group through the Go SDK and measures rate,
// bytes and latency. It speaks only the client SDK and api; starting servers
// is the caller's business.
package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// MaxWindow bounds requests in flight per producer: the group remembers the
// last 1024 sequences of each producer, and a retry of a sequence that fell
// out of that window is refused.
const MaxWindow = 512

// ProduceConfig configures a produce run.
type ProduceConfig struct {
	// Servers are client API addresses of any nodes of the group.
	Servers []string
	// NameServers, when set, run the benchmark over every group the name
	// servers register instead of one group (Servers is then unused): each
	// producer is a cluster producer (package client/cluster), which
	// spreads the messages over the topic's queues in every group, and a
	// run that creates the topic gives each group Queues queues.
	NameServers []string
	// TLS, when set, is every client's client.Config.TLS.
	TLS *tls.Config
	// Credentials, when set, are every client's client.Config.Credentials.
	Credentials *client.Credentials
	Topic       string
	// Queues is the queue count used when the run creates the topic; an
	// existing topic is used as it is.
	Queues int32
	// Size is the body size in bytes (random, incompressible).
	Size int
	// Producers each have their own client (connection) and producer id.
	Producers int
	// Window is the number of Send calls in flight per producer (one
	// goroutine each); 1 sends synchronously. The SDK coalesces concurrent
	// Sends of a producer into shared gRPC requests (client.ProducerConfig).
	Window int
	// Batch is the number of messages per Send.
	Batch int
	// Count and Duration bound the run; whichever is reached first ends it.
	// At least one must be > 0.
	Count    int64
	Duration time.Duration
	// Timeout bounds one request including the SDK's retries (default 30s).
	Timeout time.Duration
	// Progress, when set, is called every ProgressInterval (default 1s)
	// from one goroutine while the run goes on.
	Progress         func(Progress)
	ProgressInterval time.Duration
}

// Progress is a snapshot of a running benchmark.
type Progress struct {
	Elapsed  time.Duration
	Messages uint64  // acknowledged (produce) or received (consume) so far
	Rate     float64 // messages/s during the last interval
	Errors   uint64
}

// ProduceResult is the outcome of a produce run. MB is 10^6 bytes of message
// bodies (keys and headers not counted).
type ProduceResult struct {
	Topic     string `json:"topic"`
	Queues    int    `json:"queues"`
	Size      int    `json:"size"`
	Producers int    `json:"producers"`
	Window    int    `json:"window"`
	Batch     int    `json:"batch"`
	Messages  uint64 `json:"messages"` // acknowledged
	Requests  uint64 `json:"requests"` // acknowledged Send calls
	Errors    uint64 `json:"errors"`   // failed Send calls (after the SDK's retries)
	// Failed messages were definitely not stored (never sent, or refused);
	// Unknown ones were sent without an answer and may be stored. They
	// include the Sends that an interrupt ended, which Errors does not.
	Failed     uint64  `json:"failed_messages"`
	Unknown    uint64  `json:"unknown_messages"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	MBPerSec   float64 `json:"mb_per_sec"`
	// Latency is per Send call, from Send to ack (commit on a quorum and
	// apply on the leader), including the SDK's coalescing and retries.
	Latency Summary `json:"latency"`
	// Elections is how many Raft terms began during the run, in every
	// group (0 when the leaders held on throughout; -1 when a term could
	// not be read).
	Elections int64 `json:"elections"`
	// Groups is how many messages each group acknowledged, when the run
	// went through name servers.
	Groups map[string]uint64 `json:"groups,omitempty"`
	// ClientCPUSeconds is the CPU time (user + system) this process used
	// during the run.
	ClientCPUSeconds float64 `json:"client_cpu_seconds"`
}

// term reads the group's current Raft term, 0 when no node answers.
func term(ctx context.Context, cl *client.Client) uint64 {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := cl.Status(ctx)
	if err != nil {
		return 0
	}
	return st.Term
}

// elections is the number of terms between two readings, -1 if unknown.
func elections(before, after uint64) int64 {
	if before == 0 || after == 0 || after < before {
		return -1
	}
	return int64(after - before)
}

func (c *ProduceConfig) validate() error {
	d := ProduceConfig{Size: 1024, Producers: 4, Window: 256, Batch: 1, Timeout: 30 * time.Second, ProgressInterval: time.Second}
	if c.Topic == "" {
		return errors.New("topic: empty")
	}
	if c.Size == 0 {
		c.Size = d.Size
	}
	if c.Producers == 0 {
		c.Producers = d.Producers
	}
	if c.Window == 0 {
		c.Window = d.Window
	}
	if c.Batch == 0 {
		c.Batch = d.Batch
	}
	if c.Timeout <= 0 {
		c.Timeout = d.Timeout
	}
	if c.ProgressInterval <= 0 {
		c.ProgressInterval = d.ProgressInterval
	}
	switch {
	case c.Size < 0 || c.Size > 4<<20:
		return fmt.Errorf("size %d: want 0..%d bytes", c.Size, 4<<20)
	case c.Producers < 1 || c.Producers > 1024:
		return fmt.Errorf("producers %d: want 1..1024", c.Producers)
	case c.Window < 1 || c.Window > MaxWindow:
		return fmt.Errorf("window %d: want 1..%d (the group dedupes the last 1024 sequences of a producer)", c.Window, MaxWindow)
	case c.Batch < 1 || c.Batch > 65536:
		return fmt.Errorf("batch %d: want 1..65536", c.Batch)
	case c.Count < 0 || c.Duration < 0:
		return fmt.Errorf("count %d, duration %s: must not be negative", c.Count, c.Duration)
	case c.Count == 0 && c.Duration == 0:
		return errors.New("count and duration are both 0: the run would never end")
	case c.Queues < 0 || c.Queues > 1024:
		return fmt.Errorf("queues %d: want 0..1024 (0 = the group's default)", c.Queues)
	}
	return nil
}

// ensureTopic returns the topic's queue count, creating it when missing.
func ensureTopic(ctx context.Context, cl *client.Client, name string, queues int32) (int, error) {
	if ti, err := cl.DescribeTopic(ctx, name); err == nil {
		return len(ti.QueueInfo), nil
	}
	ti, err := cl.CreateTopic(ctx, name, queues, true)
	if err != nil {
		return 0, fmt.Errorf("create topic %s: %w", name, err)
	}
	return len(ti.QueueInfo), nil
}

// newClient returns an SDK client whose overall retry bound is timeout.
func newClient(servers []string, timeout time.Duration, tc *tls.Config, creds *client.Credentials) (*client.Client, error) {
	cfg := client.DefaultConfig()
	cfg.Servers = servers
	cfg.TLS = tc
	cfg.Credentials = creds
	cfg.RetryTimeout = timeout
	return client.New(cfg)
}

// newClusterClient returns an SDK cluster client through nameServers whose
// groups' clients have timeout as their overall retry bound.
func newClusterClient(nameServers []string, timeout time.Duration, tc *tls.Config, creds *client.Credentials) (*cluster.Cluster, error) {
	cfg := cluster.DefaultConfig()
	cfg.NameServers = nameServers
	cfg.Client.TLS, cfg.Client.Credentials, cfg.Client.RetryTimeout = tc, creds, timeout
	return cluster.New(cfg)
}

// RunProduce runs a produce benchmark. Before the clock starts, each
// producer learns the leader and sends one warm-up message (so the topic
// holds Producers more messages than the result counts). It returns an error only when the run
// could not start or a request failed for a reason retrying cannot fix;
// retryable failures are counted in Errors. Cancelling ctx ends the run
// early with what was measured so far.
func RunProduce(ctx context.Context, cfg ProduceConfig) (*ProduceResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	res := &ProduceResult{Topic: cfg.Topic, Size: cfg.Size, Producers: cfg.Producers, Window: cfg.Window, Batch: cfg.Batch}

	body := make([]byte, cfg.Size)
	rand.Read(body)
	msgs := make([]client.Message, cfg.Batch)
	for i := range msgs {
		msgs[i] = client.Message{Body: body} // read-only: shared by every request
	}
	setupCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	open := openGroup
	if len(cfg.NameServers) > 0 {
		open = openCluster
	}
	ps, err := open(setupCtx, &cfg, msgs[0])
	if ps != nil {
		defer ps.close()
	}
	if err != nil {
		return nil, err
	}
	res.Queues = ps.queues
	var gmu sync.Mutex
	countGroups := func(groups []string) {
		gmu.Lock()
		defer gmu.Unlock()
		if res.Groups == nil {
			res.Groups = map[string]uint64{}
		}
		for _, g := range groups {
			res.Groups[g]++
		}
	}

	var (
		hist     = NewHistogram()
		claimed  atomic.Int64
		acked    atomic.Uint64
		requests atomic.Uint64
		failed   atomic.Uint64
		notSent  atomic.Uint64 // messages definitely not stored
		unknown  atomic.Uint64 // messages that may be stored
		stop     atomic.Bool
		errOnce  sync.Once
		fatal    error
	)
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	// A request refused for a reason retrying cannot fix ends the run when
	// nothing has succeeded yet (a bad topic or size); later ones are counted:
	// e.g. a retry whose sequence fell out of the dedupe window while the
	// group changed leaders.
	fail := func(err error, notRetryable bool) {
		isFatal := notRetryable && acked.Load() == 0
		failed.Add(1)
		errOnce.Do(func() {
			res.FirstError = err.Error()
			if isFatal {
				fatal = err
			}
		})
		if isFatal {
			stop.Store(true)
		}
	}
	// One goroutine per producer keeps Window Sends in flight with
	// SendAsync: a goroutine per in-flight Send cost the client more CPU
	// than the coalesced requests themselves (a third of the bench's CPU
	// at 4 x 256 in flight).
	worker := func(send sendFunc) {
		window := make(chan struct{}, cfg.Window)
		defer func() { // wait for the Sends in flight
			for i := 0; i < cfg.Window; i++ {
				window <- struct{}{}
			}
		}()
		batch := int64(cfg.Batch)
		for !stop.Load() && runCtx.Err() == nil {
			k := batch
			if cfg.Count > 0 {
				end := claimed.Add(batch)
				if end-batch >= cfg.Count {
					return
				}
				k = min(batch, cfg.Count-(end-batch))
			}
			select {
			case window <- struct{}{}:
			case <-runCtx.Done():
				return
			}
			t0 := time.Now()
			// A Send still queued in the SDK when the run is interrupted is
			// never sent (ErrNotSent).
			send(runCtx, msgs[:k], func(groups []string, err error) {
				lat := time.Since(t0)
				switch client.Classify(err) {
				case client.Acknowledged:
					hist.Record(lat)
					acked.Add(uint64(k))
					requests.Add(1)
					if groups != nil {
						countGroups(groups)
					}
				case client.Failed:
					notSent.Add(uint64(k))
				default:
					unknown.Add(uint64(k))
				}
				if err != nil && runCtx.Err() == nil { // interrupted: not a failure of the group
					fail(err, !client.Retryable(err))
				}
				<-window
			})
		}
	}

	term0 := ps.term(ctx)
	elapsed, cpu := runWorkers(ctx, len(ps.sends), func(i int) { worker(ps.sends[i]) }, cfg.Duration, &stop,
		cfg.ProgressInterval, cfg.Progress, &acked, &failed)
	res.ClientCPUSeconds = cpu

	res.Messages, res.Requests, res.Errors = acked.Load(), requests.Load(), failed.Load()
	res.Failed, res.Unknown = notSent.Load(), unknown.Load()
	res.Seconds = elapsed.Seconds()
	if res.Seconds > 0 {
		res.MsgsPerSec = float64(res.Messages) / res.Seconds
		res.MBPerSec = float64(res.Messages) * float64(cfg.Size) / 1e6 / res.Seconds
	}
	res.Latency = hist.Summary()
	res.Elections = elections(term0, ps.term(context.Background()))
	if fatal != nil {
		return res, fmt.Errorf("produce: %w", fatal)
	}
	return res, nil
}

// runWorkers runs worker(0..n-1) concurrently and shows progress until all
// have returned; when the duration passes or ctx ends it sets stop, which the
// workers watch. It returns the time taken and the CPU seconds this process
// used meanwhile.
func runWorkers(ctx context.Context, n int, worker func(i int), duration time.Duration, stop *atomic.Bool,
	every time.Duration, progress func(Progress), count, errs *atomic.Uint64) (time.Duration, float64) {
	cpu0 := processCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker(i)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var deadline <-chan time.Time
	if duration > 0 {
		t := time.NewTimer(duration)
		defer t.Stop()
		deadline = t.C
	}
	watch(done, deadline, ctx.Done(), stop, start, every, progress, count, errs)
	<-done
	return time.Since(start), (processCPU() - cpu0).Seconds()
}

// watch reports progress until done closes, and sets stop when the deadline
// passes or the caller cancels.
func watch(done <-chan struct{}, deadline <-chan time.Time, cancelled <-chan struct{}, stop *atomic.Bool,
	start time.Time, every time.Duration, progress func(Progress), count, errs *atomic.Uint64) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var last uint64
	lastT := start
	for {
		select {
		case <-done:
			return
		case <-deadline:
			stop.Store(true)
			deadline = nil
		case <-cancelled:
			stop.Store(true)
			cancelled = nil
		case now := <-tick.C:
			n := count.Load()
			if progress != nil {
				progress(Progress{Elapsed: now.Sub(start), Messages: n, Rate: float64(n-last) / now.Sub(lastT).Seconds(), Errors: errs.Load()})
			}
			last, lastT = n, now
		}
	}
}
