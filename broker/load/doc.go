// Package load measures a node's load signal: how close the node is to
// being its group's bottleneck (1 = at capacity), from its CPU against its
// own budget (GOMAXPROCS, cgroup quota, nodes of the group on this host),
// the raft pipeline's and the produce queue's fill, and the read rate. A
// Meter holds the samples; the broker owns one, feeds it (Sample,
// ObserveProduce, ObservePull) and queries it (Value, Parts).
//
// It decides nothing: read routing (package route) compares the value with
// the threshold. It must never import the broker facade
// (github.com/raftmq/raftmq/broker) nor speak a wire protocol.
package load
