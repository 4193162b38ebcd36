// Package auth authenticates RocketMQ remoting requests and calls to
// raftmq's gRPC API, and decides what a user may do.
//
// It owns: RocketMQ's request signature (AccessKey and Signature ext
// fields, HMAC-SHA1 over the other ext fields and the body, as
// AclClientRPCHook and rocketmq-client-go's ACLInterceptor compute it);
// the actions (publish, subscribe, admin), resources (a topic, a consumer
// group, the cluster) and how a grant's prefix wildcard matches them; the
// sealing of secrets at rest (AES-256-GCM under a key from the node's
// configuration); and the Authorizer, which applies a mode (disabled,
// permissive, enforcing), counts refusals by reason and logs them without
// secrets. It also checks the per-call credential of the gRPC API (its
// format is package mq's, shared with the SDK) and the nodes' own
// credential (derived from the key file), and throttles bad signatures
// per client address on both ports.
//
// The user table itself is replicated state in package store; this package
// reads it through the small Directory interface and never writes it.
// Which request needs which permission is the protocol adapter's to say
// (broker/remoting); this package never decodes a frame and never imports
// the broker facade.
package auth
