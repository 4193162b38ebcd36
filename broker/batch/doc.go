// Package batch is the produce group commit: a Batcher takes every produce
// request waiting right now (up to MaxBatchBytes), hands them to the
// replica as one Raft entry without waiting (RunBatch), and answers each
// request in the order raft commits the entries (RunComplete). A Budget
// bounds the bytes of requests a node holds.
//
// It decides nothing about a request: the broker validates it, picks its
// queues and stages it before it is queued, and maps the answers. It must
// never import the broker facade (github.com/raftmq/raftmq/broker) nor
// speak a wire protocol.
package batch
