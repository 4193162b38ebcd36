// Package entry reads messages out of a Raft log entry: the one place that
// turns a batch's bytes into messages with their queue offsets, as the
// state machine's index record of a queue in the entry (store.Location)
// describes them. Pull, lookup by id and lookup by key all read through it.
//
// It reads bytes it is given and decides nothing: it never reads the log or
// the state machine itself, never imports the broker facade
// (github.com/raftmq/raftmq/broker) and never speaks a wire protocol.
package entry
