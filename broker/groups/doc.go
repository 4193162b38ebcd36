// Package groups owns the leader's soft state of consumer groups: who is a
// member (Table: heartbeats, session expiry, clustering or broadcasting
// mode) and which queues each member is assigned (queue i of a topic to
// member i mod n, or every queue to every member of a broadcasting group).
// Committed offsets and orderly-consumption locks are not soft: they are
// the replicated state's (package store), and the broker writes them.
//
// After a leader change the new leader starts empty (Table.Reset) and
// members re-register with their next heartbeat.
//
// It must never import the broker facade (github.com/raftmq/raftmq/broker)
// nor speak a wire protocol.
package groups
