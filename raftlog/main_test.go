package raftlog

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started.
func TestMain(m *testing.M) {
	// Winds down asynchronously after Close.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft-wal.(*WAL).runRotate"),
	)
}
