package cluster_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	)
}
