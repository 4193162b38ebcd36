package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestProcessLargeKeysRequestRefused runs the first reproduction of "one
// large request stops all writes for good" against real processes: one
// Produce of 4,700 messages with 16 KiB keys. The CLI refuses it with an
// error naming --max-request-bytes, an SDK told a larger limit than the
// broker's gets a size error at once instead of retrying, and afterwards
// every node is healthy (`raftmq health`) and the group takes writes.
func TestProcessLargeKeysRequestRefused(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 3)
	c.mustCLI("", "topic", "create", "big", "--queues", "2", "-s", c.addrs())
	key := strings.Repeat("k", 16<<10)
	lines := strings.Repeat("x\n", 4700)

	start := time.Now()
	out, errOut, err := c.cli(lines, "produce", "-t", "big", "--key", key, "--batch", "4700", "-s", c.addrs())
	if err == nil || !strings.Contains(errOut, "--max-request-bytes") {
		t.Fatalf("CLI produce of 4,700 x 16 KiB keys: err %v\nstdout %s\nstderr %s", err, procCut(out, 500), procCut(errOut, 1000))
	}
	t.Logf("CLI refused in %s: %s", time.Since(start).Round(time.Millisecond), procCut(strings.TrimSpace(errOut), 400))

	cl := c.client()
	p := cl.NewProducerWith(client.ProducerConfig{RequestLimit: 100 << 20})
	msgs := make([]client.Message, 4700)
	for i := range msgs {
		msgs[i] = client.Message{Key: key, Body: []byte("x")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start = time.Now()
	_, err = p.Send(ctx, "big", msgs...)
	if !errors.Is(err, client.ErrRequestTooLarge) || time.Since(start) > 20*time.Second {
		t.Fatalf("SDK send above the broker's gRPC limit: %v after %s, want ErrRequestTooLarge without retrying", err, time.Since(start))
	}
	t.Logf("SDK refused in %s: %v", time.Since(start).Round(time.Millisecond), err)

	c.mustCLI("after\n", "produce", "-t", "big", "--key", key, "-s", c.addrs())
	c.waitConverged(procLeaderTimeout)
	for _, nd := range c.all() {
		procWaitFor(t, 20*time.Second, "node "+nd.ID+" healthy", func() (bool, string) {
			out, errOut, err := c.cli("", "health", "-s", nd.Client)
			return err == nil, out + errOut
		})
	}
}
