package servertest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/store"
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

// createTopic creates a topic on the leader (other than node skip), trying
// again on the next one when leadership moves meanwhile (a loaded machine
// under -race sees leaders step down).
func createTopic(t *testing.T, c *servertest.Cluster, skip int, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	defer cancel()
	for {
		l := c.LeaderExcept(skip)
		_, err := c.Node(l).Store().CreateTopic(ctx, name, 2, true)
		if err == nil {
			return
		}
		if ctx.Err() != nil || !(errors.Is(err, store.ErrNotLeader) || errors.Is(err, store.ErrUnknownOutcome)) {
			t.Fatalf("create topic %q on node %d: %v", name, l, err)
		}
		t.Logf("create topic %q on node %d: %v; trying again", name, l, err)
		time.Sleep(20 * time.Millisecond)
	}
}

func hasTopic(c *servertest.Cluster, i int, name string) bool {
	_, err := c.Node(i).Store().Topic(name)
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
			createTopic(t, c, -1, "before")

			c.Partition(old)
			c.LeaderExcept(old) // a new leader among the others
			waitFor(t, "the cut-off leader to step down", func() bool { return c.Node(old).Node().Role() != election.Leader })
			createTopic(t, c, old, "during")
			if hasTopic(c, old, "during") {
				t.Fatal("the cut-off node applied an entry of the new leader")
			}

			c.Heal()
			oldID := c.Config(old).Raft.ID
			waitFor(t, "the old leader to follow a new one", func() bool {
				id := c.Node(old).Node().LeaderID()
				return id != "" && id != oldID && hasTopic(c, old, "during")
			})
			leader := c.Leader()

			c.Kill(leader)
			c.LeaderExcept(leader)
			createTopic(t, c, leader, "after")
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
			createTopic(t, c, last, "stopped")
			c.Restart(last)
			waitFor(t, "the stopped node to catch up", func() bool { return hasTopic(c, last, "stopped") })
		})
	}
}
