package server_test

// Benchmarks of the produce and pull paths of an in-process group of three
// real nodes (raft over loopback TCP, raft-wal with fsync in temp dirs, the
// production timeouts of server.DefaultConfig), without gRPC: producers call
// the leader's Broker().Produce directly, so these figures are the ceiling of
// what a client can see.
//
//	go test -run '^$' -bench . -benchtime 5s ./broker/server/
//	go test -run '^$' -bench 'Produce/par1024-1KiB' -benchtime 5s -cpuprofile cpu.out ./broker/server/
//
// Reported: msgs/s, MB/s of bodies, and per-request latency p50/p99 in ms.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/election"
)

// benchHeartbeat overrides the Raft heartbeat and election timeouts (the
// lease becomes half of it): on a loaded 2-core machine the default 250 ms /
// 125 ms lease can cost the group its leader under full load, e.g.
//
//	go test -run '^$' -bench Produce ./broker/server/ -args -bench.heartbeat=1s
var benchHeartbeat = flag.Duration("bench.heartbeat", 0, "Raft heartbeat and election timeout of benchmark clusters (0: production default)")

// benchViaFollower makes BenchmarkProduceGRPC send to a follower, which
// forwards to the leader (what the SDK does when its first address is a
// follower and it has not learned the leader).
var benchViaFollower = flag.Bool("bench.via-follower", false, "BenchmarkProduceGRPC: send to a follower, which forwards")

// benchMaxInflight overrides broker.Config.MaxInflight (Raft entries the
// group commit keeps in flight), for A/B runs of the batching policy.
var benchMaxInflight = flag.Int("bench.max-inflight", 0, "broker MaxInflight of benchmark clusters (0: default)")

// benchCluster starts n nodes like newCluster in harness_test.go, which
// takes a *testing.T and so cannot serve a benchmark; it keeps the
// production timeouts and discards logs.
func benchCluster(b *testing.B, n int, mods ...func(*server.Config)) []*server.Server {
	b.Helper()
	var peers []election.Peer
	for i := 0; i < n; i++ {
		peers = append(peers, election.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: freeAddr(b)})
	}
	nodes := make([]*server.Server, n)
	b.Cleanup(func() {
		for _, s := range nodes {
			if s != nil {
				s.Kill()
			}
		}
	})
	for i := range nodes {
		cfg := server.DefaultConfig()
		cfg.DataDir = b.TempDir()
		cfg.Listen = freeAddr(b)
		cfg.Raft.ID = peers[i].ID
		cfg.Raft.BindAddr = peers[i].Addr
		cfg.Raft.Peers = peers
		cfg.Broker.ClientAddr = cfg.Listen
		if *benchMaxInflight > 0 {
			cfg.Broker.MaxInflight = *benchMaxInflight
		}
		if hb := *benchHeartbeat; hb > 0 {
			cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = hb, hb, hb/2
		}
		for _, m := range mods {
			m(&cfg)
		}
		s, err := server.Start(cfg)
		if err != nil {
			b.Fatalf("start node %d: %v", i, err)
		}
		nodes[i] = s
	}
	return nodes
}

func benchLeader(b *testing.B, nodes []*server.Server) *server.Server {
	b.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range nodes {
			if s.Node().Ready() {
				return s
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("no ready leader after 20s")
	return nil
}

// benchTopic creates topic "bench" with 4 queues on the current leader,
// retrying while leadership settles.
func benchTopic(b *testing.B, nodes []*server.Server) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := benchLeader(b, nodes).Broker().CreateTopic(context.Background(), "bench", 4, true)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("create topic: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// latencies collects per-request latencies of one goroutine.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

// report adds p50 and p99 (nearest rank) in ms.
func (l *latencies) report(b *testing.B) {
	if len(l.all) == 0 {
		return
	}
	sort.Slice(l.all, func(i, j int) bool { return l.all[i] < l.all[j] })
	at := func(p float64) float64 {
		i := int(p/100*float64(len(l.all))+0.999999) - 1
		return float64(l.all[min(max(i, 0), len(l.all)-1)]) / 1e6
	}
	b.ReportMetric(at(50), "p50-ms")
	b.ReportMetric(at(99), "p99-ms")
}

var producerIDs atomic.Uint64

// groupCommit is the leader's running totals of the group commit: Raft
// entries written, produce requests and bytes in them.
type groupCommit struct{ entries, requests, bytes float64 }

func batchStats(b *testing.B, br *broker.Broker) groupCommit {
	b.Helper()
	mfs, err := br.Registry().Gather()
	if err != nil {
		b.Fatal(err)
	}
	var g groupCommit
	for _, mf := range mfs {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		switch mf.GetName() {
		case "raftmq_batch_requests":
			g.entries, g.requests = float64(h.GetSampleCount()), h.GetSampleSum()
		case "raftmq_batch_bytes":
			g.bytes = h.GetSampleSum()
		}
	}
	return g
}

// BenchmarkProduce: one op is one produce request of `batch` messages.
//   - sync-1KiB: one producer, one request at a time (latency);
//   - parN-SIZE: N concurrent producers each with one request in flight
//     (b.RunParallel with N goroutines), like N×1 or 4 producers × N/4 window;
//   - par64-batch64-1KiB: client-side batching, 64 messages per request.
func BenchmarkProduce(b *testing.B) {
	nodes := benchCluster(b, 3)
	ctx := context.Background()
	benchTopic(b, nodes)
	cases := []struct {
		name        string
		parallel    int // goroutines; 0 = a single synchronous producer
		size, batch int
	}{
		{"sync-1KiB", 0, 1024, 1},
		{"par1024-1KiB", 1024, 1024, 1},
		{"par256-1KiB", 256, 1024, 1},
		{"par1024-100B", 1024, 100, 1},
		{"par64-batch64-1KiB", 64, 1024, 64},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			leader := benchLeader(b, nodes).Broker() // it may have moved in an earlier case
			body := make([]byte, tc.size)
			for i := range body {
				body[i] = byte(i * 7)
			}
			msgs := make([]broker.ProduceMessage, tc.batch)
			for i := range msgs {
				msgs[i] = broker.ProduceMessage{Body: body}
			}
			var lat latencies
			var errs atomic.Int64
			var firstErr sync.Once
			before := batchStats(b, leader)
			produce := func(id string, seq *uint64, local *[]time.Duration) {
				*seq++
				t0 := time.Now()
				_, err := leader.Produce(ctx, broker.ProduceRequest{Topic: "bench", ProducerID: id, Seq: *seq, Messages: msgs})
				*local = append(*local, time.Since(t0))
				if err != nil {
					// Counted, not fatal: a loaded machine can cost the
					// group its leader, and that is part of the result.
					errs.Add(1)
					firstErr.Do(func() { b.Logf("first error: %v", err) })
				}
			}
			b.SetBytes(int64(tc.size * tc.batch))
			b.ReportAllocs()
			b.ResetTimer()
			if tc.parallel == 0 {
				id := fmt.Sprintf("bench-%d", producerIDs.Add(1))
				var seq uint64
				local := make([]time.Duration, 0, b.N)
				for i := 0; i < b.N; i++ {
					produce(id, &seq, &local)
				}
				lat.add(local)
			} else {
				b.SetParallelism((tc.parallel + 1) / 2) // RunParallel starts parallelism × GOMAXPROCS goroutines
				b.RunParallel(func(pb *testing.PB) {
					id := fmt.Sprintf("bench-%d", producerIDs.Add(1))
					var seq uint64
					var local []time.Duration
					for pb.Next() {
						produce(id, &seq, &local)
					}
					lat.add(local)
				})
			}
			b.StopTimer()
			// Only acknowledged messages count; failed requests are reported.
			b.ReportMetric(float64((int64(b.N)-errs.Load())*int64(tc.batch))/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(errs.Load()), "errors")
			lat.report(b)
			after := batchStats(b, leader)
			if entries := after.entries - before.entries; entries > 0 {
				b.ReportMetric((after.requests-before.requests)/entries, "reqs/entry")
				b.ReportMetric((after.bytes-before.bytes)/entries/1024, "KiB/entry")
			}
		})
	}
}

// BenchmarkPull reads a topic of 1 KiB messages back from the leader's log
// and index, one queue, 1024 messages per pull (the bench consumer's size).
// One op is one pull.
func BenchmarkPull(b *testing.B) {
	const fill = 200000
	nodes := benchCluster(b, 3)
	benchTopic(b, nodes)
	leader := benchLeader(b, nodes).Broker()
	ctx := context.Background()
	body := make([]byte, 1024)
	var wg sync.WaitGroup
	var seqs atomic.Uint64
	for g := 0; g < 256; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seqs.Add(1) <= fill {
				if _, err := leader.Produce(ctx, broker.ProduceRequest{Topic: "bench", Messages: []broker.ProduceMessage{{Body: body}}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, s := range nodes { // wait until every node has applied everything
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			ti, err := s.Store().Topic("bench")
			total := uint64(0)
			for _, q := range ti.Queues {
				total += q.Max
			}
			if err == nil && total == fill {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("node %s applied %d of %d messages after 30s (%v)", s.Node().ID(), total, fill, err)
			}
		}
	}
	b.Run("leader-1024", func(b *testing.B) {
		benchPull(b, leader, 1024)
	})
	for _, s := range nodes {
		if s.Broker() != leader {
			b.Run("follower-1024", func(b *testing.B) {
				benchPull(b, s.Broker(), 1024)
			})
			break
		}
	}
}

func benchPull(b *testing.B, br *broker.Broker, max int) {
	ctx := context.Background()
	var offsets [4]uint64
	msgs := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := i % 4
		res, err := br.Pull(ctx, broker.PullRequest{Topic: "bench", Queue: int32(q), Offset: offsets[q], MaxMessages: max, MaxBytes: 16 << 20})
		if err != nil {
			b.Fatal(err)
		}
		msgs += len(res.Messages)
		offsets[q] = res.NextOffset
		if res.NextOffset >= res.MaxOffset {
			offsets[q] = 0 // wrap around: read the queue again
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/pull")
}

// BenchmarkProduceGRPC is the whole path of `raftmq bench produce`: SDK
// producers (each its own client and connection) → gRPC → the leader, in one
// process with the three nodes, so a CPU profile covers client and servers.
// One op is one message (one request). 4 producers × 256 in flight.
func BenchmarkProduceGRPC(b *testing.B) {
	benchProduceGRPC(b, benchCluster(b, 3), nil, []benchCase{{"4x256-1KiB", 4, 256, 1024}, {"4x256-100B", 4, 256, 100}, {"sync-1KiB", 1, 1, 1024}})
}

type benchCase struct {
	name                    string
	producers, window, size int
}

// BenchmarkProduceGRPCAuth is BenchmarkProduceGRPC's 1 KiB cases against a
// group with --auth disabled and then one with --auth enforcing whose
// producers sign every call: the cost of the per-call credential, A/B in
// one run.
func BenchmarkProduceGRPCAuth(b *testing.B) {
	cases := []benchCase{{"4x256-1KiB", 4, 256, 1024}, {"sync-1KiB", 1, 1, 1024}}
	// Both groups live until the benchmark ends: a group stopped in the
	// middle of the process would have its directories removed under it.
	off := benchCluster(b, 3)
	on := benchCluster(b, 3, func(cfg *server.Config) {
		cfg.Auth = server.AuthConfig{Mode: acl.Enforcing, Key: bytes.Repeat([]byte("k"), 32), AdminUser: "bench", AdminSecret: []byte("bench-secret")}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok := benchLeader(b, on).Store().User("bench"); ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("no user bench after 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Run("auth=disabled", func(b *testing.B) { benchProduceGRPC(b, off, nil, cases) })
	b.Run("auth=enforcing", func(b *testing.B) {
		benchProduceGRPC(b, on, &client.Credentials{AccessKey: "bench", SecretKey: []byte("bench-secret")}, cases)
	})
}

func benchProduceGRPC(b *testing.B, nodes []*server.Server, creds *client.Credentials, cases []benchCase) {
	leader := benchLeader(b, nodes)
	var addrs []string
	for _, s := range nodes {
		if *benchViaFollower && s == leader {
			continue
		}
		addrs = append(addrs, s.Addr())
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			var producers []*client.Producer
			for i := 0; i < tc.producers; i++ {
				cl, err := client.New(client.Config{Servers: addrs, Credentials: creds})
				if err != nil {
					b.Fatal(err)
				}
				defer cl.Close()
				if _, err := cl.CreateTopic(ctx, "bench", 4, true); err != nil {
					b.Fatal(err)
				}
				if !*benchViaFollower {
					// Learn the leader: the SDK otherwise sends everything to
					// the first address, and a follower there forwards it.
					if _, err := cl.Status(ctx); err != nil {
						b.Fatal(err)
					}
				}
				p := cl.NewProducer()
				if _, err := p.Send(ctx, "bench", client.Message{Body: []byte("warm-up")}); err != nil {
					b.Fatal(err)
				}
				producers = append(producers, p)
			}
			msg := client.Message{Body: make([]byte, tc.size)}
			var next, errs atomic.Int64
			var firstErr sync.Once
			var lat latencies
			var wg sync.WaitGroup
			b.SetBytes(int64(tc.size))
			b.ReportAllocs()
			b.ResetTimer()
			for _, p := range producers {
				for w := 0; w < tc.window; w++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var local []time.Duration
						for next.Add(1) <= int64(b.N) {
							t0 := time.Now()
							if _, err := p.Send(ctx, "bench", msg); err != nil {
								errs.Add(1)
								firstErr.Do(func() { b.Logf("first error: %v", err) })
								continue
							}
							local = append(local, time.Since(t0))
						}
						lat.add(local)
					}()
				}
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(int64(b.N)-errs.Load())/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(errs.Load()), "errors")
			lat.report(b)
		})
	}
}
