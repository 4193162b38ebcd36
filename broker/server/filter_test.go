package server_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/servertest"
)

// consumeFiltered reads topic as a member of group until every queue is read up
// to end, then closes the consumer (which commits), and returns the bodies
// it got.
func consumeFiltered(t *testing.T, cl *client.Client, cfg client.ConsumerConfig, end map[int32]uint64) ([]string, *client.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*servertest.WaitTimeout)
	defer cancel()
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for !cons.CaughtUp(end) {
		recs, err := cons.Poll(ctx)
		if err != nil && !client.Retryable(err) {
			t.Fatalf("group %s: poll: %v", cfg.Group, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("group %s: not caught up to %v after %d messages (at %v)", cfg.Group, end, len(got), cons.Positions())
		}
		for _, r := range recs {
			got = append(got, string(r.Body))
		}
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatalf("group %s: close: %v", cfg.Group, err)
	}
	sort.Strings(got)
	return got, cons
}

// TestConsumersWithDifferentFilters: on one topic of a real group, consumer
// groups with different tag expressions and a SQL92 filter each get exactly
// their messages, once, and commit offsets up to each queue's end, past the
// messages filtered out.
func TestConsumersWithDifferentFilters(t *testing.T) {
	c := servertest.New(t, 3)
	c.Leader()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*servertest.WaitTimeout)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, "orders", 3, false); err != nil {
		t.Fatal(err)
	}
	tags := []string{"A", "B", "C", ""}
	want := map[string][]string{}
	p := cl.NewProducer()
	for i := 0; i < 120; i++ {
		tag := tags[i%len(tags)]
		body := fmt.Sprintf("m%03d-%s", i, tag)
		m := client.Message{Body: []byte(body), Tag: tag, Properties: map[string]string{"n": fmt.Sprint(i)}}
		if _, err := p.Send(ctx, "orders", m); err != nil {
			t.Fatal(err)
		}
		want["*"] = append(want["*"], body)
		if tag == "A" {
			want["A"] = append(want["A"], body)
		}
		if tag == "B" || tag == "C" {
			want["B || C"] = append(want["B || C"], body)
		}
		if i >= 60 && tag != "C" && tag != "" {
			want["sql"] = append(want["sql"], body)
		}
	}
	ti, err := cl.DescribeTopic(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]uint64{}
	for _, q := range ti.QueueInfo {
		end[q.Queue] = q.MaxOffset
	}

	for i, tc := range []struct{ group, tags, sql, want string }{
		{group: "all", tags: "*", want: "*"},
		{group: "only-a", tags: "A", want: "A"},
		{group: "b-or-c", tags: " B || C ", want: "B || C"},
		{group: "sql", sql: "n >= 60 AND TAGS IN ('A', 'B')", want: "sql"},
	} {
		cfg := client.DefaultConsumerConfig("orders", tc.group)
		cfg.Tags, cfg.SQL = tc.tags, tc.sql
		cfg.MaxMessages = uint32(7 + i) // several pulls per queue, windows of mixed tags
		got, cons := consumeFiltered(t, cl, cfg, end)
		var err error
		exp := append([]string{}, want[tc.want]...)
		sort.Strings(exp)
		if strings.Join(got, ",") != strings.Join(exp, ",") {
			t.Errorf("group %s (%q%q): got %d messages %v, want %d %v", tc.group, tc.tags, tc.sql, len(got), got, len(exp), exp)
		}
		if skipped := 120 - len(exp); cons.Filtered() != skipped {
			t.Errorf("group %s: the broker filtered %d messages, want %d", tc.group, cons.Filtered(), skipped)
		}
		// FetchOffsets reads the state of the node it reaches, which may
		// be a follower that has not applied the commit yet: poll.
		var committed map[int32]uint64
		for deadline := time.Now().Add(servertest.WaitTimeout); ; time.Sleep(20 * time.Millisecond) {
			if committed, err = cl.FetchOffsets(ctx, tc.group, "orders"); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(committed) == fmt.Sprint(end) || time.Now().After(deadline) {
				break
			}
		}
		for q, e := range end {
			if committed[q] != e {
				t.Errorf("group %s queue %d: committed %d, want the queue's end %d (past the filtered messages)", tc.group, q, committed[q], e)
			}
		}
	}

	// A bad expression is refused before any work, with the parser's words.
	cfg := client.DefaultConsumerConfig("orders", "bad")
	cfg.SQL = "n >"
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
	defer pcancel()
	_, err = cons.Poll(pctx)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at position 4: expected a value after '>'") {
		t.Errorf("poll with SQL %q: %v, want InvalidArgument naming the position", cfg.SQL, err)
	}
	cons.Close(ctx)
}
