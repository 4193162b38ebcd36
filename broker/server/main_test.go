package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every node the tests start must stop every goroutine it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// grpc-go's resolver/balancer and raft-wal's metrics loop wind down
		// asynchronously after Close.
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft-wal.(*WAL).runRotate"),
		// raft's NetworkTransport.Close leaves pooled outgoing connections
		// open, so a peer's handler for one of them blocks in Read until the
		// process exits (hashicorp/raft v1.7.2 net_transport.go).
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}
