package remoting

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started. The RocketMQ Go client,
// which the tests use as the reference encoder and decoder, starts a cache
// janitor when its packages load, and its background loops (run under
// primitive.WithRecover) notice Shutdown only after their sleep: those are
// its own, not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"),
		goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/primitive.WithRecover"))
}
