package integration

// The window of writes through an unmodified RocketMQ Go producer after a
// SIGKILL of the leader, with the followers routed as write-only
// pseudo-brokers (--remoting-write-via-followers, the default) and
// without them (producers reach the new leader only on their next route
// poll, every 30 s).

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
)

// rmqSend is one SendSync of the failover stream.
type rmqSend struct {
	body       string
	start, end time.Time
	err        error
	broker     string // the brokerName that acknowledged it
}

// TestRocketMQFailover: a producer starts a SendSync every 10 ms (each in
// its own goroutine, so that a send stuck on the killed leader's
// connection does not hold back the ones after it), the leader is
// SIGKILLed, and the window is from the kill to the first acknowledgement
// of a send started after it. Every acknowledged message is read back from
// the log with raftmq's SDK; none may be lost, and none stored twice (the
// client's retries keep the message's UNIQ_KEY, which the broker
// deduplicates). With write paths the window is the election (the
// producer's own retry moves off the dead address at once), asserted under
// 5 s; without, it is reported only (it waits for the client's route poll).
// RAFTMQ_RMQ_FAILOVER_RUNS=N repeats each case N times (figures for
// docs/rocketmq.md).
func TestRocketMQFailover(t *testing.T) {
	procRequire(t)
	rlog.SetLogLevel("error")
	runs := 1
	if v := os.Getenv("RAFTMQ_RMQ_FAILOVER_RUNS"); v != "" {
		fmt.Sscan(v, &runs)
	}
	for _, via := range []bool{true, false} {
		name := "write-via-followers"
		if !via {
			name = "leader-only"
		}
		t.Run(name, func(t *testing.T) {
			if !via && testing.Short() {
				t.Skip("the leader-only case waits up to 30 s for the client's route poll")
			}
			var windows []string
			for i := 0; i < runs; i++ {
				// A subtest each, so that each run's processes are gone
				// before the next starts.
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					w := rmqFailoverRun(t, via, i)
					windows = append(windows, w.Round(time.Millisecond).String())
				})
			}
			t.Logf("%s: windows over %d runs: %s", name, runs, strings.Join(windows, " "))
		})
	}
}

func rmqFailoverRun(t *testing.T, via bool, run int) time.Duration {
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	c := procStartGroup(t, localgroup.Config{Nodes: 3, Remoting: true, ServerArgs: []string{"--namesrv", ns.Addr(), "--register-period", "2s",
		fmt.Sprintf("--remoting-write-via-followers=%v", via)}})
	leader := c.waitLeader("")
	topic := "rmq-fo"
	c.mustCLI("", "topic", "create", topic, "--queues", "4", "-s", c.addrs())
	paths := 0
	if via {
		paths = 2
	}
	deadline := time.Now().Add(30 * time.Second)
	for g := ns.Groups()["raftmq"]; g == nil || g.Topics[topic] != 4 || g.Addrs[0] != leader.Remoting || len(g.Addrs) != 3 || len(g.WritePaths) != paths; g = ns.Groups()["raftmq"] {
		if time.Now().After(deadline) {
			t.Fatalf("route never had the topic, the leader and %d write paths: %+v", paths, g)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The client's defaults but the name server: round-robin queue
	// selection, 3 s send timeout, 2 retries.
	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName(fmt.Sprintf("rmq-fo-%d", run)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	ctx := context.Background()
	for i := 0; ; i++ {
		_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprintf("warm-%d", i))))
		if err == nil {
			break
		}
		if i > 100 {
			t.Fatalf("warm-up send: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	var (
		mu     sync.Mutex
		sends  []*rmqSend
		wg     sync.WaitGroup
		killAt atomic.Int64
		first  atomic.Int64 // first ack of a send started after the kill
	)
	stop := make(chan struct{})
	ticker := time.NewTicker(10 * time.Millisecond)
	go func() {
		defer ticker.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-ticker.C:
			}
			s := &rmqSend{body: fmt.Sprintf("fo-%d-%d", run, i), start: time.Now()}
			mu.Lock()
			sends = append(sends, s)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				r, err := p.SendSync(sctx, primitive.NewMessage(topic, []byte(s.body)))
				cancel()
				end := time.Now()
				mu.Lock()
				s.end, s.err = end, err
				if err == nil && r.Status != primitive.SendOK {
					s.err = fmt.Errorf("status %d", r.Status)
				}
				if s.err == nil && r.MessageQueue != nil {
					s.broker = r.MessageQueue.BrokerName
				}
				mu.Unlock()
				if k := killAt.Load(); s.err == nil && k != 0 && s.start.UnixNano() > k {
					for {
						f := first.Load()
						if f != 0 && f <= end.UnixNano() || first.CompareAndSwap(f, end.UnixNano()) {
							break
						}
					}
				}
			}()
		}
	}()
	time.Sleep(2 * time.Second)
	kill := time.Now()
	killAt.Store(kill.UnixNano())
	c.kill(leader.ID)
	newLeader := c.waitLeader(leader.ID)
	elected := time.Since(kill)
	deadline = time.Now().Add(30 * time.Second)
	for g := ns.Groups()["raftmq"]; g == nil || g.Addrs[0] != newLeader.Remoting; g = ns.Groups()["raftmq"] {
		if time.Now().After(deadline) {
			t.Fatalf("route never named the new leader %s", newLeader.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	routed := time.Since(kill)
	deadline = time.Now().Add(60 * time.Second)
	for first.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no send started after the kill was acknowledged within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	window := time.Duration(first.Load() - kill.UnixNano())
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()

	// What the sends saw.
	mu.Lock()
	var acked []string
	failed, failedAfter, stuck, viaPath, after := 0, 0, 0, 0, 0
	var slowest time.Duration
	for _, s := range sends {
		if s.err != nil {
			failed++
			if s.start.After(kill) {
				failedAfter++
			}
			continue
		}
		acked = append(acked, s.body)
		if s.start.After(kill) {
			after++
			if strings.Contains(s.broker, "~") {
				viaPath++
			}
		} else if s.end.After(kill) {
			// In flight at the kill: one on the dead leader's connection
			// waits out its send timeout before the client retries.
			if d := s.end.Sub(s.start); d > slowest {
				slowest = d
			}
			if s.end.Sub(kill) > time.Second {
				stuck++
			}
		}
	}
	total := len(sends)
	mu.Unlock()

	// Read the log back: every acknowledged message stored, and once.
	stored := map[string]int{}
	cc, err := api.Dial(newLeader.Client)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for q := int32(0); q < 4; q++ {
		for off := uint64(0); ; {
			r, err := api.NewBrokerClient(cc).Pull(rctx, &api.PullRequest{Topic: topic, Queue: q, Offset: off, MaxMessages: 1000})
			if err != nil {
				t.Fatalf("read back queue %d at %d: %v", q, off, err)
			}
			for _, m := range r.Messages {
				stored[string(m.Body)]++
			}
			if len(r.Messages) == 0 || r.NextOffset <= off {
				break
			}
			off = r.NextOffset
		}
	}
	lost, twice := 0, 0
	for _, b := range acked {
		if stored[b] == 0 {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged %s is not in the log", b)
			}
		}
	}
	var dupBodies []string
	for b, n := range stored {
		if n > 1 {
			twice++
			dupBodies = append(dupBodies, b)
		}
	}
	sort.Strings(dupBodies)
	t.Logf("run %d (write via followers %v): leader %s killed; new leader %s elected after %v, routed after %v; first acknowledged send started after the kill: %v after it; "+
		"%d sends, %d acknowledged, %d failed (%d of them started after the kill); of the %d acknowledged sends started after the kill %d went through a follower's write path; "+
		"%d sends in flight at the kill took over 1 s (slowest %v: a send on the dead leader's connection waits out its timeout); log: %d lost, %d stored twice",
		run, via, leader.ID, newLeader.ID, elected.Round(time.Millisecond), routed.Round(time.Millisecond), window.Round(time.Millisecond),
		total, len(acked), failed, failedAfter, after, viaPath, stuck, slowest.Round(time.Millisecond), lost, twice)
	if twice > 0 {
		t.Errorf("%d messages stored twice, e.g. %v", twice, dupBodies[:min(5, len(dupBodies))])
	}
	if via && window > 5*time.Second {
		t.Errorf("with write paths, writes resumed %v after the kill; want the election's time, well under 5 s", window)
	}
	if via && viaPath == 0 {
		t.Errorf("no send after the kill went through a follower's write path")
	}
	return window
}
