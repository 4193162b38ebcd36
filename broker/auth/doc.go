// Package auth authenticates RocketMQ remoting requests and calls to
// raftmq's gRPC API, and decides what a user may do.
//
// It owns the actions (publish, subscribe, admin), resources (a topic, a
// consumer group, the cluster) and how a grant's prefix wildcard matches
// them, and the Authorizer, which verifies a request's signature or call
// credential against the user table, applies a mode (disabled, permissive,
// enforcing), counts refusals by reason and logs them without secrets. It
// also checks the nodes' own credential (derived from the key file). The
// signature, the sealer, the modes and the throttle of bad signatures per
// client address are package acl's, shared with the name server.
//
// The user table itself is replicated state in package store; this package
// reads it through the small Directory interface and never writes it.
// Which request needs which permission is the protocol adapter's to say
// (broker/remoting); this package never decodes a frame and never imports
// the broker facade.
package auth
