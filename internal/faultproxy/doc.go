// Package faultproxy is the TCP proxy the process tests put between two
// raftmq nodes to fail the network between them: a Proxy forwards the
// connections its 127.0.0.1 listener accepts to one target and can pass
// them (optionally delayed), drop them (connections closed, new ones
// refused), blackhole them (held open, nothing passes, held bytes
// delivered in order afterwards) or hold one direction only.
//
// One proxy carries the connections one node opens to another, so a
// directed pair of nodes needs its own proxy; a one-way partition of i
// from j holds i's requests on proxy(i->j) and i's answers on proxy(j->i)
// (Hold), because a request and its answer share a connection.
//
// It owns nothing of the broker and never parses what it forwards. Users:
// internal/localgroup (Config.Partitionable) and the chaos suite.
package faultproxy
