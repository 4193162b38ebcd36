package integration

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/localgroup"
)

// TestProcessFollowerRejoinsUnderLoad SIGKILLs a follower under a steady
// synchronous write load, keeps it down 10 s, starts it again and measures
// how long it takes to answer and to be in sync with the leader; then
// checks that nothing acknowledged was lost. RAFTMQ_REJOIN_TRIALS sets how
// many restarts in a row (default 1; `make bench-rejoin` runs 4 and prints
// the figures).
func TestProcessFollowerRejoinsUnderLoad(t *testing.T) {
	procRequire(t)
	trials := 1
	if s := os.Getenv("RAFTMQ_REJOIN_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RAFTMQ_REJOIN_TRIALS=%q: want a positive count", s)
		}
		trials = n
	}
	c, cl, load := procClusterUnderLoad(t, "rejoin", 4, 0)
	var answered, inSync []time.Duration
	for i := 1; i <= trials; i++ {
		l := c.waitLeader("")
		var f string
		for _, n := range c.all() {
			if n.ID != l.ID {
				f = n.ID
				break
			}
		}
		c.kill(f)
		time.Sleep(10 * time.Second)
		t0 := time.Now()
		c.start(f)
		answer := time.Since(t0)
		var addrs []string
		for _, n := range c.all() {
			addrs = append(addrs, n.Client)
		}
		var why string
		procWaitFor(t, 2*time.Minute, f+" to be in sync with the leader", func() (bool, string) {
			_, why = localgroup.FollowerCaughtUp(context.Background(), addrs, f, c.node(f).Client, time.Second)
			return why == "", why
		})
		sync := time.Since(t0)
		answered, inSync = append(answered, answer), append(inSync, sync)
		t.Logf("restart %d: follower %s down 10 s under load; answers %v after its start, in sync %v after it (%d messages acknowledged so far)",
			i, f, answer.Round(time.Millisecond), sync.Round(time.Millisecond), load.count())
	}
	load.stop()
	load.checkNoFailures()
	c.waitConverged(60 * time.Second)
	procVerify(t, c, cl, "rejoin", load.sends())
	t.Logf("rejoin: %d restarts; answers after %s; in sync after %s; worst %v",
		trials, durations(answered), durations(inSync), slices.Max(inSync).Round(time.Millisecond))
}

func durations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(time.Millisecond).String()
	}
	return strings.Join(s, ", ")
}
