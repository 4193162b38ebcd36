package integration

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started (the processes it starts
// are ended by PID in each test's cleanup).
func TestMain(m *testing.M) {
	// grpc-go's resolver/balancer winds down asynchronously after Close.
	// The RocketMQ Go client (rocketmq_test.go) never stops its own
	// background loops (they run under primitive.WithRecover) nor its
	// cache janitor.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/primitive.WithRecover"),
		goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}
