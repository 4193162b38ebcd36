package servertest_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/broker/server/servertest"
	"github.com/raftmq/raftmq/replica"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// As in broker/server: grpc-go and raft-wal wind down asynchronously
		// after Close, and raft's NetworkTransport.Close leaves a peer's
		// handler for a pooled connection blocked in Read.
		goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft-wal.(*WAL).runRotate"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(servertest.WaitTimeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", servertest.WaitTimeout, what)
		}
	}
}

func createTopic(t *testing.T, c *servertest.Cluster, leader int, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Node(leader).Node().CreateTopic(ctx, name, 2, false); err != nil {
		t.Fatalf("create topic %q on node %d: %v", name, leader, err)
	}
}

func hasTopic(c *servertest.Cluster, i int, name string) bool {
	_, err := c.Node(i).Node().Topic(name)
	return err == nil
}

// TestCluster partitions the leader away (a new leader is elected among the
// others, the old one steps down), heals (the old leader follows and
// catches up), kills the new leader (another is elected) and restarts it
// (it follows), stops the leader gracefully and restarts it, in both modes.
func TestCluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []servertest.Option
	}{
		{"inmem", []servertest.Option{servertest.InMemory()}},
		{"tcp", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := servertest.New(t, 3, tc.opts...)
			old := c.Leader()
			createTopic(t, c, old, "before")

			c.Partition(old)
			leader := c.LeaderExcept(old)
			waitFor(t, "the cut-off leader to step down", func() bool { return c.Node(old).Node().Role() != replica.Leader })
			createTopic(t, c, leader, "during")
			if hasTopic(c, old, "during") {
				t.Fatal("the cut-off node applied an entry of the new leader")
			}

			c.Heal()
			leaderID := c.Config(leader).Raft.ID
			waitFor(t, "the old leader to follow the new one", func() bool {
				return c.Node(old).Node().LeaderID() == leaderID && hasTopic(c, old, "during")
			})

			c.Kill(leader)
			next := c.LeaderExcept(leader)
			createTopic(t, c, next, "after")
			c.Restart(leader)
			waitFor(t, "the restarted node to catch up", func() bool { return hasTopic(c, leader, "after") })
			if got := c.Leader(); got == leader {
				t.Logf("the restarted node %d was elected again", got)
			}
			if n := len(c.Addrs()); n != 3 {
				t.Fatalf("Addrs: %d running nodes, want 3", n)
			}

			// A graceful stop hands leadership over.
			last := c.Leader()
			c.Stop(last)
			if c.Node(last) != nil || len(c.Addrs()) != 2 {
				t.Fatal("a stopped node is still listed")
			}
			createTopic(t, c, c.LeaderExcept(last), "stopped")
			c.Restart(last)
			waitFor(t, "the stopped node to catch up", func() bool { return hasTopic(c, last, "stopped") })
		})
	}
}
