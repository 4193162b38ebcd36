package cluster_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// DeleteTopic deletes a topic on every group that holds it, each on its
// own: a group with a connected consumer of the topic refuses and keeps
// it, the other deletes it, and the answer says which; --force then
// deletes the rest. A group named that does not hold the topic is refused
// before anything is deleted.
func TestDeleteTopicOnEveryGroup(t *testing.T) {
	c, _, ctx := twoGroupCluster(t)
	createTopic(ctx, t, c, "gone", 4)
	if _, err := c.DeleteTopic(ctx, "gone", false, []string{"ga", "nope"}); !errors.Is(err, cluster.ErrTopicNotFound) {
		t.Fatalf("delete naming a group without the topic: %v, want ErrTopicNotFound", err)
	}
	if _, err := c.DeleteTopic(ctx, "never", false, nil); !errors.Is(err, cluster.ErrTopicNotFound) {
		t.Fatalf("delete of a topic no group holds: %v, want ErrTopicNotFound", err)
	}

	ga, err := c.Client(ctx, "ga")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := ga.NewConsumer(client.DefaultConsumerConfig("gone", "readers"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(ctx)
	if _, err := cons.Poll(ctx); err != nil { // its first poll joins the group
		t.Fatal(err)
	}

	deleted, err := c.DeleteTopic(ctx, "gone", false, nil)
	var ge *cluster.GroupError
	if !slices.Equal(deleted, []string{"gb"}) || !errors.As(err, &ge) || ge.Group != "ga" {
		t.Fatalf("delete with a consumer on ga: deleted on %v, error %v; want gb deleted and ga's refusal", deleted, err)
	}
	for g, want := range map[string]bool{"ga": true, "gb": false} {
		cl, err := c.Client(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.DescribeTopic(ctx, "gone"); (err == nil) != want {
			t.Errorf("group %s: describe after the delete: %v; the topic should be there: %v", g, err, want)
		}
	}

	deleted, err = c.DeleteTopic(ctx, "gone", true, []string{"ga"})
	if err != nil || !slices.Equal(deleted, []string{"ga"}) {
		t.Fatalf("forced delete on ga: deleted on %v, error %v", deleted, err)
	}
	if _, err := ga.DescribeTopic(ctx, "gone"); err == nil {
		t.Fatal("ga still holds the topic after a forced delete")
	}
}
