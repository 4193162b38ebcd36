// Package console serves the web console on a node's HTTP port: one page,
// its style sheet and script embedded in the binary (assets/), and a stream
// of Server-Sent Events (/console/events) that pushes a JSON snapshot of the
// group every second and at once when the leader changes.
//
// It owns the snapshot's shape, the in-memory timeline of leader changes
// this node observed (the last Config.Keep), and this node's produce and
// consume rates, derived from the broker's Prometheus counters.
//
// Beyond the overview it serves the pages' JSON API (/console/api: the
// topics, and their creation and deletion) and the stream's other views
// (?view=topics). Those reads and changes are the broker calls the CLI and
// the gRPC API make, checked with the same Authorizer as the gRPC calls of
// the same names (the page signs the call credential), and refused from
// pages of other sites. The broker decides; this package decodes, checks
// credentials and encodes.
//
// On a node started with name servers the overview also carries the
// cluster: every group they list, as its caller's Config.Cluster reports
// them, asked at most every clusterEvery.
//
// It is told of leader changes by its caller (broker/server wires the raft
// node's role events). It never fetches anything at run time and needs no
// build step.
package console
