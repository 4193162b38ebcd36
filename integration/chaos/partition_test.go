package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/internal/faultproxy"
)

// A partition cuts the node-to-node API too: a produce request sent to a
// cut-off follower can no longer be forwarded to the leader, and neither
// can one sent to a follower whose traffic to the leader is held one way.
// Healed, the same follower forwards again.
func TestPartitionCutsForwarding(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a 3-node group")
	}
	dir, bin := setup(t)
	cdir := filepath.Join(dir, "partition-"+time.Now().Format("150405.000"))
	c, err := NewCluster(ClusterConfig{Bin: bin, Dir: cdir, Nodes: 3, TmpfsNode: -1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if !t.Failed() {
			os.RemoveAll(cdir)
		}
	})
	for _, n := range c.Nodes {
		if err := c.StartNode(n); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	l := c.WaitLeader(ctx, 30*time.Second)
	if l == nil {
		t.Fatal("no leader")
	}
	if err := retry(ctx, 30*time.Second, func(ctx context.Context) error {
		_, err := c.Admin.CreateTopic(ctx, "t", 1, true)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var f *Node
	for _, n := range c.Nodes {
		if n != l {
			f = n
			break
		}
	}
	cc, err := grpc.NewClient(f.Client, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	bc := api.NewBrokerClient(cc)
	produce := func(timeout time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err := bc.Produce(pctx, &api.ProduceRequest{Topic: "t", Messages: []*api.ProduceMessage{{Body: []byte("x")}}})
		return err
	}
	// Forwarding works, once the follower knows the leader's address.
	if err := retry(ctx, 30*time.Second, func(context.Context) error { return produce(5 * time.Second) }); err != nil {
		t.Fatalf("produce through follower %s: %v", f.ID, err)
	}
	c.Partition([]*Node{f}, faultproxy.Drop)
	if err := produce(3 * time.Second); err == nil {
		t.Fatalf("follower %s forwarded a produce request while partitioned", f.ID)
	}
	c.Heal()
	if err := retry(ctx, 30*time.Second, func(context.Context) error { return produce(5 * time.Second) }); err != nil {
		t.Fatalf("produce through follower %s after healing: %v", f.ID, err)
	}
	c.OneWay(f.Index, l.Index) // f's requests to the leader are held
	if err := produce(3 * time.Second); err == nil {
		t.Fatalf("follower %s forwarded a produce request while what it sends the leader is held", f.ID)
	}
	c.Heal()
}

// TestLeaderFaultsFirst: in an episode, faults that must hit the leader pick
// it before faults that may pick any node; the others keep their order.
func TestLeaderFaultsFirst(t *testing.T) {
	got := leaderFaultsFirst([]string{FaultSlowDisk, FaultPartitionLeader, FaultPause, FaultKillLeader})
	want := []string{FaultPartitionLeader, FaultKillLeader, FaultSlowDisk, FaultPause}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
}
