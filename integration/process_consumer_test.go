package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestProcessConsumerSurvivesLeaderKill: a consumer reading with follower
// reads on keeps going while the leader is SIGKILLed (from a follower, then
// the new leader) and ends up with every acknowledged message.
func TestProcessConsumerSurvivesLeaderKill(t *testing.T) {
	procRequire(t)
	c, cl, load := procClusterUnderLoad(t, "live", 3, 5*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	cfg := client.DefaultConsumerConfig("live", "live-readers")
	cfg.Wait = 200 * time.Millisecond
	cfg.MaxMessages = 32
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]int{}
	servedAfterKill := map[string]int{}
	var killedAt time.Time
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			recs, _ := cons.Poll(ctx)
			mu.Lock()
			for _, r := range recs {
				got[string(r.Body)]++
				if !killedAt.IsZero() {
					servedAfterKill[r.ServedBy]++
				}
			}
			mu.Unlock()
		}
	}()
	waitGot := func(n int) {
		procWaitFor(t, 60*time.Second, fmt.Sprintf("the consumer to hold %d messages", n), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= n, fmt.Sprintf("%d so far", len(got))
		})
	}
	waitGot(50)
	l := c.waitLeader("")
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	c.kill(l.ID)
	nl := c.waitLeader(l.ID)
	load.waitAcks(100, 60*time.Second)
	load.stop()
	load.checkNoFailures()
	acked := load.acked()
	procWaitFor(t, 60*time.Second, "the consumer to receive every acknowledged message", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for _, a := range acked {
			if got[a.Body] == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d acknowledged messages not received yet", missing, len(acked))
	})
	close(stop)
	<-done
	if err := cons.Close(ctx); err != nil {
		t.Logf("close: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	survivors := 0
	for id, n := range servedAfterKill {
		if id != l.ID {
			survivors += n
		}
	}
	if survivors == 0 {
		t.Errorf("no surviving node served the consumer after the kill: %v", servedAfterKill)
	}
	t.Logf("killed %s, %s leads; after the kill messages were served by %v; %d acknowledged, %d distinct received",
		l.ID, nl.ID, servedAfterKill, len(acked), len(got))
}
