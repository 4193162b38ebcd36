// Package remoting serves a broker over RocketMQ's remoting protocol, so
// that unmodified RocketMQ clients produce to and consume from a raftmq
// group, and registers the node with RocketMQ-style name servers (package
// namesrv).
//
// Like broker/grpcapi it encodes, decodes and forwards, and decides nothing
// the broker service does not: a request becomes one broker call; its
// answer, or its error, becomes RocketMQ's response code (codes.go, the one
// place errors are translated). A call the broker refuses because this node
// is not the leader is forwarded to the leader over the node-to-node gRPC
// API, so a client that used a stale route never sees an error for it.
//
// It also speaks to clients: a request-reply reply is pushed to its
// requester's connection here, or through the node that holds it (the
// node-to-node Reply service, reply.go); a consumer group's connections are
// told when its members change (notify.go); the leader checks transactions
// back with their producer groups (txncheck.go); a reset of a group's
// offsets is sent to its live clients (reset.go).
//
// RocketMQ's admin requests (mqadmin, the dashboard) map onto the broker's
// own admin calls: topics (admin.go), subscription groups (groupadmin.go),
// statistics and connection lists in the Java classes' shapes (stats.go,
// runtime.go) and the node's settings (brokerconfig.go).
//
// Goroutines: the remoting server's (one reader per connection, one per
// request in flight), the registrar (registers with every name server
// periodically and at once when this node's brokerId changes), the offset
// committer (batches consumer offset commits into Raft), the transaction
// check-back loop, the notifier (sends NOTIFY_CONSUMER_IDS_CHANGED), and
// the runtime sampler (reads the message counters once a second for
// GET_BROKER_RUNTIME_INFO's rates).
// Close stops all of them.
package remoting
