package integration

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started (the processes it starts
// are ended by PID in each test's cleanup).
func TestMain(m *testing.M) {
	// grpc-go's resolver/balancer winds down asynchronously after Close.
	// The RocketMQ Go client (rocketmq_test.go) does not wait for its own
	// goroutines on Shutdown: its loops (run under primitive.WithRecover),
	// the pulls of its push consumers, its rebalances and its cache janitor.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/primitive.WithRecover"),
		goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/consumer.(*pushConsumer).Start.func1.1.1"),
		goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/consumer.(*pushConsumer).Start.func1.1"),
		goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).RebalanceImmediately"),
		goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"))
}
