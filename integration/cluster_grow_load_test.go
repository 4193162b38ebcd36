package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
)

// A third group joins a running two-group cluster while producers and a
// consumer of the several-group client run, and a topic is grown onto it
// (`topic update --add-queues --groups`): no send fails, the new group's
// queues take writes once the producers' routes refresh, the consumer
// picks them up, and every acknowledged message is read at its group,
// queue and offset.
func TestClusterThirdGroupUnderLoad(t *testing.T) {
	procRequire(t)
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	startGroup := func(name string) *procCluster {
		return procStartGroup(t, localgroup.Config{Nodes: 3, ServerArgs: []string{
			"--broker-name", name, "--cluster", "c1", "--namesrv", ns.Addr(), "--register-period", "1s"}})
	}
	ga := startGroup("ga")
	startGroup("gb")
	ga.mustCLI("", "cluster", "health", "--namesrv", ns.Addr(), "--wait", "60s", "--groups", "2")
	ga.mustCLI("", "topic", "create", "orders", "--queues", "4", "--namesrv", ns.Addr())

	cfg := cluster.DefaultConfig()
	cfg.NameServers = []string{ns.Addr()}
	cfg.RefreshInterval = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := clusterClientRouted(t, ctx, cfg, "orders", 4)

	load := startClusterLoad(t, ctx, cl, "orders", "cg", 4)
	time.Sleep(2 * time.Second)
	startGroup("gc") // starts while the others take writes
	ga.mustCLI("", "cluster", "health", "--namesrv", ns.Addr(), "--wait", "60s", "--groups", "3")
	out := ga.mustCLI("", "topic", "update", "orders", "--add-queues", "2", "--groups", "gc", "--namesrv", ns.Addr())
	grown := time.Now()
	t.Logf("topic update --add-queues 2 --groups gc:\n%s", out)
	procWaitFor(t, 60*time.Second, "writes to gc under load", func() (bool, string) {
		per, _ := load.counts(grown)
		return per["gc"] >= 50, fmt.Sprintf("acks per group since the grow: %v", per)
	})
	time.Sleep(2 * time.Second)
	load.halt()
	per, _ := load.counts(grown)
	t.Logf("acks per group since the grow: %v", per)

	acked := load.sendsFailed("around the grow")
	if per["ga"] == 0 || per["gb"] == 0 || per["gc"] == 0 {
		t.Fatalf("acks per group since the grow: %v, want all three", per)
	}
	load.readBack(ctx, "cg")
	readGC := 0
	load.mu.Lock()
	for k := range load.read {
		if k[:3] == "gc/" {
			readGC++
		}
	}
	load.mu.Unlock()
	t.Logf("%d acknowledged messages all read back, %d of them from gc (%d positions read twice, redeliveries)", acked, readGC, load.twice)
}
