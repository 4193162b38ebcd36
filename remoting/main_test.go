package remoting

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

// Every test must stop every goroutine it started. The RocketMQ Go client,
// which the tests use as the reference encoder and decoder, starts a cache
// janitor when its packages load, and its background loops notice Shutdown
// only after their sleep (up to 10 s): those are its own, not ours.
func TestMain(m *testing.M) {
	opts := []goleak.Option{goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run")}
	for i := 1; i <= 8; i++ {
		opts = append(opts, goleak.IgnoreAnyFunction(fmt.Sprintf("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.%d", i)))
	}
	goleak.VerifyTestMain(m, opts...)
}
