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
// The leader is also paused (SIGSTOP) and cut off by a partition (every
// Raft, client API and remoting connection blackholed while it runs)
// instead of killed, with write paths: the same bound holds.
// RAFTMQ_RMQ_FAILOVER_RUNS=N repeats each case N times (figures for
// docs/rocketmq.md).
func TestRocketMQFailover(t *testing.T) {
	procRequire(t)
	rlog.SetLogLevel("error")
	runs := 1
	if v := os.Getenv("RAFTMQ_RMQ_FAILOVER_RUNS"); v != "" {
		fmt.Sscan(v, &runs)
	}
	for _, tc := range []struct {
		name     string
		via      bool
		follower bool
		fault    string
	}{{"write-via-followers", true, false, "kill"}, {"leader-only", false, false, "kill"}, {"follower-kill", true, true, "kill"},
		{"leader-paused", true, false, "pause"}, {"leader-partitioned", true, false, "partition"}} {
		via, name := tc.via, tc.name
		t.Run(name, func(t *testing.T) {
			if !via && testing.Short() {
				t.Skip("the leader-only case waits up to 30 s for the client's route poll")
			}
			var windows []string
			for i := 0; i < runs; i++ {
				// A subtest each, so that each run's processes are gone
				// before the next starts.
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					w := rmqFailoverRun(t, via, tc.follower, tc.fault, i)
					windows = append(windows, w.Round(time.Millisecond).String())
				})
			}
			t.Logf("%s: windows over %d runs: %s", name, runs, strings.Join(windows, " "))
		})
	}
}

// rmqFailoverRun runs one case: SIGKILL of the leader (or, with
// killFollower, of a follower) under the send stream, or with fault
// "pause" SIGSTOP of the leader, with "partition" a cut of all its links;
// it returns the window (for a follower kill: the slowest send started
// after it).
func rmqFailoverRun(t *testing.T, via, killFollower bool, fault string, run int) time.Duration {
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	c := procStartGroup(t, localgroup.Config{Nodes: 3, Remoting: true, Partitionable: fault == "partition", ServerArgs: []string{"--namesrv", ns.Addr(), "--register-period", "2s",
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
	// A second producer (its own client instance, so its own connections)
	// sends one message at a time, 10 ms apart, as most programs do: a
	// send that reaches the leader while the killed process exits waits
	// out the client's send timeout (3 s) before its retry, and holds
	// back the sends after it.
	sp, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName(fmt.Sprintf("rmq-fo-seq-%d", run)),
		producer.WithInstanceName(fmt.Sprintf("seq-%d", run)))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Start(); err != nil {
		t.Fatal(err)
	}
	defer sp.Shutdown()
	var seqAcked []string
	var seqFirst atomic.Int64
	var seqFailed, seqSlowest atomic.Int64
	seqDone := make(chan struct{})
	go func() {
		defer close(seqDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body := fmt.Sprintf("seq-%d-%d", run, i)
			start := time.Now()
			_, err := sp.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
			end := time.Now()
			if k := killAt.Load(); k != 0 && start.UnixNano() > k-int64(time.Second) {
				if d := int64(end.Sub(start)); d > seqSlowest.Load() {
					seqSlowest.Store(d)
				}
			}
			if err != nil {
				seqFailed.Add(1)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			mu.Lock()
			seqAcked = append(seqAcked, body)
			mu.Unlock()
			if k := killAt.Load(); k != 0 && start.UnixNano() > k {
				seqFirst.CompareAndSwap(0, end.UnixNano())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
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
	if killFollower {
		return rmqFollowerKill(t, c, ns, leader, via, &mu, &sends, &wg, stop, &killAt)
	}
	kill := time.Now()
	killAt.Store(kill.UnixNano())
	switch fault {
	case "pause":
		c.pause(leader.ID)
		defer c.resume(leader.ID)
	case "partition":
		if err := c.g.Cut(leader.ID); err != nil {
			t.Fatal(err)
		}
		defer c.g.Heal(leader.ID)
	default:
		c.kill(leader.ID)
	}
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
	for seqFirst.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no send of the one-at-a-time producer started after the kill was acknowledged within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	seqWindow := time.Duration(seqFirst.Load() - kill.UnixNano())
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	<-seqDone

	// What the sends saw.
	mu.Lock()
	var acked []string
	failed, failedAfter, stuck, viaPath, after := 0, 0, 0, 0, 0
	var slowest, slowestAfter time.Duration
	var slowestAfterErr error
	for _, s := range sends {
		if d := s.end.Sub(s.start); s.start.After(kill) && d > slowestAfter {
			slowestAfter, slowestAfterErr = d, s.err
		}
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

	nAcked := len(acked) // the every-10-ms producer's
	mu.Lock()
	all := append(append([]string{}, acked...), seqAcked...)
	mu.Unlock()
	lost, twice := rmqReadBack(t, newLeader, topic, all)
	how := map[string]string{"kill": "killed", "pause": "paused", "partition": "partitioned"}[fault]
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("run %d: the one-at-a-time producer: first acknowledged send started after the leader was %s %v after it; %d failed sends; its slowest send around it %v; load average %s",
		run, how, seqWindow.Round(time.Millisecond), seqFailed.Load(), time.Duration(seqSlowest.Load()).Round(time.Millisecond), strings.TrimSpace(string(load)))
	t.Logf("run %d (write via followers %v): leader %s %s; new leader %s elected after %v, routed after %v; first acknowledged send started after the kill: %v after it; "+
		"%d sends, %d acknowledged, %d failed (%d of them started after the kill); of the %d acknowledged sends started after the kill %d went through a follower's write path; "+
		"%d sends in flight at the kill took over 1 s (slowest %v: a send on the dead leader's connection waits out its timeout); slowest send started after the kill %v (error: %v); log: %d lost, %d stored twice",
		run, via, leader.ID, how, newLeader.ID, elected.Round(time.Millisecond), routed.Round(time.Millisecond), window.Round(time.Millisecond),
		total, nAcked, failed, failedAfter, after, viaPath, stuck, slowest.Round(time.Millisecond), slowestAfter.Round(time.Millisecond), slowestAfterErr, lost, twice)
	if via && window > 5*time.Second {
		t.Errorf("with write paths, writes resumed %v after the kill; want the election's time, well under 5 s", window)
	}
	if via && seqWindow > 5*time.Second {
		t.Errorf("with write paths, the one-at-a-time producer wrote again %v after the kill; want at most the client's 3 s send timeout (a send caught by the dying process) or the election", seqWindow)
	}
	if via && viaPath == 0 {
		t.Errorf("no send after the kill went through a follower's write path")
	}
	return window
}

// rmqReadBack reads topic's 4 queues from nd with raftmq's SDK: it fails
// the test for an acknowledged body that is not in the log and for a body
// stored twice, and returns both counts.
func rmqReadBack(t *testing.T, nd *procNode, topic string, acked []string) (lost, twice int) {
	t.Helper()
	// Read the log back: every acknowledged message stored, and once.
	stored := rmqStored(t, nd, topic)
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
	if twice > 0 {
		t.Errorf("%d messages stored twice, e.g. %v", twice, dupBodies[:min(5, len(dupBodies))])
	}
	return lost, twice
}

// rmqFollowerKill SIGKILLs a follower under the send stream. A killed
// process does not unregister; with write paths, the leader stops listing
// it as live after 5 s and the name server drops its path. Meanwhile the
// producer still sends a third of its messages to that path first: each
// gets a refused connection and the client's retry moves to another
// brokerName, so no send may fail. It returns the slowest send started
// after the kill.
func rmqFollowerKill(t *testing.T, c *procCluster, ns *namesrv.Server, leader *procNode, via bool, mu *sync.Mutex, sends *[]*rmqSend, wg *sync.WaitGroup, stop chan struct{}, killAt *atomic.Int64) time.Duration {
	var victim *procNode
	for _, nd := range c.all() {
		if nd.ID != leader.ID {
			victim = nd
			break
		}
	}
	kill := time.Now()
	killAt.Store(kill.UnixNano())
	c.kill(victim.ID)
	var dropped time.Duration
	if via {
		deadline := time.Now().Add(30 * time.Second)
		for {
			g := ns.Groups()["raftmq"]
			if len(g.WritePaths) == 1 && g.WritePaths[0].NodeID != victim.ID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the killed follower's write path stayed in the route: %+v", g.WritePaths)
			}
			time.Sleep(20 * time.Millisecond)
		}
		dropped = time.Since(kill)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	mu.Lock()
	var acked []string
	failedAfter, slow, after := 0, 0, 0
	var slowest time.Duration
	for _, s := range *sends {
		if s.err == nil {
			acked = append(acked, s.body)
		}
		if !s.start.After(kill) {
			continue
		}
		after++
		if s.err != nil {
			failedAfter++
			continue
		}
		d := s.end.Sub(s.start)
		slowest = max(slowest, d)
		if d > time.Second {
			slow++
		}
	}
	mu.Unlock()
	lost, twice := rmqReadBack(t, leader, "rmq-fo", acked)
	t.Logf("follower %s killed: its write path left the route after %v (its registration stays until the expiry); of %d sends started after the kill %d failed, %d took over 1 s, the slowest %v; log: %d lost, %d stored twice",
		victim.ID, dropped.Round(time.Millisecond), after, failedAfter, slow, slowest.Round(time.Millisecond), lost, twice)
	if failedAfter > 0 {
		t.Errorf("%d sends started after a follower's kill failed; the client's retry should have moved them off its write path", failedAfter)
	}
	return slowest
}
