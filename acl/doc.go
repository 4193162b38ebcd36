// Package acl holds the pieces of authentication that broker nodes, the
// name server and clients share: RocketMQ's request signature (AccessKey
// and Signature ext fields, HMAC-SHA1 over the other ext fields and the
// body, as AclClientRPCHook and rocketmq-client-go's ACLInterceptor compute
// it); the auth key file's Sealer, which seals user secrets at rest
// (AES-256-GCM) and derives the node credential the nodes sign their calls
// and registrations with; the modes (disabled, permissive, enforcing); and
// the Throttle of bad signatures per client address.
//
// It decides nothing about users or permissions and imports no raftmq
// package: the broker's Authorizer (broker/auth) and the name server
// (namesrv) apply these pieces each to its own requests.
package acl
