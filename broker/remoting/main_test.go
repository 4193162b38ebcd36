package remoting

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started.
func TestMain(m *testing.M) {
	// grpc-go's resolver/balancer winds down asynchronously after Close.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"))
}
