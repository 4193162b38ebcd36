// Package console serves the web console on a node's HTTP port: one page,
// its style sheet and script embedded in the binary (assets/), and a stream
// of Server-Sent Events (/console/events) that pushes a JSON snapshot of the
// group every second and at once when the leader changes.
//
// It owns the snapshot's shape, the in-memory timeline of leader changes
// this node observed (the last Config.Keep), and this node's produce and
// consume rates, derived from the broker's Prometheus counters.
//
// It never changes anything: it reads the broker's Status and metrics and
// is told of leader changes by its caller (broker/server wires the raft
// node's role events). It never fetches anything at run time, needs no
// build step, and speaks no broker protocol.
package console
