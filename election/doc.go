// Package election is the raft node of one member of a broker group: its
// configuration and timeouts, its transport (TCP, TLS, and the wrapper that
// gates this node's own vote requests), bootstrap, recovery after an unclean
// start, role and leader events and the new leader's barrier, leadership
// transfer, membership changes, stats, snapshots on demand and shutdown.
//
// It is given the state machine raft applies entries to (StateMachine) and
// hands entries to raft (Apply), but it must never read a state machine's
// answer: an ApplyFuture's Response goes to the caller untouched, and only
// the package that owns the state machine (store) types it. It must never
// import store or broker, and never expose raft's errors: callers get this
// package's sentinels (errors.go). The only raft types in its API are the
// three stores Start is given (RaftStores; raftlog opens them) and the
// raft.FSM a StateMachine is.
//
// See DESIGN.md in this directory for its wrappers, goroutines and locks.
package election
