package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
)

// TestRocketMQBench measures 1 KiB sends through the unmodified RocketMQ
// Go client next to raftmq's own SDK (`raftmq bench produce`) on the same
// 3-process group, synchronous and asynchronous, then how fast the Go
// client's push consumer reads them back (docs/BENCHMARKS.md). It
// runs only with RAFTMQ_RMQ_BENCH=1: it reports figures and asserts only
// that every send was acknowledged. RAFTMQ_RMQ_BENCH_WRITE_VIA=false
// starts the nodes with --remoting-write-via-followers=false (producers
// send to the leader only; with the default, two thirds of the sends go
// through a follower, which forwards them); RAFTMQ_RMQ_BENCH_SDK=0 skips
// the SDK runs.
func TestRocketMQBench(t *testing.T) {
	procRequire(t)
	if os.Getenv("RAFTMQ_RMQ_BENCH") != "1" {
		t.Skip("set RAFTMQ_RMQ_BENCH=1 to run the RocketMQ client benchmark")
	}
	rlog.SetLogLevel("error")
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	via := os.Getenv("RAFTMQ_RMQ_BENCH_WRITE_VIA") != "false"
	paths := 0
	if via {
		paths = 2
	}
	c := procStartGroup(t, localgroup.Config{Nodes: 3, Remoting: true, ServerArgs: []string{"--namesrv", ns.Addr(), "--register-period", "2s",
		fmt.Sprintf("--remoting-write-via-followers=%v", via)}})
	c.mustCLI("", "topic", "create", "rmqbench", "--queues", "4", "-s", c.addrs())
	deadline := time.Now().Add(30 * time.Second)
	for g := ns.Groups()["raftmq"]; g == nil || g.Topics["rmqbench"] != 4 || len(g.Addrs) != 3 || len(g.WritePaths) != paths; g = ns.Groups()["raftmq"] {
		if time.Now().After(deadline) {
			t.Fatal("topic never registered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := 10 * time.Second
	if v := os.Getenv("RAFTMQ_RMQ_BENCH_SECONDS"); v != "" {
		var s int
		fmt.Sscan(v, &s)
		d = time.Duration(s) * time.Second
	}
	body := []byte(strings.Repeat("x", 1024))
	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("bench"), producer.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	ctx := context.Background()
	if _, err := p.SendSync(ctx, primitive.NewMessage("rmqbench", body)); err != nil {
		t.Fatal(err)
	}
	pct := func(lat []time.Duration, q float64) time.Duration {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat[int(float64(len(lat)-1)*q)]
	}
	// Synchronous: one send at a time.
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < d {
		t0 := time.Now()
		if _, err := p.SendSync(ctx, primitive.NewMessage("rmqbench", body)); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	el := time.Since(start)
	n0 := len(lat)
	t.Logf("write via followers: %v", via)
	t.Logf("RocketMQ client, sync, 1 KiB: %d msgs in %v: %.0f msg/s, p50 %.2f ms, p99 %.2f ms", len(lat), el.Round(time.Millisecond),
		float64(len(lat))/el.Seconds(), ms(pct(lat, 0.5)), ms(pct(lat, 0.99)))

	// Asynchronous: 256 sends in flight.
	const window = 256
	sem := make(chan struct{}, window)
	var mu sync.Mutex
	lat = lat[:0]
	var failed atomic.Int64
	var wg sync.WaitGroup
	if path := os.Getenv("RAFTMQ_RMQ_BENCH_PROFILE"); path != "" {
		// The leader's CPU profile of the async case, for `go tool pprof`.
		leader, _ := c.leaderNow()
		go func() {
			resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", leader.HTTP, int(d.Seconds())-2))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			f, err := os.Create(path)
			if err == nil {
				io.Copy(f, resp.Body)
				f.Close()
			}
		}()
	}
	start = time.Now()
	for time.Since(start) < d {
		sem <- struct{}{}
		wg.Add(1)
		t0 := time.Now()
		err := p.SendAsync(ctx, func(ctx context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			<-sem
			if err != nil {
				failed.Add(1)
				return
			}
			mu.Lock()
			lat = append(lat, time.Since(t0))
			mu.Unlock()
		}, primitive.NewMessage("rmqbench", body))
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	el = time.Since(start)
	if failed.Load() > 0 {
		t.Errorf("%d async sends failed", failed.Load())
	}
	t.Logf("RocketMQ client, async (%d in flight), 1 KiB: %d msgs in %v: %.0f msg/s, p50 %.2f ms, p99 %.2f ms", window, len(lat), el.Round(time.Millisecond),
		float64(len(lat))/el.Seconds(), ms(pct(lat, 0.5)), ms(pct(lat, 0.99)))

	// Consume: a push consumer reads the topic from its start (everything
	// both cases sent and the first send).
	want := int64(len(lat)) + int64(n0) + 1
	var got atomic.Int64
	var first, last atomic.Int64
	pc, err := consumer.NewPushConsumer(consumer.WithNameServer([]string{ns.Addr()}), consumer.WithGroupName("bench-read"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithPullBatchSize(32), consumer.WithConsumeMessageBatchMaxSize(32))
	if err != nil {
		t.Fatal(err)
	}
	err = pc.Subscribe("rmqbench", consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		got.Add(int64(len(msgs)))
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	for stop := time.Now().Add(2 * time.Minute); got.Load() < want && time.Now().Before(stop); {
		time.Sleep(100 * time.Millisecond)
	}
	pc.Shutdown()
	if got.Load() < want {
		t.Errorf("the push consumer read %d of %d messages in 2 minutes", got.Load(), want)
	} else {
		span := time.Duration(last.Load() - first.Load())
		t.Logf("RocketMQ client, push consumer, 1 KiB: %d msgs in %v: %.0f msg/s", got.Load(), span.Round(time.Millisecond), float64(got.Load())/span.Seconds())
	}

	// raftmq's SDK on the same group.
	if os.Getenv("RAFTMQ_RMQ_BENCH_SDK") == "0" {
		return
	}
	secs := fmt.Sprintf("%ds", int(d.Seconds()))
	out := c.mustCLI("", "bench", "produce", "-s", c.addrs(), "--producers", "1", "--window", "1", "--count", "0", "--duration", secs, "--topic", "rmqbench")
	t.Logf("raftmq SDK, sync:\n%s", out)
	out = c.mustCLI("", "bench", "produce", "-s", c.addrs(), "--producers", "1", "--window", "256", "--count", "0", "--duration", secs, "--topic", "rmqbench")
	t.Logf("raftmq SDK, 256 in flight:\n%s", out)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
