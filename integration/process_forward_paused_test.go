package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// TestForwardToAPausedLeader: a produce sent to a follower through
// raftmq's gRPC API right after the leader was paused (SIGSTOP: its
// connections stay open, nothing answers) is forwarded to the paused
// leader, given up there as soon as the follower learns of the next leader,
// and forwarded to that one: it is answered by the new leader soon after
// the election, not at the caller's deadline. Asserted under 10 s (the
// goal is the election's time; the figure is logged), twice, through each
// follower.
func TestForwardToAPausedLeader(t *testing.T) {
	procRequire(t)
	c := procStartGroup(t, localgroup.Config{Nodes: 3})
	c.waitLeader("")
	c.mustCLI("", "topic", "create", "fwd-paused", "--queues", "1", "-s", c.addrs())
	seq := uint64(0)
	produce := func(nd *procNode, timeout time.Duration) (*api.ProduceResponse, error) {
		cc, err := api.Dial(nd.Client)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		seq++
		return api.NewBrokerClient(cc).Produce(ctx, &api.ProduceRequest{Topic: "fwd-paused", ProducerId: "fwd-paused-test", Sequence: seq,
			Messages: []*api.ProduceMessage{{Body: []byte(fmt.Sprint("m-", seq))}}})
	}
	last := ""
	for round := 0; round < 2; round++ {
		leader := c.waitLeader("")
		var fol *procNode
		for _, nd := range c.all() {
			if nd.ID != leader.ID && nd.ID != last {
				fol = nd
				break
			}
		}
		last = fol.ID
		// The follower forwards to the leader, and keeps its connection.
		if r, err := produce(fol, 10*time.Second); err != nil || r.NodeId != leader.ID {
			t.Fatalf("round %d: produce through follower %s before the pause: %v (answered by %v), want the leader %s's answer", round, fol.ID, err, r.GetNodeId(), leader.ID)
		}
		c.pause(leader.ID)
		start := time.Now()
		r, err := produce(fol, 20*time.Second)
		took := time.Since(start)
		c.resume(leader.ID)
		if err != nil {
			t.Fatalf("round %d: produce through follower %s while leader %s was paused: %v after %v", round, fol.ID, leader.ID, err, took)
		}
		t.Logf("round %d: produce through follower %s while leader %s was paused: answered by %s after %v", round, fol.ID, leader.ID, r.NodeId, took.Round(time.Millisecond))
		if r.NodeId == leader.ID || took > 10*time.Second {
			t.Errorf("round %d: answered by %s after %v; want the next leader's answer well under 10 s (the election's time)", round, r.NodeId, took)
		}
		c.waitFollower(leader.ID, 60*time.Second)
	}
}
