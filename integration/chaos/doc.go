// Package chaos is raftmq's fault-injection suite: it runs a 3-node group
// as real `raftmq server` processes, drives it with idempotent producers and
// consumers (some reading from followers) while a nemesis injects faults,
// records what every client was told, and checks afterwards that nothing
// acknowledged was lost and nothing was invented, duplicated or reordered.
//
// Parts:
//
//   - Cluster (cluster.go): a group started by internal/localgroup (the
//     binary built once by internal/testbin, nodes on free 127.0.0.1 ports,
//     each in its own directory, killed, paused and restarted by PID), plus
//     what only this suite does: a node's data on tmpfs, the repair of a node
//     (member remove, wipe, start empty, member add) and the test of when
//     the group has settled.
//
//   - Proxies (internal/faultproxy): two TCP proxies per directed pair of
//     nodes (localgroup.Config.PeerLinks). Node i's server gets
//     --raft-dial nj=<proxy> and --peer-dial <j's API address>=<proxy>, so
//     every connection i opens to j (Raft RPCs, and the node-to-node API:
//     forwarding, state polling, registration) passes through a proxy,
//     which can pass, delay, drop or blackhole it, or hold one direction
//     only. Blocking both directions between two sets is a partition;
//     holding everything i sends to j (its requests to j and its answers to
//     j's requests) is a one-way partition. Clients are not proxied.
//
//   - Every server runs with --chaos-lazyfs (raftlog/chaosfs.go): raft-wal's
//     writes reach the files at fsync only, so a SIGKILL loses what was not
//     synced; DATA/CHAOS_FSYNC_DELAY slows every fsync (slow-disk,
//     lost-unsynced). Every server also gets RunConfig.Durability
//     (-chaos.durability); under quorum-memory a write reaches the file
//     when the durability syncer fsyncs it, and the checker allows a
//     majority crash (lost-unsynced-majority, kill-leader+kill) to lose
//     what was acknowledged within its bound (MajorityCrashBound).
//
//   - Nemesis (nemesis.go): the fault kinds (AllFaults), a schedule drawn
//     from a seed (NewPlan) and their application and healing.
//
//   - segment.go: surgery on a stopped node's files for the disk faults: a
//     torn tail (cut inside the last batch), a flipped byte (in a committed
//     body, an entry frame header or a metadata entry), a damaged stable
//     store or snapshot.
//
//   - Workload (workload.go): producers (with -chaos.rich: tags,
//     properties, binary bodies, fields at their limits, requests of many
//     messages), hand-made requests at and over the limits and with reused
//     sequences (RunOddities, on by default), a transactional producer
//     whose decisions (local and check-back) are drawn before each send
//     (RunTxnProducer, and SettleTransactions after healing), consumers,
//     and the final reads, both through
//     a fresh consumer group and from every node pinned to it.
//
//   - disklog.go: the offline reader. After healing every node is stopped
//     and its stores are opened with raftlog.Open: the logs are compared
//     entry by entry, every acknowledged id is looked up on disk, and the
//     retention cuts are taken from the retain commands found there. Then
//     every node is restarted, so the final reads come from disk.
//
//   - History and Check (internal/history): the record of a run and the
//     checker, which trusts no answer of the broker about what should be
//     there; its checker_test.go feeds it hand-made histories. The process
//     and compose tests and the demo use the same checker.
//
//   - Run (runner.go): one run from start to verdict; a failed run keeps its
//     history.json, plan.txt and node logs in its directory.
//
//   - RunGroups (groups.go): several groups, each a Run of its own, and a
//     name server process that is SIGKILLed and started again, while
//     producers of the several-group client (plain, and one sending
//     transactions) write a topic shared by every group; each group's Run
//     checks its queues of that topic too.
//
// The runs are Go tests (chaos_test.go, groups_test.go): TestChaosShort, fixed schedules
// that apply every fault kind of "all" (CI), TestChaosShortMemory, one fixed
// schedule of majority crashes under quorum-memory (CI), and TestChaosCampaign, -chaos.runs
// randomized runs (make chaos). Regression tests for bugs the runs found are
// in regress_test.go. docs/RELIABILITY.md has the method and the results.
//
// Every process is started and killed by PID (and gets SIGKILL from the
// kernel if the test process dies); every wait is bounded; everything
// listens on 127.0.0.1 only.
package chaos
