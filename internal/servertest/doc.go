// Package servertest starts in-process raftmq groups for tests, as
// net/http/httptest starts HTTP servers: n real server.Server nodes (real
// raft-wal with fsync in temp dirs, the gRPC client API on loopback), raft
// over loopback TCP or, with InMemory, over raft's in-memory transport.
// Tests then find the leader, kill, stop and restart nodes, and cut a node
// off from the others.
//
// Partition cuts raft traffic only, in both modes: with InMemory it
// disconnects the node's in-memory transport from every other one (both
// directions); over TCP every direction of raft traffic between two nodes
// goes through its own proxy (none with Direct), and Partition blocks the
// node's proxies. The nodes' gRPC traffic to each other (forwarding to the
// leader, state polling) and the client API stay up.
//
// Everything a Cluster starts stops in t.Cleanup.
//
// It owns nothing a production node runs: it only starts server.Server
// nodes with test settings and must never be imported outside tests.
package servertest
