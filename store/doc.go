// Package store is the replicated state machine (raft FSM) of a broker group:
// topics, the per-queue index into the Raft log (one record per entry and
// queue, never per message), consumer group offsets, the producer dedupe
// table and the node registry. Snapshots hold this metadata only.
//
// It must never hold message bodies (they live in the Raft log, read through
// raftlog), never do I/O other than snapshots, and never import broker.
// Everything it does is deterministic: every node applies the same entries
// to the same state.
package store
