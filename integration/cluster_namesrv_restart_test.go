package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// clusterLoad is producers and one consumer of the several-group client
// running until stop: what was acknowledged where, and what was read.
type clusterLoad struct {
	t     *testing.T
	cl    *cluster.Cluster
	topic string

	mu     sync.Mutex
	acks   []clusterAck
	failed []string
	read   map[string]string // group/queue/offset -> body
	twice  int               // a position read again (a redelivery, not a loss)
	stop   chan struct{}
	wg     sync.WaitGroup
}

func clusterPos(group string, queue int32, off uint64) string {
	return fmt.Sprintf("%s/%d/%d", group, queue, off)
}

// clusterClientRouted is a several-group client of cfg, closed when the
// test ends, once its route of topic has queues queues.
func clusterClientRouted(t *testing.T, ctx context.Context, cfg cluster.Config, topic string, queues int) *cluster.Cluster {
	t.Helper()
	cl, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	procWaitFor(t, 60*time.Second, fmt.Sprintf("the route of %s with %d queues", topic, queues), func() (bool, string) {
		r, err := cl.Route(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		return len(r.Queues) == queues, fmt.Sprint(r.Queues)
	})
	return cl
}

// startClusterLoad starts workers producers (one send in flight each,
// every 5 ms) and a consumer of group cg polling all along.
func startClusterLoad(t *testing.T, ctx context.Context, cl *cluster.Cluster, topic, cg string, workers int) *clusterLoad {
	l := &clusterLoad{t: t, cl: cl, topic: topic, read: map[string]string{}, stop: make(chan struct{})}
	p := cl.NewProducer(client.DefaultProducerConfig())
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				body := fmt.Sprintf("w%d-%d", w, i)
				sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				as, err := p.Send(sctx, topic, cluster.Message{Message: client.Message{Body: []byte(body)}})
				cancel()
				l.mu.Lock()
				if err != nil {
					l.failed = append(l.failed, fmt.Sprintf("%s at %s: %v", body, time.Now().Format("15:04:05.000"), err))
				} else {
					l.acks = append(l.acks, clusterAck{body: body, group: as[0].Group, queue: as[0].Queue, off: as[0].Offset, at: time.Now()})
				}
				l.mu.Unlock()
			}
		}()
	}
	ccfg := client.DefaultConsumerConfig(topic, cg)
	ccfg.Wait = 200 * time.Millisecond
	cons, err := cl.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: ccfg})
	if err != nil {
		t.Fatal(err)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cons.Close(cctx)
			cancel()
		}()
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			recs, err := cons.Poll(pctx)
			cancel()
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			l.mu.Lock()
			for _, r := range recs {
				k := clusterPos(r.Group, r.Queue, r.Offset)
				if _, ok := l.read[k]; ok {
					l.twice++
				}
				l.read[k] = string(r.Body)
			}
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { l.halt() })
	return l
}

// producing stops the producers only, once.
func (l *clusterLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// counts returns acknowledgements per group since from, and how many the
// consumer read in all.
func (l *clusterLoad) counts(from time.Time) (map[string]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	per := map[string]int{}
	for _, a := range l.acks {
		if a.at.After(from) {
			per[a.group]++
		}
	}
	return per, len(l.read)
}

// sendsFailed fails the test when a send of the load failed (during what);
// it returns how many were acknowledged.
func (l *clusterLoad) sendsFailed(what string) int {
	l.t.Helper()
	l.mu.Lock()
	failed := append([]string{}, l.failed...)
	acked := len(l.acks)
	l.mu.Unlock()
	if len(failed) > 0 {
		l.t.Fatalf("%d of %d sends failed %s, first: %s", len(failed), len(failed)+acked, what, failed[0])
	}
	return acked
}

// readBack reads the topic with a new consumer of group cg until every
// acknowledged message has been read at its group, queue and offset (by it
// or by the load's own consumer).
func (l *clusterLoad) readBack(ctx context.Context, cg string) {
	l.t.Helper()
	ccfg := client.DefaultConsumerConfig(l.topic, cg)
	ccfg.Wait = 200 * time.Millisecond
	cons, err := l.cl.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: ccfg})
	if err != nil {
		l.t.Fatal(err)
	}
	defer cons.Close(context.Background())
	procWaitFor(l.t, 120*time.Second, "every acknowledged message read", func() (bool, string) {
		recs, err := cons.Poll(ctx)
		if err != nil {
			return false, err.Error()
		}
		l.mu.Lock()
		for _, r := range recs {
			l.read[clusterPos(r.Group, r.Queue, r.Offset)] = string(r.Body)
		}
		l.mu.Unlock()
		ex, n := l.missing()
		return n == 0, fmt.Sprintf("%d acknowledged messages not read, e.g. %v", n, ex)
	})
}

// missing lists acknowledged messages the consumer has not read at their
// group, queue and offset (at most 5), and how many there are.
func (l *clusterLoad) missing() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ex []string
	n := 0
	for _, a := range l.acks {
		if l.read[clusterPos(a.group, a.queue, a.off)] != a.body {
			n++
			if len(ex) < 5 {
				ex = append(ex, fmt.Sprintf("%s at %s", a.body, clusterPos(a.group, a.queue, a.off)))
			}
		}
	}
	return ex, n
}

// The name server is SIGKILLed and started again on the same address
// while producers and a consumer of the several-group client run against
// two groups: they carry on over the routes they know meanwhile and after
// it is back (the nodes register again within their --register-period),
// no send fails, both groups keep taking writes, and the consumer reads
// every acknowledged message at its group, queue and offset.
func TestClusterNameServerRestartUnderLoad(t *testing.T) {
	procRequire(t)
	ports, err := localgroup.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	nsAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	nsLog := filepath.Join(t.TempDir(), "namesrv.log")
	var ns localgroup.Process
	startNS := func() {
		if _, err := ns.Launch(procBinary(t), []string{"namesrv", "--listen", nsAddr, "--expiry", "30s"}, nsLog); err != nil {
			t.Fatal(err)
		}
	}
	startNS()
	t.Cleanup(func() {
		ns.SignalAndWait(syscall.SIGKILL, 10*time.Second)
	})
	groups := map[string]*procCluster{}
	for _, name := range []string{"ga", "gb"} {
		groups[name] = procStartGroup(t, localgroup.Config{Nodes: 3, ServerArgs: []string{
			"--broker-name", name, "--cluster", "c1", "--namesrv", nsAddr, "--register-period", "1s"}})
	}
	ga := groups["ga"]
	ga.mustCLI("", "cluster", "health", "--namesrv", nsAddr, "--wait", "60s", "--groups", "2")
	ga.mustCLI("", "topic", "create", "orders", "--queues", "4", "--namesrv", nsAddr)

	cfg := cluster.DefaultConfig()
	cfg.NameServers = []string{nsAddr}
	cfg.RefreshInterval = time.Second // ask the name server often, also while it is down or empty
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := clusterClientRouted(t, ctx, cfg, "orders", 4)

	load := startClusterLoad(t, ctx, cl, "orders", "cg", 4)
	time.Sleep(3 * time.Second)
	killed := time.Now()
	if _, err := ns.SignalAndWait(syscall.SIGKILL, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("name server SIGKILLed")
	time.Sleep(4 * time.Second) // several refreshes fail meanwhile
	down, _ := load.counts(killed)
	restarted := time.Now()
	startNS()
	t.Logf("name server started again on %s; acks per group while it was down: %v", nsAddr, down)
	// Right after the restart it knows no group until they register again.
	time.Sleep(6 * time.Second)
	load.halt()
	after, _ := load.counts(restarted.Add(3 * time.Second))
	t.Logf("acks per group from 3s after the restart: %v", after)

	acked := load.sendsFailed("around the name server restart")
	for _, g := range []string{"ga", "gb"} {
		if down[g] == 0 || after[g] == 0 {
			t.Fatalf("group %s: %d acks while the name server was down, %d after it came back", g, down[g], after[g])
		}
	}
	// The name server knows both groups again.
	ga.mustCLI("", "cluster", "health", "--namesrv", nsAddr, "--wait", "60s", "--groups", "2")

	// A new consumer of the same group reads what the first had not
	// processed; together they read every acknowledged message.
	load.readBack(ctx, "cg")
	t.Logf("%d acknowledged messages all read back (%d positions read twice, redeliveries)", acked, load.twice)
}
