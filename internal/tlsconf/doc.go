// Package tlsconf is the TLS plumbing every port of a raftmq node shares:
// it loads a node's certificate, key and cluster CA from PEM files, reloads
// them when the files change or on Reload (SIGHUP), and applies the node's
// mode (disabled, permissive, enforcing) to a listener, to a gRPC server
// and to the dialer of node-to-node connections.
//
// A listener in permissive or enforcing mode looks at the first byte a
// client sends: 0x16 (a TLS handshake record) starts TLS; anything else is
// plaintext, served in permissive mode and closed in enforcing mode. The
// dialer speaks TLS in both modes; in permissive mode it falls back to
// plaintext when the peer closes or answers the handshake with something
// that is not TLS (a node not yet moved), never after a certificate error.
//
// Goroutines: a Node runs one, started by New and ended by Close, that
// checks the files' modification times every Config.ReloadEvery. Sniffing
// and handshakes run in the goroutine that serves the connection (the
// gRPC server's handshake goroutine, or the first Read of a connection of
// Listen), never in the accept loop.
//
// GenerateFiles makes a private CA and a certificate for a group's hosts
// (`raftmq secure init`, the compose group with TLS).
//
// It never decides who may do what beyond "holds a certificate the cluster
// CA signed" (VerifiedPeer): users and permissions are package acl's and
// broker/auth's. It imports nothing of raftmq.
package tlsconf
