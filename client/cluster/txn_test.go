package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// A cluster transaction producer spreads half messages over both groups of
// a topic and decides each in its group: a committed one is readable once,
// in the group that acked it; a rolled back one never. What a producer left
// undecided when it closed is decided by another producer of the same
// producer group that names the topic, in whichever group holds it, and
// only that is asked about.
func TestTransactionsAcrossGroups(t *testing.T) {
	c, _, ctx := twoGroupCluster(t)
	createTopic(ctx, t, c, "pay", 4)

	never := func(context.Context, client.HalfMessage) client.TxnState { return client.TxnUnknown }
	tp1, err := c.NewTransactionProducer(ctx, client.TransactionConfig{Group: "pg", Check: never, CheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	visible := map[string]string{}   // body: the group it must be read from
	undecided := map[string]string{} // body: the group holding it
	used := map[string]bool{}
	send := func(m cluster.Message, st client.TxnState) cluster.Ack {
		t.Helper()
		var seen cluster.Ack
		res, err := tp1.SendInTransaction(ctx, "pay", m, func(_ context.Context, a cluster.Ack) client.TxnState {
			seen = a
			return st
		})
		if err != nil {
			t.Fatalf("send %s: %v", m.Body, err)
		}
		if res.State != st || res.Ack.Group == "" || res.Ack.GetId() == "" || res.Ack != seen {
			t.Fatalf("send %s: result %+v, the local transaction saw %+v", m.Body, res, seen)
		}
		switch st {
		case client.TxnCommit:
			visible[string(m.Body)] = res.Ack.Group
		case client.TxnUnknown:
			undecided[string(m.Body)] = res.Ack.Group
		}
		used[res.Ack.Group] = true
		return res.Ack
	}
	states := []client.TxnState{client.TxnCommit, client.TxnRollback, client.TxnUnknown}
	for i := range 12 {
		send(cluster.Message{Message: client.Message{Body: fmt.Appendf(nil, "m%d", i)}}, states[i%3])
	}
	if len(used) != 2 {
		t.Fatalf("half messages went to groups %v, want both", used)
	}
	if a := send(cluster.Message{Group: "gb", Message: client.Message{Body: []byte("pinned")}}, client.TxnCommit); a.Group != "gb" {
		t.Fatalf("a message pinned to gb went to %s", a.Group)
	}
	if _, err := tp1.SendInTransaction(ctx, "pay", cluster.Message{Group: "nope", Message: client.Message{Body: []byte("x")}},
		func(context.Context, cluster.Ack) client.TxnState { return client.TxnCommit }); client.Classify(err) != client.Failed {
		t.Fatalf("a message pinned to a missing group: %v, want a Failed error", err)
	}
	tp1.Close()

	var mu sync.Mutex
	checked := map[string]string{}
	tp2, err := c.NewTransactionProducer(ctx, client.TransactionConfig{Group: "pg", Topics: []string{"pay"},
		Timeout: 100 * time.Millisecond, CheckInterval: 100 * time.Millisecond,
		Check: func(_ context.Context, h client.HalfMessage) client.TxnState {
			mu.Lock()
			defer mu.Unlock()
			checked[string(h.Body)] = h.Topic
			return client.TxnCommit
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer tp2.Close()
	if g := tp2.Groups(); !slices.Equal(g, []string{"ga", "gb"}) {
		t.Fatalf("the check-back runs in groups %v, want both", g)
	}
	waitFor(t, "the check-back to decide the undecided half messages", func() bool {
		for _, g := range []string{"ga", "gb"} {
			cl, err := c.Client(ctx, g)
			if err != nil {
				return false
			}
			if hs, err := cl.ListHalfMessages(ctx, "pay", "pg", 0, 100); err != nil || len(hs) > 0 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	if len(checked) != len(undecided) {
		t.Errorf("the check-back asked about %v, want only the undecided %v", checked, slices.Sorted(maps.Keys(undecided)))
	}
	for body := range checked {
		if _, ok := undecided[body]; !ok {
			t.Errorf("the check-back asked about %s, which was decided", body)
		}
	}
	mu.Unlock()
	maps.Copy(visible, undecided)

	for _, g := range []string{"ga", "gb"} {
		got := readGroup(ctx, t, c, g, "pay")
		for body, n := range got {
			if n != 1 || visible[body] != g {
				t.Errorf("group %s: %s read %d times; it should be read once from group %q", g, body, n, visible[body])
			}
		}
		for body, vg := range visible {
			if vg == g && got[body] == 0 {
				t.Errorf("group %s: committed %s is not there", g, body)
			}
		}
	}
}

// readGroup reads every message of topic in group and counts them by body.
func readGroup(ctx context.Context, t *testing.T, c *cluster.Cluster, group, topic string) map[string]int {
	t.Helper()
	cl, err := c.Client(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	ti, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends := map[int32]uint64{}
	for q, qi := range ti.QueueInfo {
		ends[int32(q)] = qi.MaxOffset
	}
	cn, err := cl.NewConsumer(client.ConsumerConfig{Topic: topic, Group: "reader-" + group, Queues: slices.Sorted(maps.Keys(ends)), Wait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	got := map[string]int{}
	for !cn.CaughtUp(ends) {
		recs, err := cn.Poll(ctx)
		if err != nil {
			t.Fatalf("read %s of group %s: %v", topic, group, err)
		}
		for _, r := range recs {
			got[string(r.Message.Body)]++
		}
	}
	return got
}
