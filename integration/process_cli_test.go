package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/localgroup"
)

// TestProcessConsumeFromEndWaits: `consume --offset end` is there for what
// comes next (as `kcat -o end`): it waits for new messages and exits after
// --max of them; with none coming it exits once --timeout has passed.
func TestProcessConsumeFromEndWaits(t *testing.T) {
	procRequire(t)
	c := procStartGroup(t, localgroup.Config{Nodes: 3})
	c.waitLeader("")
	s := c.addrs()
	c.mustCLI("", "topic", "create", "tail", "--queues", "2", "-s", s)
	c.mustCLI("", "produce", "-t", "tail", "-s", s, "old-1", "old-2")

	type result struct {
		out, errOut string
		err         error
		took        time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		out, errOut, err := c.cli("", "consume", "-t", "tail", "--offset", "end", "--max", "2", "--timeout", "60s", "-s", s)
		done <- result{out, errOut, err, time.Since(start)}
	}()
	time.Sleep(2 * time.Second) // the reader has started at the end
	c.mustCLI("", "produce", "-t", "tail", "-s", s, "new-1", "new-2")
	r := <-done
	if r.err != nil || !strings.Contains(r.out, "new-1") || !strings.Contains(r.out, "new-2") || strings.Contains(r.out, "old-") {
		t.Fatalf("consume --offset end --max 2: %v after %v\nstdout: %s\nstderr: %s; want the two new messages only", r.err, r.took, r.out, r.errOut)
	}

	start = time.Now()
	out, errOut, err := c.cli("", "consume", "-t", "tail", "--offset", "end", "--timeout", "2s", "-s", s)
	if took := time.Since(start); err != nil || out != "" || took < 2*time.Second {
		t.Errorf("consume --offset end with nothing new: %v after %v, stdout %q, stderr %q; want exit 0 after --timeout with nothing", err, took, out, errOut)
	}

	// A send to a topic that does not exist creates it (the servers
	// auto-create topics) and says so; the next send does not.
	if _, errOut, err := c.cli("", "produce", "-t", "fresh", "-s", s, "x"); err != nil || !strings.Contains(errOut, "topic fresh did not exist") {
		t.Errorf("produce to a new topic: %v, stderr %q; want it to say the topic was created", err, errOut)
	}
	if _, errOut, err := c.cli("", "produce", "-t", "fresh", "-s", s, "y"); err != nil || strings.Contains(errOut, "did not exist") {
		t.Errorf("produce to an existing topic: %v, stderr %q", err, errOut)
	}
}
