// Package broker is one raftmq node as a Go service: produce with group
// commit, pull with long-polling and read routing (the suggestion), consumer
// offsets and groups, topics, status and membership. It works over a replica
// (the state machine with its typed writes, package store, and the raft
// member that applies it, package election) through the small interfaces of
// replica.go, and reads message bodies from raftlog (the log as message
// store) through Log.
//
// It must never depend on a wire protocol: gRPC lives in broker/grpcapi, and
// a second protocol (RocketMQ remoting) can sit beside it. The names it
// shares with the adapters and the SDK (delay levels, property names, system
// topics, roles) come from package mq, never from the generated api;
// nowire_test.go checks that. Lower packages never import broker.
//
// The root is a facade: config, New/Close, the interfaces it declares, the
// leader check and the public methods. Each concept it coordinates lives in
// a subpackage that never imports the facade:
//
//   - route: read routing (the suggestion policy and the view of the peers)
//   - load: the load signal
//   - batch: the produce group commit
//   - groups: consumer group membership and assignment
//   - delay: delayed and timed messages and their scheduler
//   - retry: consume-retry's rules (send-back copies, dead letters)
//   - lookup: messages by id and by key (the key index)
//   - retention: deleting old messages by whole log segments
//   - entry: the reader of a log entry into messages and queue offsets
//   - brokererr: the sentinel errors, which the facade re-exports
//   - filter: subscription expressions
//   - keyindex: the on-disk key index
//
// See DESIGN.md in this directory for its goroutines and locks.
package broker
