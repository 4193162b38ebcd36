package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
)

// TestProcessProduceDelayCLI: `raftmq produce --delay/--deliver-at/
// --delay-level` on real processes prints each message's delivery time, the
// messages appear once in the topic not before it, and conflicting or bad
// flags fail with a message naming them before anything is sent.
func TestProcessProduceDelayCLI(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 3)
	s := c.addrs()
	c.mustCLI("", "topic", "create", "--queues", "2", "-s", s, "cli-delay")

	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--delay", "2s", "--delay-level", "2"}, "exclude each other"},
		{[]string{"--delay-level", "19"}, "delay level 19"},
		{[]string{"--deliver-at", "tomorrow"}, "RFC 3339"},
		{[]string{"--deliver-at", time.Now().Add(100 * time.Hour).UTC().Format(time.RFC3339)}, "--max-delay"},
	} {
		args := append([]string{"produce", "--topic", "cli-delay", "-s", s}, bad.args...)
		out, errOut, err := c.cli("", append(args, "x")...)
		if err == nil || !strings.Contains(out+errOut, bad.says) {
			t.Fatalf("raftmq %s: err %v, output %q %q; want a failure saying %q", strings.Join(bad.args, " "), err, out, errOut, bad.says)
		}
	}

	start := time.Now()
	at := start.Add(3 * time.Second).UTC().Format(time.RFC3339)
	var lines []string
	lines = append(lines, c.mustCLI("", "produce", "--topic", "cli-delay", "-s", s, "--delay", "2s", "a", "b"))
	lines = append(lines, c.mustCLI("", "produce", "--topic", "cli-delay", "-s", s, "--deliver-at", at, "c"))
	lines = append(lines, c.mustCLI("", "produce", "--topic", "cli-delay", "-s", s, "--delay-level", "1", "d"))
	re := regexp.MustCompile(`id ([0-9A-F]{24}) deliver-at (\S+)`)
	due := map[string]time.Time{}
	for _, l := range strings.Split(strings.Join(lines, ""), "\n") {
		if l == "" {
			continue
		}
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("produce printed %q, want an id and a deliver-at time", l)
		}
		when, err := time.Parse(time.RFC3339Nano, m[2])
		if err != nil {
			t.Fatalf("deliver-at %q: %v", m[2], err)
		}
		due[m[1]] = when
	}
	if len(due) != 4 {
		t.Fatalf("%d acks printed, want 4: %q", len(due), lines)
	}

	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := cl.NewConsumer(client.ConsumerConfig{Topic: "cli-delay", Group: "g", From: "earliest", Queues: []int32{0, 1}, Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	seen := map[string]int{}
	for ctx.Err() == nil && len(seen) < 4 {
		recs, err := cons.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for _, r := range recs {
			id := r.Properties[mq.PropStagedID]
			when, ok := due[id]
			if !ok {
				t.Fatalf("consumed %s with %s=%q, not an acked id", r.Id, mq.PropStagedID, id)
			}
			if now.Before(when) {
				t.Fatalf("%s consumed at %s, before its delivery time %s", id, now, when)
			}
			seen[id]++
		}
	}
	time.Sleep(time.Second)
	recs, _ := cons.Poll(ctx)
	for _, r := range recs {
		seen[r.Properties[mq.PropStagedID]]++
	}
	for id := range due {
		if seen[id] != 1 {
			t.Fatalf("%s consumed %d times, want once", id, seen[id])
		}
	}
}
