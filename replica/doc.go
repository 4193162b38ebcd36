// Package replica is one member of a broker group's Raft cluster: it owns
// the raft node (configuration, transport, bootstrap, role changes,
// membership) and the replicated state machine it applies (topics, the
// per-queue index into the Raft log, consumer offsets, the producer dedupe
// table, the node registry, snapshots).
//
// It must never expose raft's errors, nor an FSM answer as interface{}:
// callers get typed results and this package's sentinel errors (errors.go).
// The only raft types in its API are the three stores Start is given
// (Stores; raftlog opens them). It must never hold message bodies (they
// live in the Raft log, read through raftlog), never do I/O other than
// raft's and snapshots, and never import broker. The state machine is
// deterministic: every node applies the same entries to the same state.
//
// See DESIGN.md in this directory for its wrappers, goroutines and locks.
package replica
