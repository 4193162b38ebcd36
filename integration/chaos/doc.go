// Package chaos is raftmq's fault-injection suite: it runs a 3-node group
// as real `raftmq server` processes, drives it with idempotent producers and
// consumers (some reading from followers) while a nemesis injects faults,
// records what every client was told, and checks afterwards that nothing
// acknowledged was lost and nothing was invented, duplicated or reordered.
//
// Parts:
//
//   - Cluster (cluster.go): builds the binary, starts nodes on free
//     127.0.0.1 ports, each in its own data directory, kills, pauses and
//     restarts them by PID, repairs a node (member remove, wipe, start empty,
//     member add) and says when the group has settled.
//   - Proxy (proxy.go): one TCP proxy per directed pair of nodes. Node i's
//     server gets --raft-dial nj=<proxy(i->j)>, so the Raft RPCs i initiates
//     towards j (and their responses, on the same connection) pass through
//     proxy(i->j), which can pass, delay, drop or blackhole them. Blocking
//     both directions between two sets is a partition; one direction, a
//     one-way partition. The client API is not proxied.
//   - Nemesis (nemesis.go): the fault kinds (AllFaults), a schedule drawn
//     from a seed (NewPlan) and their application and healing.
//   - segment.go: raft-wal segment surgery for the disk faults: a torn tail
//     (cut inside the last batch) and a flipped byte (in a committed body or
//     an entry frame header).
//   - Workload (workload.go): producers, consumers and the final reads, both
//     through a fresh consumer group and from every node pinned to it.
//   - History and Check (history.go, checker.go): the record of a run and
//     the checker; checker_test.go feeds it hand-made histories.
//   - Run (runner.go): one run from start to verdict; a failed run keeps its
//     history.json, plan.txt and node logs in its directory.
//
// The runs are Go tests (chaos_test.go): TestChaosShort, fixed schedules
// that apply every fault kind (CI), and TestChaosCampaign, -chaos.runs
// randomized runs (make chaos). Regression tests for bugs the runs found are
// in regress_test.go. docs/RELIABILITY.md has the method and the results.
//
// Every process is started and killed by PID (and gets SIGKILL from the
// kernel if the test process dies); every wait is bounded; everything
// listens on 127.0.0.1 only.
package chaos
