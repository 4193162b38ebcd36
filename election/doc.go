// Package election owns the Raft side of a node: the raft configuration and
// its validation, the TCP transport, bootstrap of a new group, role-change
// observation (with a barrier before a new leader does leader-only work),
// leadership transfer and membership changes.
//
// It must never interpret log entries (that is store/) and never exposes
// raft's errors: callers see this package's sentinel errors.
//
// Goroutines: one observer loop per node, plus one short-lived barrier
// goroutine each time the node becomes leader; Close waits for both.
package election
