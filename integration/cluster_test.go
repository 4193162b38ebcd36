package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
)

type clusterAck struct {
	body  string
	group string
	queue int32
	off   uint64
	at    time.Time
}

// Two 3-node groups and a name server: a topic across both, produced and
// consumed through the name server with the CLI and the SDK; one group's
// leader is SIGKILLed under load: the other group's writes never pause,
// the killed group recovers, and every acknowledged message is read back
// from its group, queue and offset.
func TestClusterTwoGroupsThroughTheNameServer(t *testing.T) {
	procRequire(t)
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	groups := map[string]*procCluster{}
	for _, name := range []string{"ga", "gb"} {
		groups[name] = procStartGroup(t, localgroup.Config{Nodes: 3, Remoting: true, ServerArgs: []string{
			"--broker-name", name, "--cluster", "c1", "--namesrv", ns.Addr(), "--register-period", "2s"}})
	}
	ga := groups["ga"]
	ga.mustCLI("", "cluster", "health", "--namesrv", ns.Addr(), "--wait", "60s", "--groups", "2")

	// The CLI: a topic over both groups, produce and consume through the
	// name server.
	out := ga.mustCLI("", "topic", "create", "orders", "--queues", "4", "--namesrv", ns.Addr())
	if !strings.Contains(out, "2 queues on group ga") || !strings.Contains(out, "2 queues on group gb") {
		t.Fatalf("topic create over the cluster:\n%s", out)
	}
	var st []struct {
		Group   string `json:"group"`
		Leader  string `json:"leader_id"`
		Healthy bool   `json:"healthy"`
		Nodes   []any  `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "cluster", "status", "--namesrv", ns.Addr(), "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || !st[0].Healthy || !st[1].Healthy || len(st[0].Nodes) != 3 || st[0].Leader == "" {
		t.Fatalf("cluster status: %+v", st)
	}
	cfg := cluster.DefaultConfig()
	cfg.NameServers = []string{ns.Addr()}
	cfg.FaultPenalty = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := clusterClientRouted(t, ctx, cfg, "orders", 4)
	var lines []string
	for i := 0; i < 20; i++ {
		lines = append(lines, fmt.Sprintf("cli-%d", i))
	}
	out = ga.mustCLI(strings.Join(lines, "\n")+"\n", "produce", "-t", "orders", "--namesrv", ns.Addr(), "--batch", "1", "--format", "json")
	perGroup := map[string]int{}
	for _, a := range procJSONLines[struct {
		Group string `json:"group"`
	}](t, out) {
		perGroup[a.Group]++
	}
	if perGroup["ga"] == 0 || perGroup["gb"] == 0 || perGroup["ga"]+perGroup["gb"] != 20 {
		t.Fatalf("CLI produce spread %v, want 20 over both groups", perGroup)
	}
	out = ga.mustCLI("", "consume", "-t", "orders", "--namesrv", ns.Addr(), "--group", "cli-cg", "--format", "json")
	got := map[string]bool{}
	for _, m := range procJSONLines[struct {
		Group string `json:"group"`
		Body  string `json:"body"`
	}](t, out) {
		got[m.Body] = true
	}
	for _, l := range lines {
		if !got[l] {
			t.Fatalf("CLI consume missed %s:\n%s", l, procCut(out, 3000))
		}
	}

	// The SDK under load; kill ga's leader.
	p := cl.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	var (
		mu     sync.Mutex
		acks   []clusterAck
		failed []string
		wg     sync.WaitGroup
	)
	stop := make(chan struct{})
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("w%d-%d", w, i)
				sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
				as, err := p.Send(sctx, "orders", cluster.Message{Message: client.Message{Body: []byte(body)}})
				scancel()
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", body, err))
				} else {
					acks = append(acks, clusterAck{body: body, group: as[0].Group, queue: as[0].Queue, off: as[0].Offset, at: time.Now()})
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(3 * time.Second)
	leader := ga.waitLeader("")
	killed := time.Now()
	ga.signal(leader.ID, syscall.SIGKILL)
	newLeader := ga.waitLeader(leader.ID)
	t.Logf("ga: killed %s; %s leads after %v", leader.ID, newLeader.ID, time.Since(killed))
	// Long enough for the penalty to end and a probe to let ga back in.
	time.Sleep(10 * time.Second)
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d sends failed, first: %s", len(failed), failed[0])
	}
	// gb never paused: its acks keep coming around the kill.
	var last time.Time
	var worst time.Duration
	counts := map[string][2]int{} // group -> acks before, after the kill
	for _, a := range acks {
		c := counts[a.group]
		if a.at.Before(killed) {
			c[0]++
		} else {
			c[1]++
		}
		counts[a.group] = c
		if a.group != "gb" || a.at.Before(killed.Add(-time.Second)) {
			continue
		}
		if !last.IsZero() && a.at.Sub(last) > worst {
			worst = a.at.Sub(last)
		}
		last = a.at
	}
	t.Logf("acks per group (before, after the kill): %v; longest gap between gb's acks from 1s before the kill: %v", counts, worst)
	if worst > 2*time.Second {
		t.Fatalf("gb's writes paused for %v while ga failed over", worst)
	}
	var gaAfter int
	for _, a := range acks {
		if a.group == "ga" && a.at.After(killed.Add(5*time.Second)) {
			gaAfter++
		}
	}
	if gaAfter == 0 {
		t.Fatalf("ga took no unpinned writes after it recovered: %v", counts)
	}

	// Read every queue of every group back: each ack at its place.
	cfgc := client.DefaultConsumerConfig("orders", "verify")
	cfgc.Wait = 200 * time.Millisecond
	cons, err := cl.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: cfgc})
	if err != nil {
		t.Fatal(err)
	}
	end, err := cl.EndOffsets(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	procWaitFor(t, 120*time.Second, "every queue of every group read back", func() (bool, string) {
		recs, err := cons.Poll(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range recs {
			stored[fmt.Sprintf("%s/%d/%d", r.Group, r.Queue, r.Offset)] = string(r.Body)
		}
		return cons.CaughtUp(end), fmt.Sprintf("%d read of %v", len(stored), end)
	})
	cons.Close(ctx)
	for _, a := range acks {
		if b := stored[fmt.Sprintf("%s/%d/%d", a.group, a.queue, a.off)]; b != a.body {
			t.Fatalf("acked %s at %s/%d/%d, stored there: %q", a.body, a.group, a.queue, a.off, b)
		}
	}
	t.Logf("%d acknowledged messages read back from both groups", len(acks))
}
