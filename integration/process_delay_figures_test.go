package integration

// The figures of docs/BENCHMARKS.md "Delayed and timed messages", measured on
// three real server processes. Not part of the suite (minutes, and a few GB
// of log):
//
//	RAFTMQ_DELAY_FIGURES=1 go test -run TestDelayFigures -v -timeout 30m ./integration/
//
// RAFTMQ_DELAY_PENDING sets the backlog (default 1000000).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
)

func TestDelayFigures(t *testing.T) {
	if os.Getenv("RAFTMQ_DELAY_FIGURES") == "" {
		t.Skip("set RAFTMQ_DELAY_FIGURES=1 to measure the delayed-message figures (minutes)")
	}
	procRequire(t)
	loadBefore, _ := os.ReadFile("/proc/loadavg")
	pending := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("RAFTMQ_DELAY_PENDING")); err == nil && v > 0 {
		pending = v
	}
	c := procStartCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	for _, topic := range []string{"plain", "backlog", "burst", "steady"} {
		if _, err := cl.CreateTopic(ctx, topic, 4, false); err != nil {
			t.Fatal(err)
		}
	}
	report := []string{"| when | node | Go heap live | heap in use | RSS |", "| --- | --- | --- | --- | --- |"}
	mem := func(label string) {
		for _, nd := range c.all() {
			gc(t, nd.HTTP)
			rss := procRSS(nd.PID())
			live := promValue(t, nd.HTTP, "go_memstats_heap_alloc_bytes")
			inuse := promValue(t, nd.HTTP, "go_memstats_heap_inuse_bytes")
			line := fmt.Sprintf("| %s | %s | %.1f MiB | %.1f MiB | %.0f MiB |", label, nd.ID, live/(1<<20), inuse/(1<<20), float64(rss)/(1<<20))
			if dir := os.Getenv("RAFTMQ_DELAY_HEAP_DIR"); dir != "" {
				saveHeap(t, nd.HTTP, fmt.Sprintf("%s/%s-%s.pb.gz", dir, strings.NewReplacer(" ", "_", ",", "").Replace(label), nd.ID))
			}
			report = append(report, line)
			t.Log(line)
		}
	}
	// Other work: the latency of ordinary synchronous sends, without and
	// with the backlog.
	ordinary := func(label string) {
		p := cl.NewProducer()
		var lat []time.Duration
		for i := 0; i < 2000; i++ {
			s := time.Now()
			if _, err := p.Send(ctx, "steady", client.Message{Body: make([]byte, 100)}); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(s))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		line := fmt.Sprintf("ordinary synchronous send, 100 B, %s: p50 %s p99 %s", label, lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*99/100].Round(10*time.Microsecond))
		report = append(report, line)
		t.Log(line)
	}
	time.Sleep(3 * time.Second)
	mem("empty")
	ordinary("no delayed messages")

	// Produce throughput: a backlog of 100-byte messages at the 2h level
	// (they stay pending for the rest of the run).
	body := make([]byte, 100)
	sendMany := func(topic string, n int, mk func(i int) client.Message) time.Duration {
		p := cl.NewProducer()
		window := make(chan struct{}, 8192)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		start := time.Now()
		for i := 0; i < n; i++ {
			window <- struct{}{}
			wg.Add(1)
			p.SendAsync(topic, []client.Message{mk(i)}, func(_ []*api.Ack, err error) {
				defer wg.Done()
				<-window
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			t.Fatalf("send to %s: %v", topic, firstErr)
		}
		return time.Since(start)
	}
	// The same number of ordinary messages first: what the log cache and
	// index cost without any delay.
	d := sendMany("plain", pending, func(int) client.Message { return client.Message{Body: body} })
	line := fmt.Sprintf("produce %d ordinary messages (100 B): %.1f s, %.0f msgs/s", pending, d.Seconds(), float64(pending)/d.Seconds())
	report = append(report, line)
	t.Log(line)
	time.Sleep(5 * time.Second)
	mem(fmt.Sprintf("%d ordinary stored", pending))

	d = sendMany("backlog", pending, func(int) client.Message { return client.Message{Body: body, DelayLevel: 18} })
	line = fmt.Sprintf("produce %d delayed messages (level 18, 100 B): %.1f s, %.0f msgs/s", pending, d.Seconds(), float64(pending)/d.Seconds())
	report = append(report, line)
	t.Log(line)
	time.Sleep(5 * time.Second)
	mem(fmt.Sprintf("%d pending", pending))
	ordinary(fmt.Sprintf("%d pending", pending))

	// Delivery and consume throughput: a burst all due at one moment.
	const burst = 200_000
	due := time.Now().Add(40 * time.Second)
	d = sendMany("burst", burst, func(int) client.Message { return client.Message{Body: body, DeliverAt: due} })
	t.Logf("burst of %d sent in %.1f s", burst, d.Seconds())
	cons, err := cl.NewConsumer(client.ConsumerConfig{Topic: "burst", Group: "burst", From: "earliest", Queues: []int32{0, 1, 2, 3},
		MaxMessages: 4096, MaxBytes: 8 << 20, Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var first, last time.Time
	got := 0
	for got < burst && ctx.Err() == nil {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) > 0 && first.IsZero() {
			first = time.Now()
		}
		got += len(recs)
		last = time.Now()
	}
	cons.Close(ctx)
	line = fmt.Sprintf("burst of %d due at once: first seen %s after its time, all consumed %.1f s later: %.0f msgs/s delivered and consumed",
		burst, first.Sub(due).Round(time.Millisecond), last.Sub(first).Seconds(), float64(burst)/last.Sub(first).Seconds())
	report = append(report, line)
	t.Log(line)

	// Lateness at steady state (the backlog still pending): 500 msgs/s for
	// 60 s, half at delay levels 1 and 2, half at a time 1..5 s ahead.
	const rate, secs = 500, 60
	var mu sync.Mutex
	dueAt := map[string]time.Time{}
	var late []time.Duration
	stop := make(chan struct{})
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		cons, err := cl.NewConsumer(client.ConsumerConfig{Topic: "steady", Group: "steady", From: "earliest", Queues: []int32{0, 1, 2, 3},
			MaxMessages: 1024, MaxBytes: 4 << 20, Wait: 200 * time.Millisecond})
		if err != nil {
			t.Error(err)
			return
		}
		defer cons.Close(ctx)
		for {
			select {
			case <-stop:
				return
			default:
			}
			recs, err := cons.Poll(ctx)
			if err != nil {
				return
			}
			now := time.Now()
			mu.Lock()
			for _, r := range recs {
				if at, ok := dueAt[r.Properties[mq.PropStagedID]]; ok {
					late = append(late, now.Sub(at))
				}
			}
			mu.Unlock()
		}
	}()
	p := cl.NewProducer()
	tick := time.NewTicker(time.Second / rate)
	var swg sync.WaitGroup
	for i := 0; i < rate*secs; i++ {
		<-tick.C
		m := client.Message{Body: body}
		switch i % 4 {
		case 0:
			m.DelayLevel = 1
		case 1:
			m.DelayLevel = 2
		default:
			m.DeliverAt = time.Now().Add(time.Second + time.Duration(rand.Int63n(int64(4*time.Second))))
		}
		swg.Add(1)
		p.SendAsync("steady", []client.Message{m}, func(acks []*api.Ack, err error) {
			defer swg.Done()
			if err != nil {
				t.Errorf("steady send: %v", err)
				return
			}
			mu.Lock()
			dueAt[acks[0].Id] = client.AckDeliverAt(acks[0])
			mu.Unlock()
		})
	}
	tick.Stop()
	swg.Wait()
	time.Sleep(8 * time.Second)
	close(stop)
	cwg.Wait()
	mu.Lock()
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	n := len(late)
	if n == 0 {
		t.Fatal("no steady-state message consumed")
	}
	early := 0
	for _, l := range late {
		if l < 0 {
			early++
		}
	}
	line = fmt.Sprintf("steady %d msgs/s for %d s (%d sent, %d consumed, %d before their time): lateness p50 %s p99 %s max %s (time consumed - ack's delivery time)",
		rate, secs, rate*secs, n, early, late[n/2].Round(time.Millisecond), late[n*99/100].Round(time.Millisecond), late[n-1].Round(time.Millisecond))
	mu.Unlock()
	report = append(report, line)
	t.Log(line)
	mem(fmt.Sprintf("%d pending, after the run", pending))
	loadAfter, _ := os.ReadFile("/proc/loadavg")
	report = append(report, fmt.Sprintf("load average before: %s, after: %s", strings.TrimSpace(string(loadBefore)), strings.TrimSpace(string(loadAfter))))
	t.Log("\n" + strings.Join(report, "\n"))
}

// gc makes a node collect garbage (its heap profile endpoint with gc=1), so
// that the heap figures after it are live memory.
func gc(t *testing.T, addr string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Logf("gc of %s: %v", addr, err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// saveHeap writes a node's heap profile to file (for go tool pprof).
func saveHeap(t *testing.T, addr, file string) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap")
	if err != nil {
		t.Logf("heap of %s: %v", addr, err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Log(err)
	}
}

// procRSS is a process's resident set in bytes (0 when unknown).
func procRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// promValue reads one unlabelled gauge from a node's /metrics.
func promValue(t *testing.T, addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Logf("metrics of %s: %v", addr, err)
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}
