package integration

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestProcessQuorumMemory runs a 3-node group with --durability
// quorum-memory under continuous load, SIGKILLs the leader and then a
// follower (a killed process keeps the page cache, so nothing acknowledged
// may be lost), restarting each, and checks everything acknowledged against
// what the group and every node's log hold (procVerify).
func TestProcessQuorumMemory(t *testing.T) {
	procRequire(t)
	const topic = "durability"
	c := procStartCluster(t, 3, "--durability", "quorum-memory", "--sync-interval", "20ms")
	for _, nd := range c.all() {
		if tail := nd.LogTail(1000); !strings.Contains(tail, "durability=quorum-memory") {
			t.Fatalf("%s does not say it runs with quorum-memory:\n%s", nd.ID, procCut(tail, 2000))
		}
	}
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, topic, 4, false); err != nil {
		t.Fatal(err)
	}
	load := procStartLoad(t, cl, topic, "", 4, 5*time.Millisecond, 20000)
	load.waitAcks(200, 30*time.Second)

	l := c.waitLeader("")
	c.kill(l.ID)
	c.waitLeader(l.ID)
	load.waitAcks(200, 60*time.Second)
	c.start(l.ID)
	c.waitFollower(l.ID, 60*time.Second)

	nl := c.waitLeader("")
	for _, nd := range c.all() {
		if nd.ID != nl.ID {
			c.kill(nd.ID)
			load.waitAcks(200, 60*time.Second) // the other two go on
			c.start(nd.ID)
			c.waitFollower(nd.ID, 60*time.Second)
			break
		}
	}
	load.waitAcks(200, 30*time.Second)
	load.stop()
	load.checkNoFailures()
	idx := c.waitConverged(30 * time.Second)
	n := procVerify(t, c, cl, topic, load.sends())
	t.Logf("%d messages acknowledged and verified; every node applied index %d", n, idx)
}
