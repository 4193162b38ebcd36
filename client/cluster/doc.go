// Package cluster is the Go SDK's view of a raftmq cluster: several broker
// groups (each a Raft group with its own leader) that register with name
// servers, and topics whose queues are spread over them.
//
// A Cluster asks a name server which groups hold a topic and at which
// client API addresses, and keeps one client.Client per group underneath:
// each follows its own group's leader and read suggestions, unchanged. A
// queue of the cluster is (group, queue). The Producer spreads messages
// over all queues of all groups and moves unpinned writes off a group that
// is slow or failing (RocketMQ's latency-fault avoidance); the Consumer runs
// one client.Consumer per group, joining each group's coordinator, so a
// consumer group balances the queues of every group over its members.
//
// It owns routing between groups only. What happens inside a group
// (leader changes, retries, idempotent produce, follower reads) is the
// client package's. It speaks the name server's remoting protocol through
// package remoting and never imports server packages.
//
// Goroutines: a Cluster runs one route refresher (stopped by Close); a
// Consumer runs one poller per group (stopped by its Close).
package cluster
