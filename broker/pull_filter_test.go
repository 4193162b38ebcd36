package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func tagged(q int32, tags ...string) []ProduceMessage {
	out := make([]ProduceMessage, len(tags))
	for i, tag := range tags {
		out[i] = ProduceMessage{Body: []byte(fmt.Sprintf("%s-%d", tag, i)), Tag: tag, Queue: q, HasQueue: true,
			Properties: map[string]string{"n": fmt.Sprint(i)}}
	}
	return out
}

func TestPullFiltersByTag(t *testing.T) {
	b, _ := newFakeBroker(t)
	ctx := context.Background()
	// Offsets 0..5 of queue 0: A B A C "" B, over two entries.
	produce(t, b, ProduceRequest{Topic: "t", Messages: tagged(0, "A", "B", "A")})
	produce(t, b, ProduceRequest{Topic: "t", Messages: tagged(0, "C", "", "B")})

	res, err := b.Pull(ctx, PullRequest{Topic: "t", Queue: 0, FilterType: "TAG", Filter: "A || C"})
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, m := range res.Messages {
		got = append(got, m.Offset)
		if m.Tag != "A" && m.Tag != "C" {
			t.Errorf("served tag %q through filter A || C", m.Tag)
		}
	}
	if fmt.Sprint(got) != "[0 2 3]" || res.Filtered != 3 || res.NextOffset != 6 || res.Status != PullFound {
		t.Fatalf("pull A || C: offsets %v, filtered %d, next %d, status %d; want [0 2 3], 3, 6, found", got, res.Filtered, res.NextOffset, res.Status)
	}

	// Limited to one message: next offset stops right after it, and a later
	// pull continues from there.
	res, err = b.Pull(ctx, PullRequest{Topic: "t", Queue: 0, Offset: 1, MaxMessages: 1, Filter: "A || C"})
	if err != nil || len(res.Messages) != 1 || res.Messages[0].Offset != 2 || res.NextOffset != 3 || res.Filtered != 1 {
		t.Fatalf("pull of one from 1: %+v %v; want offset 2, next 3, 1 filtered", res, err)
	}
}

func TestPullAllFilteredAdvancesWithoutWaiting(t *testing.T) {
	b, _ := newFakeBroker(t)
	produce(t, b, ProduceRequest{Topic: "t", Messages: tagged(0, "B", "B", "B")})
	start := time.Now()
	res, err := b.Pull(context.Background(), PullRequest{Topic: "t", Queue: 0, Filter: "A", Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != PullFound || len(res.Messages) != 0 || res.NextOffset != 3 || res.Filtered != 3 {
		t.Fatalf("all filtered: status %d, %d messages, next %d, filtered %d; want found, 0, 3, 3", res.Status, len(res.Messages), res.NextOffset, res.Filtered)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a pull that scanned messages waited %s for more", d)
	}
	// At the tail nothing is scanned: the long poll waits, then wakes on a
	// matching message.
	got := make(chan PullResult, 1)
	go func() {
		res, err := b.Pull(context.Background(), PullRequest{Topic: "t", Queue: 0, Offset: 3, Filter: "A", Wait: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	time.Sleep(20 * time.Millisecond)
	produce(t, b, ProduceRequest{Topic: "t", Messages: tagged(0, "A")})
	select {
	case res := <-got:
		if res.Status != PullFound || len(res.Messages) != 1 || res.Messages[0].Offset != 3 {
			t.Errorf("long poll with a filter: %+v, want the message at offset 3", res)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("long poll with a filter did not wake on a matching message")
	}
}

func TestPullFiltersBySQL(t *testing.T) {
	b, _ := newFakeBroker(t)
	produce(t, b, ProduceRequest{Topic: "t", Messages: tagged(1, "A", "B", "A", "B")}) // n = 0..3
	res, err := b.Pull(context.Background(), PullRequest{Topic: "t", Queue: 1, FilterType: "SQL92", Filter: "n >= 1 AND TAGS = 'A'"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 1 || res.Messages[0].Offset != 2 || res.Messages[0].Properties["n"] != "2" || res.Filtered != 3 || res.NextOffset != 4 {
		t.Fatalf("SQL pull: %+v; want offset 2 only, 3 filtered, next 4", res)
	}
}

func TestPullBadFilterIsInvalidArgument(t *testing.T) {
	b, _ := newFakeBroker(t)
	produce(t, b, ProduceRequest{Topic: "t", Messages: tagged(0, "A")})
	for _, c := range []struct{ typ, expr, want string }{
		{"SQL92", "a >", "position 4"},
		{"TAG", "A || *", "cannot be joined"},
		{"REGEX", "A", "want TAG or SQL92"},
	} {
		_, err := b.Pull(context.Background(), PullRequest{Topic: "t", Queue: 0, FilterType: c.typ, Filter: c.expr, Wait: 5 * time.Second})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("filter %s %q: %v, want invalid argument containing %q", c.typ, c.expr, err, c.want)
		}
	}
}

// TestPullFilterScanIsBounded: a pull skips at most maxScanFactor times its
// byte limit of filtered-out bodies; pulls that follow go on from there.
func TestPullFilterScanIsBounded(t *testing.T) {
	b, _ := newFakeBroker(t)
	body := make([]byte, 1000)
	for i := 0; i < 20; i++ {
		produce(t, b, ProduceRequest{Topic: "t", Messages: []ProduceMessage{{Body: body, Tag: "B", Queue: 0, HasQueue: true}}})
	}
	var next uint64
	pulls := 0
	for next < 20 {
		res, err := b.Pull(context.Background(), PullRequest{Topic: "t", Queue: 0, Offset: next, MaxBytes: 1024, Filter: "A"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != PullFound || res.NextOffset <= next || res.Filtered != int(res.NextOffset-next) || res.Filtered > 5 {
			t.Fatalf("pull from %d: status %d next %d filtered %d; want found, progress, at most 5 skipped", next, res.Status, res.NextOffset, res.Filtered)
		}
		next = res.NextOffset
		pulls++
	}
	if pulls < 4 {
		t.Errorf("%d pulls skipped 20 KB with a 1 KiB limit, want at least 4", pulls)
	}
}
