package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runGroups runs RunGroups and fails t with the way to reproduce the run
// when it finds something.
func runGroups(t *testing.T, cfg GroupsConfig) *GroupsResult {
	t.Helper()
	cfg.Known = knownKinds()
	cfg.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+8*time.Minute)
	defer cancel()
	res := RunGroups(ctx, cfg)
	t.Log(res.Line())
	if !res.OK() {
		var vs []string
		for i, r := range res.Runs {
			if r == nil {
				continue
			}
			if r.Report != nil {
				for _, v := range r.Report.Violations {
					vs = append(vs, fmt.Sprintf("  %s: %s", res.Names[i], v))
				}
			}
			if r.Shared != nil {
				for _, v := range r.Shared.Violations {
					vs = append(vs, fmt.Sprintf("  %s, shared topic: %s", res.Names[i], v))
				}
			}
		}
		t.Errorf("chaos run over %d groups seed=%d failed; reproduce with -chaos.groups=%d -chaos.seed=%d -chaos.runs=1 -chaos.duration=%s\n"+
			"histories, schedules and node logs: %s\n%s", len(res.Names), cfg.Seed, len(res.Names), cfg.Seed, cfg.Duration, res.Dir, strings.Join(vs, "\n"))
	}
	return res
}

// TestChaosGroupsShort is the fixed-seed run over two groups: a name
// server that is SIGKILLed and started again on the same address during
// the fault phase, each group a fixed schedule of its own, producers of
// the several-group client writing a topic over both groups all along.
// With -chaos.txn (the default) a transactional producer of that client
// writes the shared topic too. Every group's run checks its own topic and
// its queues of the shared one from the logs on disk, a fresh consumer
// group and every node.
func TestChaosGroupsShort(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the run over two groups takes about a minute")
	}
	dir, bin := setup(t)
	plans := []*Plan{
		{Seed: 201, DiskNode: -1, LoadThreshold: "0.05", RunAll: true, Episodes: []Episode{
			ep(31, 1500*time.Millisecond, FaultKillLeader),
			ep(32, 1500*time.Millisecond, FaultPartitionLeader),
			ep(33, 1000*time.Millisecond, FaultPause),
		}},
		{Seed: 202, DiskNode: -1, LoadThreshold: "0.8", RunAll: true, Episodes: []Episode{
			ep(34, 1500*time.Millisecond, FaultPartitionOneWay, FaultDelay),
			ep(35, 1500*time.Millisecond, FaultKill),
			ep(36, 1500*time.Millisecond, FaultKillLeader),
		}},
	}
	res := runGroups(t, GroupsConfig{Groups: 2, NameServerFaults: true, Plans: plans, RunConfig: RunConfig{Bin: bin,
		Dir: filepath.Join(dir, fmt.Sprintf("groups-short-%d", time.Now().UnixNano())), Seed: 201, Duration: 12 * time.Second,
		Workers: 3, Keep: *flagKeep, Rich: *flagRich, Transactions: *flagTxn, Oddities: oddities(0)}})
	if res.NameServerKills == 0 {
		t.Errorf("the name server was never killed: the run did not exercise it")
	}
	for i, r := range res.Runs {
		if r == nil {
			continue
		}
		name := res.Names[i]
		if res.SharedAcked[name] == 0 {
			t.Errorf("group %s took no write of the shared topic", name)
		}
		if r.Shared != nil && r.Shared.Deliveries == 0 {
			t.Errorf("the shared topic's live consumer read nothing from group %s", name)
		}
		if *flagTxn && r.Shared != nil && (r.Shared.TxnCommitted == 0 || r.Shared.TxnRolledBack == 0) {
			t.Errorf("group %s: the several-group client's transactions: %d committed, %d rolled back; want some of each",
				name, r.Shared.TxnCommitted, r.Shared.TxnRolledBack)
		}
		for _, e := range plans[i].Episodes {
			for _, k := range e.Kinds {
				if r.Applied[k] == 0 {
					t.Errorf("group %s: fault %s was not applied", name, k)
				}
			}
		}
	}
}
