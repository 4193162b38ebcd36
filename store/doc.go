// Package store is the replicated state machine of one broker group member
// (FSM: topics, the per-queue index into the Raft log, consumer offsets, the
// producer dedupe table, schedule cursors, group settings, orderly-consumption
// locks, the node registry, snapshots of all of that, damage marking) and the
// typed calls that write it through election's Apply (Store). It is the only
// code that reads the state machine's interface{} answers: callers get
// typed results and this package's sentinel errors (errors.go).
//
// It must never import broker, never speak a wire protocol, never hold
// message bodies (they live in the Raft log, read through raftlog), and
// never do I/O other than its queue index and snapshots. The state machine
// is deterministic: every node applies the same entries to the same state.
//
// See DESIGN.md in this directory for the typed calls over an untyped FSM,
// the schedule queues, its goroutines and locks.
package store
