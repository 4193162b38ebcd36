package server_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/servertest"
)

func topicEnd(t *testing.T, ctx context.Context, cl *client.Client, topic string) map[int32]uint64 {
	t.Helper()
	ti, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]uint64{}
	for _, q := range ti.QueueInfo {
		end[q.Queue] = q.MaxOffset
	}
	return end
}

func sendN(t *testing.T, ctx context.Context, p *client.Producer, topic string, from, to int) []string {
	t.Helper()
	var bodies []string
	for i := from; i < to; i++ {
		b := fmt.Sprintf("cfg-%03d", i)
		if _, err := p.Send(ctx, topic, client.Message{Body: []byte(b)}); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	return bodies
}

// TestBroadcastGroup: three broadcasting members of one group each get every
// message once (all of them read every queue at the same time); a member
// restarted under its id, after a leader kill, resumes from its own offsets,
// a new member starts from the beginning, and a clustering member cannot
// join meanwhile.
func TestBroadcastGroup(t *testing.T) {
	c := servertest.New(t, 3)
	c.Leader()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*servertest.WaitTimeout)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, "config", 3, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	first := sendN(t, ctx, p, "config", 0, 45)
	end := topicEnd(t, ctx, cl, "config")

	newMember := func(id string) *client.Consumer {
		cfg := client.DefaultConsumerConfig("config", "fleet")
		cfg.Broadcast, cfg.MemberID, cfg.MaxMessages = true, id, 5
		cons, err := cl.NewConsumer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cons
	}
	readTo := func(cons *client.Consumer, end map[int32]uint64) []string {
		var got []string
		for !cons.CaughtUp(end) {
			recs, err := cons.Poll(ctx)
			if err != nil && !client.Retryable(err) {
				t.Errorf("member %s: %v", cons.MemberID(), err)
				return got
			}
			if ctx.Err() != nil {
				t.Errorf("member %s: not caught up after %d messages", cons.MemberID(), len(got))
				return got
			}
			for _, r := range recs {
				got = append(got, string(r.Body))
			}
		}
		sort.Strings(got)
		return got
	}

	members := []*client.Consumer{newMember("m1"), newMember("m2"), newMember("m3")}
	got := make([][]string, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = readTo(m, end)
		}()
	}
	wg.Wait()
	want := strings.Join(first, ",")
	for i, m := range members {
		if strings.Join(got[i], ",") != want {
			t.Errorf("member %s got %d messages, want each of the %d once: %v", m.MemberID(), len(got[i]), len(first), got[i])
		}
		if a := m.Assigned(); fmt.Sprint(a) != "[0 1 2]" {
			t.Errorf("member %s holds queues %v, want all of [0 1 2]", m.MemberID(), a)
		}
	}

	// A clustering member of the same group is refused while they are live.
	plain, err := cl.NewConsumer(client.DefaultConsumerConfig("config", "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Poll(ctx); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "broadcasting member") {
		t.Errorf("clustering member joining a broadcasting group: %v, want FailedPrecondition", err)
	}

	// m1 stops (Close commits its offsets); more messages arrive; m1 comes
	// back under its id and reads only those.
	if err := members[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	offs, err := cl.FetchMemberOffsets(ctx, "fleet", "m1", "config")
	if err != nil || fmt.Sprint(offs) != fmt.Sprint(end) {
		t.Fatalf("m1's own offsets after close: %v %v, want %v", offs, err, end)
	}
	if own, err := cl.FetchOffsets(ctx, "fleet", "config"); err != nil || len(own) != 0 {
		t.Errorf("the group's own offsets: %v %v, want none (members keep theirs)", own, err)
	}
	// The member offsets are in the log: a new leader has them.
	c.Kill(c.Leader())
	c.Leader()
	second := sendN(t, ctx, p, "config", 45, 60)
	end2 := topicEnd(t, ctx, cl, "config")
	again := newMember("m1")
	if resumed := readTo(again, end2); strings.Join(resumed, ",") != strings.Join(second, ",") {
		t.Errorf("restarted m1 read %v, want only the %d new messages", resumed, len(second))
	}
	// A member never seen before starts from the beginning.
	if fresh := readTo(newMember("m4"), end2); len(fresh) != 60 {
		t.Errorf("new member m4 read %d messages, want all 60", len(fresh))
	}

	g, err := cl.DescribeGroup(ctx, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if !g.GetSettings().GetBroadcast() {
		t.Error("describe: the group is not shown as broadcasting")
	}
	rows := map[string]int{}
	for _, q := range g.Queues {
		rows[q.MemberId]++
	}
	if rows["m1"] != 3 || rows["m4"] != 3 {
		t.Errorf("describe: queue rows per member %v, want 3 for each of m1 and m4", rows)
	}
	groups, err := cl.ListGroups(ctx)
	if err != nil || fmt.Sprint(groups) != "[fleet]" {
		t.Errorf("list groups: %v %v, want [fleet] (member offsets are not groups)", groups, err)
	}
	for _, m := range append(members[1:], again, plain) {
		m.Close(ctx)
	}
}
