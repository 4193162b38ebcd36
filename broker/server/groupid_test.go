package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
)

// TestAddressReusedByAnotherGroup: a client pinned to group A keeps
// producing through A's other nodes when a node of another group B takes
// over one of A's addresses; B refuses every call naming A and stores
// nothing. Once the rest of A is gone, a client that knew A only by that
// address fails its sends, and B stores nothing.
func TestAddressReusedByAnotherGroup(t *testing.T) {
	a := newCluster(t, 3, nil)
	waitFor(t, 20*time.Second, "group A's leader and id", func() bool {
		l := a.Leader()
		return l >= 0 && a.Node(l).Broker().GroupID() != ""
	})
	aID := a.Node(a.Leader()).Broker().GroupID()
	addrs := a.Addrs()
	cl, err := client.New(client.Config{Servers: addrs, RetryTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 60*time.Second)
	p := cl.NewProducer()
	if _, err := p.Send(ctx, "t", client.Message{Body: []byte("before")}); err != nil {
		t.Fatalf("produce to group A: %v", err)
	}
	if got := cl.GroupID(); got != aID {
		t.Fatalf("client pinned group %q, want A's %q", got, aID)
	}
	// A client that knows only n1's address.
	only, err := client.New(client.Config{Servers: addrs[:1], RetryTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	if _, err := only.NewProducer().Send(ctx, "t", client.Message{Body: []byte("through n1")}); err != nil || only.GroupID() != aID {
		t.Fatalf("produce to group A through n1: %v, pinned %q", err, only.GroupID())
	}

	// n1 of A goes; a one-node group B starts at its client address.
	a.Kill(0)
	b := newCluster(t, 1, func(_ int, c *server.Config) {
		c.Listen, c.Broker.ClientAddr = addrs[0], addrs[0]
	})
	waitFor(t, 20*time.Second, "group B's leader and id", func() bool {
		return b.Leader() == 0 && b.Node(0).Broker().GroupID() != ""
	})
	if bID := b.Node(0).Broker().GroupID(); bID == aID {
		t.Fatalf("two groups drew the same id %q", bID)
	}
	for i := range 20 {
		if _, err := p.Send(ctx, "t", client.Message{Body: fmt.Appendf(nil, "after-%d", i)}); err != nil {
			t.Fatalf("produce %d with one of A's addresses taken by B: %v", i, err)
		}
	}
	if _, err := b.Node(0).Broker().Topic("t"); err == nil {
		t.Fatal("group B holds topic t: a call meant for A was served")
	}

	// With the rest of A gone too, the client that knows only the reused
	// address fails its sends unsent.
	a.Kill(1)
	a.Kill(2)
	_, err = only.NewProducer().Send(ctx, "t", client.Message{Body: []byte("lost?")})
	if err == nil {
		t.Fatal("a send through an address of another group only was acknowledged")
	}
	if client.Classify(err) == client.Failed && !strings.Contains(err.Error(), "another raftmq group answers there") {
		t.Fatalf("send through an address of another group only: %v, want it named", err)
	}
	if _, err := b.Node(0).Broker().Topic("t"); err == nil {
		t.Fatal("group B holds topic t after a refused send")
	}
}

// TestRestartedNodeKnowsItsGroup: a node restarted alone, which applies
// nothing before a leader tells it what is committed, still knows its
// group's id from its data directory: it answers its own group's calls and
// refuses another's.
func TestRestartedNodeKnowsItsGroup(t *testing.T) {
	c := newCluster(t, 3, nil)
	waitFor(t, 20*time.Second, "the group's id on every node's disk", func() bool {
		l := c.Leader()
		if l < 0 || c.Node(l).Broker().GroupID() == "" {
			return false
		}
		for i := range c.Size() {
			b, err := os.ReadFile(filepath.Join(c.Config(i).DataDir, "GROUP_ID"))
			if err != nil || strings.TrimSpace(string(b)) != c.Node(l).Broker().GroupID() {
				return false
			}
		}
		return true
	})
	id := c.Node(c.Leader()).Broker().GroupID()
	for i := range c.Size() {
		c.Kill(i)
	}
	c.Restart(0)
	n := c.Node(0)
	if got := n.Store().GroupID(); got != "" {
		t.Fatalf("a node restarted alone applied the group id %q: the test shows nothing", got)
	}
	if got := n.Broker().GroupID(); got != id {
		t.Fatalf("a node restarted alone knows group id %q, want %q", got, id)
	}
	conn, err := api.Dial(c.Config(0).Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := api.NewBrokerClient(conn)
	ctx := ctxT(t, 30*time.Second)
	status := func(group string) error {
		_, err := cl.Status(metadata.AppendToOutgoingContext(ctx, api.GroupIDKey, group), &api.StatusRequest{})
		return err
	}
	if err := status(id); err != nil {
		t.Fatalf("status naming the node's own group: %v", err)
	}
	if err := status("0123456789abcdef0123456789abcdef"); grpcstatus.Code(err) != codes.FailedPrecondition {
		t.Fatalf("status naming another group: %v, want FailedPrecondition", err)
	}
}
