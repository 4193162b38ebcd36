package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestRetryDelaysFollowLevels: with the broker's own levels (3 + reconsume
// count), a message failed twice comes back no sooner than 10 s (level 3)
// and then 30 s (level 4) after it was sent back, and within generous
// bounds after that.
func TestRetryDelaysFollowLevels(t *testing.T) {
	_, cl := retryCluster(t)
	ctx := ctxT(t, 180*time.Second)
	const group, topic = "g-delay", "delayed"
	produceBodies(ctx, t, cl, topic, -1, "m")
	var mu sync.Mutex
	var at []time.Time
	cfg := pushConfig(topic, group, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if msgs[0].ReconsumeTimes < 2 {
			return client.ConsumeRetryLater
		}
		return client.ConsumeSuccess
	})
	cfg.RetryDelayLevel = 0
	pc, err := cl.NewPushConsumer(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	waitUntil(t, 150*time.Second, "the third delivery", func() bool { mu.Lock(); defer mu.Unlock(); return len(at) == 3 })
	mu.Lock()
	defer mu.Unlock()
	for i, want := range []time.Duration{10 * time.Second, 30 * time.Second} {
		got := at[i+1].Sub(at[i])
		// The delay counts from when the copy was stored, a moment after
		// the handler answered; the upper bound is generous for a loaded
		// machine.
		if got < want || got > want+15*time.Second {
			t.Errorf("retry %d came back after %s, want %s (level %d) .. %s", i+1, got, want, 3+i, want+15*time.Second)
		}
		t.Logf("retry %d (level %d): back after %s", i+1, 3+i, got)
	}
}
