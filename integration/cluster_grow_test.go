package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
)

// clusterMember is one member of a consumer group polling in its own
// goroutine: what it read and the queues it held after its last poll.
type clusterMember struct {
	id       string
	cn       *cluster.Consumer
	mu       sync.Mutex
	assigned []cluster.Queue
	err      error
}

// A topic on two 3-node groups grows onto a third group started later,
// without moving data: `topic update --add-queues --groups` through the
// name server creates it there, refuses a group that holds it, and the
// routes then list the third group's queues. Producers through the name
// server (a new CLI process, and an SDK producer after its route refresh)
// write to the new group; a consumer group of two members balances the
// queues of all three groups: each queue read by one member, every
// acknowledged message read, nothing read twice.
func TestClusterGrowTopicOntoAThirdGroup(t *testing.T) {
	procRequire(t)
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	startGroup := func(name string) *procCluster {
		return procStartGroup(t, localgroup.Config{Nodes: 3, Remoting: true, ServerArgs: []string{
			"--broker-name", name, "--cluster", "c1", "--namesrv", ns.Addr(), "--register-period", "2s"}})
	}
	ga := startGroup("ga")
	startGroup("gb")
	ga.mustCLI("", "cluster", "health", "--namesrv", ns.Addr(), "--wait", "60s", "--groups", "2")
	ga.mustCLI("", "topic", "create", "orders", "--queues", "4", "--namesrv", ns.Addr())

	cfg := cluster.DefaultConfig()
	cfg.NameServers = []string{ns.Addr()}
	cfg.RefreshInterval = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := clusterClientRouted(t, ctx, cfg, "orders", 4)

	// Two members of consumer group cg, polling all along.
	var (
		readMu sync.Mutex
		readBy = map[string][]string{} // group/queue/offset -> members that read it
		bodyAt = map[string]string{}
	)
	stopPoll := make(chan struct{})
	var pollers sync.WaitGroup
	var members []*clusterMember
	for _, id := range []string{"m0", "m1"} {
		cc := client.DefaultConsumerConfig("orders", "cg")
		cc.MemberID = id
		cc.Wait = 200 * time.Millisecond
		cn, err := cl.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: cc})
		if err != nil {
			t.Fatal(err)
		}
		m := &clusterMember{id: id, cn: cn}
		members = append(members, m)
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			for {
				select {
				case <-stopPoll:
					return
				default:
				}
				recs, err := m.cn.Poll(ctx)
				readMu.Lock()
				for _, r := range recs {
					k := fmt.Sprintf("%s/%d/%d", r.Group, r.Queue, r.Offset)
					readBy[k] = append(readBy[k], m.id)
					bodyAt[k] = string(r.Body)
				}
				readMu.Unlock()
				m.mu.Lock()
				m.assigned, m.err = m.cn.Assigned(), err
				m.mu.Unlock()
			}
		}()
	}
	defer func() {
		close(stopPoll)
		pollers.Wait()
		for _, m := range members {
			cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
			m.cn.Close(cctx)
			ccancel()
		}
	}()
	// balanced waits until each member holds a queue of every group named
	// (two queues each: one per member), none held by both. Only then is
	// anything produced, so that no queue moves while it has messages to
	// read: a member that has not joined a group's consumer group yet
	// would take a queue over from the other, and both would read it until
	// the other's next heartbeat (at least once, not exactly once).
	balanced := func(groups ...string) {
		t.Helper()
		procWaitFor(t, 90*time.Second, fmt.Sprintf("the queues of %v balanced over both members", groups), func() (bool, string) {
			held := map[cluster.Queue]string{}
			var why []string
			for _, m := range members {
				m.mu.Lock()
				as, err := m.assigned, m.err
				m.mu.Unlock()
				why = append(why, fmt.Sprintf("%s: %v (%v)", m.id, as, err))
				of := map[string]int{}
				for _, q := range as {
					if o, ok := held[q]; ok {
						return false, fmt.Sprintf("%v held by %s and %s; %s", q, o, m.id, strings.Join(why, "; "))
					}
					held[q] = m.id
					of[q.Group]++
				}
				for _, g := range groups {
					if of[g] != 1 {
						return false, strings.Join(why, "; ")
					}
				}
			}
			return len(held) == 2*len(groups), strings.Join(why, "; ")
		})
	}
	balanced("ga", "gb")

	p := cl.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	acked := map[string]string{} // group/queue/offset -> body
	perGroup := map[string]int{}
	send := func(prefix string, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			body := fmt.Sprintf("%s-%d", prefix, i)
			as, err := p.Send(ctx, "orders", cluster.Message{Message: client.Message{Body: []byte(body)}})
			if err != nil {
				t.Fatalf("send %s: %v", body, err)
			}
			acked[fmt.Sprintf("%s/%d/%d", as[0].Group, as[0].Queue, as[0].Offset)] = body
			perGroup[as[0].Group]++
		}
	}
	send("before", 40)
	if perGroup["ga"] == 0 || perGroup["gb"] == 0 {
		t.Fatalf("sends before the grow per group: %v", perGroup)
	}

	// The third group; the topic grows onto it, and only onto it.
	gc := startGroup("gc")
	ga.mustCLI("", "cluster", "health", "--namesrv", ns.Addr(), "--wait", "60s", "--groups", "3")
	out, errOut, err := ga.cli("", "topic", "update", "orders", "--add-queues", "2", "--groups", "gc,ga", "--namesrv", ns.Addr())
	if err == nil || !strings.Contains(errOut, "group ga") || !strings.Contains(errOut, "holds the topic already") {
		t.Fatalf("grow onto ga, which holds the topic: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if _, err := gc.client().DescribeTopic(ctx, "orders"); err == nil {
		t.Fatal("the refused grow created the topic on gc")
	}
	out = ga.mustCLI("", "topic", "update", "orders", "--add-queues", "2", "--groups", "gc", "--namesrv", ns.Addr())
	if !strings.Contains(out, "added topic orders with 2 queues on group gc") || !strings.Contains(out, "topic orders: 6 queues, 2 on ga, 2 on gb, 2 on gc") {
		t.Fatalf("grow onto gc:\n%s", out)
	}
	for g, want := range map[string]int{"ga": 2, "gb": 2, "gc": 2} {
		r, err := cl.Refresh(ctx)
		if err != nil || r[g].Topics["orders"] != want {
			t.Fatalf("route of %s after the grow: %v %v", g, r[g], err)
		}
	}
	balanced("ga", "gb", "gc")

	// A new CLI process through the name server writes to all three groups.
	var lines []string
	for i := 0; i < 30; i++ {
		lines = append(lines, fmt.Sprintf("cli-%d", i))
	}
	out = ga.mustCLI(strings.Join(lines, "\n")+"\n", "produce", "-t", "orders", "--namesrv", ns.Addr(), "--batch", "1", "--format", "json")
	cliGroups := map[string]int{}
	for _, a := range procJSONLines[struct {
		Group  string `json:"group"`
		Queue  int32  `json:"queue"`
		Offset uint64 `json:"offset"`
		Body   string `json:"body"`
	}](t, out) {
		cliGroups[a.Group]++
		acked[fmt.Sprintf("%s/%d/%d", a.Group, a.Queue, a.Offset)] = a.Body
	}
	if len(cliGroups) != 3 || cliGroups["ga"]+cliGroups["gb"]+cliGroups["gc"] != 30 {
		t.Fatalf("CLI produce after the grow per group: %v, want 30 over ga, gb and gc", cliGroups)
	}
	// The SDK producer made before the grow takes gc on at its refresh.
	perGroup = map[string]int{}
	send("after", 60)
	if perGroup["gc"] == 0 || perGroup["ga"] == 0 || perGroup["gb"] == 0 {
		t.Fatalf("SDK sends after the grow per group: %v", perGroup)
	}

	procWaitFor(t, 120*time.Second, "every acknowledged message read", func() (bool, string) {
		readMu.Lock()
		defer readMu.Unlock()
		missing := 0
		for k := range acked {
			if len(readBy[k]) == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d not read yet", missing, len(acked))
	})
	readMu.Lock()
	defer readMu.Unlock()
	queueReaders := map[string]map[string]bool{}
	perMember := map[string]int{}
	for k, by := range readBy {
		if len(by) != 1 {
			t.Errorf("%s read %d times (by %v)", k, len(by), by)
		}
		q := k[:strings.LastIndex(k, "/")]
		if queueReaders[q] == nil {
			queueReaders[q] = map[string]bool{}
		}
		for _, m := range by {
			queueReaders[q][m] = true
			perMember[m]++
		}
		if want, ok := acked[k]; ok && bodyAt[k] != want {
			t.Errorf("acked %s at %s, read %q there", want, k, bodyAt[k])
		}
	}
	if len(readBy) != len(acked) {
		t.Errorf("read %d messages, acknowledged %d", len(readBy), len(acked))
	}
	qs := sortedKeysOf(queueReaders)
	if len(qs) != 6 {
		t.Errorf("messages read from queues %v, want all 6", qs)
	}
	for _, q := range qs {
		if len(queueReaders[q]) != 1 {
			t.Errorf("queue %s read by %v, want one member", q, queueReaders[q])
		}
	}
	if perMember["m0"] == 0 || perMember["m1"] == 0 {
		t.Errorf("reads per member %v: want both", perMember)
	}

	// topic describe and list through the name server: one row per group.
	var desc []struct {
		Group  string `json:"group"`
		Name   string `json:"name"`
		Queues []struct {
			MaxOffset uint64 `json:"max_offset"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "topic", "describe", "orders", "--namesrv", ns.Addr(), "--json")), &desc); err != nil {
		t.Fatal(err)
	}
	var stored uint64
	for i, d := range desc {
		if d.Group != []string{"ga", "gb", "gc"}[min(i, 2)] || d.Name != "orders" || len(d.Queues) != 2 {
			t.Errorf("describe row %d: %+v", i, d)
		}
		for _, q := range d.Queues {
			stored += q.MaxOffset
		}
	}
	if len(desc) != 3 || stored != uint64(len(acked)) {
		t.Errorf("describe through the name server: %d groups, %d messages stored, want 3 and %d: %+v", len(desc), stored, len(acked), desc)
	}
	if out := ga.mustCLI("", "topic", "list", "--namesrv", ns.Addr()); strings.Count(out, "orders ") != 3 || !strings.Contains(out, "GROUP") {
		t.Errorf("topic list through the name server:\n%s", out)
	}
	t.Logf("%d acknowledged messages read once each; per member %v; queues by member %v", len(acked), perMember, queueReaders)
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
