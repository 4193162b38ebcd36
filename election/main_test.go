package election

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// raft's NetworkTransport.Close leaves pooled outgoing connections
		// open, so a peer's handler for one of them blocks in Read until the
		// process exits (hashicorp/raft v1.7.2 net_transport.go).
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}
