package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/store"
)

// The tests in this file run the broker's logic over fakeReplica: no raft,
// no TCP, no disk.

func produce(t *testing.T, b *Broker, req ProduceRequest) ProduceResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := b.Produce(ctx, req)
	if err != nil {
		t.Fatalf("produce %+v: %v", req, err)
	}
	return res
}

func inQueue(q int32, bodies ...string) []ProduceMessage {
	out := make([]ProduceMessage, len(bodies))
	for i, s := range bodies {
		out[i] = ProduceMessage{Body: []byte(s), Queue: q, HasQueue: true}
	}
	return out
}

func TestProduceAcksOffsetsPerQueue(t *testing.T) {
	b, _ := newFakeBroker(t)
	first := produce(t, b, ProduceRequest{Topic: "t", Messages: append(inQueue(0, "a", "b"), inQueue(1, "c")...)})
	want := []store.Ack{{Queue: 0, Offset: 0}, {Queue: 0, Offset: 1}, {Queue: 1, Offset: 0}}
	if len(first.Acks) != len(want) {
		t.Fatalf("acks %v, want %d", first.Acks, len(want))
	}
	for i, a := range first.Acks {
		if a.Queue != want[i].Queue || a.Offset != want[i].Offset || a.ID() == "" {
			t.Errorf("ack %d: %+v, want queue %d offset %d and an id", i, a, want[i].Queue, want[i].Offset)
		}
	}
	if first.Acks[0].ID() == first.Acks[1].ID() {
		t.Errorf("two messages share id %s", first.Acks[0].ID())
	}
	second := produce(t, b, ProduceRequest{Topic: "t", Messages: inQueue(0, "d")})
	if a := second.Acks[0]; a.Queue != 0 || a.Offset != 2 {
		t.Errorf("next ack in queue 0: %+v, want offset 2", a)
	}
	ti, err := b.Topic("t")
	if err != nil || len(ti.Queues) != b.cfg.DefaultQueues {
		t.Fatalf("auto-created topic: %+v %v, want %d queues", ti, err, b.cfg.DefaultQueues)
	}
}

func TestProduceRetryGetsTheFirstAcks(t *testing.T) {
	b, _ := newFakeBroker(t)
	req := ProduceRequest{Topic: "t", ProducerID: "p", Seq: 7, Messages: []ProduceMessage{{Body: []byte("x")}, {Body: []byte("y")}}}
	first := produce(t, b, req)
	again := produce(t, b, req)
	if !again.Duplicate || first.Duplicate {
		t.Errorf("duplicate flags: first %v, retry %v; want false, true", first.Duplicate, again.Duplicate)
	}
	if fmt.Sprint(first.Acks) != fmt.Sprint(again.Acks) {
		t.Errorf("retry acks %v, want the first attempt's %v", again.Acks, first.Acks)
	}
}

func TestProduceMapsReplicaErrors(t *testing.T) {
	for _, tc := range []struct {
		raft error
		want error
	}{
		{fmt.Errorf("wrapped: %w", store.ErrUnknownOutcome), ErrUnknownOutcome},
		{store.ErrTimeout, ErrTimeout},
		{store.ErrShutdown, ErrShutdown},
		{fmt.Errorf("entry 9: %w", store.ErrDamaged), ErrUnknownOutcome},
		{store.ErrTooLarge, ErrTooLarge},
	} {
		t.Run(tc.raft.Error(), func(t *testing.T) {
			b, f := newFakeBroker(t)
			if _, err := b.CreateTopic(context.Background(), "t", 2, false); err != nil {
				t.Fatal(err)
			}
			f.fail(tc.raft)
			_, err := b.Produce(context.Background(), ProduceRequest{Topic: "t", Messages: inQueue(0, "m")})
			if !errors.Is(err, tc.want) {
				t.Fatalf("produce: %v, want %v", err, tc.want)
			}
			if tc.want != ErrShutdown && !errors.Is(err, tc.raft) {
				t.Errorf("produce: %v, replica's error is not kept in the chain", err)
			}
		})
	}
}

func TestProduceRefusedRequestIsRejected(t *testing.T) {
	b, _ := newFakeBroker(t)
	b.cfg.AutoCreateTopics = false
	_, err := b.Produce(context.Background(), ProduceRequest{Topic: "nope", Messages: inQueue(0, "m")})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("produce to an unknown topic without auto-create: %v, want ErrNotFound", err)
	}
}

func TestNotLeaderNamesTheLeader(t *testing.T) {
	b, f := newFakeBroker(t)
	f.RegisterNode(context.Background(), store.NodeInfo{ID: "n2", ClientAddr: "n2:9000", PeerAddr: "n2:9001"})
	f.setRole(election.Follower, false, "n2")
	_, err := b.Produce(context.Background(), ProduceRequest{Topic: "t", Messages: inQueue(0, "m")})
	var nl *NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("produce on a follower: %v, want a NotLeaderError", err)
	}
	if nl.LeaderID != "n2" || nl.ClientAddr != "n2:9000" || nl.PeerAddr != "n2:9001" {
		t.Errorf("NotLeaderError %+v, want n2 and its addresses", nl)
	}
	if _, err := b.CreateTopic(context.Background(), "t", 1, false); !errors.Is(err, ErrNotLeader) {
		t.Errorf("create topic on a follower: %v, want ErrNotLeader", err)
	}

	// Raft itself says not leader (leadership moved between the check and
	// the write): the same error, naming the leader.
	f.setRole(election.Leader, true, "n1")
	if _, err := b.CreateTopic(context.Background(), "t", 1, false); err != nil {
		t.Fatal(err)
	}
	f.fail(store.ErrNotLeader)
	f.setRole(election.Leader, true, "n2") // raft already knows the new leader
	_, err = b.Produce(context.Background(), ProduceRequest{Topic: "t", Messages: inQueue(0, "m")})
	if !errors.As(err, &nl) || nl.ClientAddr != "n2:9000" {
		t.Errorf("produce that raft refused as not leader: %v, want a NotLeaderError naming n2", err)
	}
}

func TestUnreadyLeaderIsUnavailable(t *testing.T) {
	b, f := newFakeBroker(t)
	f.setRole(election.Leader, false, "n1")
	if _, err := b.Produce(context.Background(), ProduceRequest{Topic: "t", Messages: inQueue(0, "m")}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("produce on a leader before its barrier: %v, want ErrUnavailable", err)
	}
	if _, err := b.Pull(context.Background(), PullRequest{Topic: "t"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("pull on a leader before its barrier: %v, want ErrUnavailable", err)
	}
}

func TestCreateTopic(t *testing.T) {
	b, _ := newFakeBroker(t)
	ctx := context.Background()
	ti, err := b.CreateTopic(ctx, "orders", 3, false)
	if err != nil || ti.Name != "orders" || len(ti.Queues) != 3 {
		t.Fatalf("create: %+v %v", ti, err)
	}
	if _, err := b.CreateTopic(ctx, "orders", 3, true); err != nil {
		t.Errorf("create if not exists, same queues: %v", err)
	}
	_, err = b.CreateTopic(ctx, "orders", 5, true)
	if !errors.Is(err, ErrAlreadyExists) || !errors.Is(err, store.ErrTopicExists) {
		t.Errorf("create with other queues: %v, want ErrAlreadyExists wrapping store.ErrTopicExists", err)
	}
	if _, err := b.CreateTopic(ctx, "bad name", 1, false); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("create with a bad name: %v, want ErrInvalidArgument", err)
	}
	if _, err := b.CreateTopic(ctx, "many", store.MaxQueues+1, false); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("create with too many queues: %v, want ErrInvalidArgument", err)
	}
}

func TestCommitAndFetchOffsets(t *testing.T) {
	b, _ := newFakeBroker(t)
	ctx := context.Background()
	produce(t, b, ProduceRequest{Topic: "t", Messages: inQueue(1, "a", "b", "c")})
	if err := b.CommitOffsets(ctx, "g", []store.OffsetEntry{{Topic: "t", Queue: 1, Offset: 2}}); err != nil {
		t.Fatal(err)
	}
	got, err := b.FetchOffsets("g", "t")
	if err != nil || got[1] != 2 || len(got) != 1 {
		t.Errorf("fetch: %v %v, want queue 1 at 2", got, err)
	}
	if err := b.CommitOffsets(ctx, "g", []store.OffsetEntry{{Topic: "t", Queue: 1, Offset: 4}}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("commit past the end: %v, want ErrOutOfRange", err)
	}
	if err := b.CommitOffsets(ctx, "g", []store.OffsetEntry{{Topic: "nope", Queue: 0}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("commit for an unknown topic: %v, want ErrNotFound", err)
	}
	if _, err := b.FetchOffsets("g", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("fetch for an unknown topic: %v, want ErrNotFound", err)
	}
}

// TestPullRefusedAtOnceOnDamage: once the log reports damage (raft
// replaced entries this node applied), the next pull serves nothing from
// this node, without waiting for the state loop's next round.
func TestPullRefusedAtOnceOnDamage(t *testing.T) {
	b, f := newFakeBroker(t)
	ctx := context.Background()
	produce(t, b, ProduceRequest{Topic: "t", Messages: inQueue(0, "m0", "m1")})
	if res, err := b.Pull(ctx, PullRequest{Topic: "t", Queue: 0}); err != nil || len(res.Messages) != 2 {
		t.Fatalf("pull before the damage: %+v %v", res, err)
	}
	f.damageAt(1)
	res, err := b.Pull(ctx, PullRequest{Topic: "t", Queue: 0})
	if err == nil && len(res.Messages) > 0 {
		t.Fatalf("a pull right after the log reported damage was served %d messages", len(res.Messages))
	}
	if _, ok := b.Damaged(); !ok {
		t.Fatal("the node is not marked damaged after the pull")
	}
}

func TestPullServesWhatWasProduced(t *testing.T) {
	b, _ := newFakeBroker(t)
	ctx := context.Background()
	produce(t, b, ProduceRequest{Topic: "t", Messages: inQueue(0, "m0", "m1")})
	produce(t, b, ProduceRequest{Topic: "t", Messages: append(inQueue(1, "other"), inQueue(0, "m2", "m3")...)})

	res, err := b.Pull(ctx, PullRequest{Topic: "t", Queue: 0, Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != PullFound || res.NextOffset != 4 || len(res.Messages) != 3 {
		t.Fatalf("pull: status %d next %d, %d messages; want found, 4, 3", res.Status, res.NextOffset, len(res.Messages))
	}
	for i, m := range res.Messages {
		if want := fmt.Sprintf("m%d", i+1); string(m.Body) != want || m.Offset != uint64(i+1) {
			t.Errorf("message %d: offset %d body %q, want %d %q", i, m.Offset, m.Body, i+1, want)
		}
	}
	if !res.ServedByLeader || res.Suggestion.NodeID != "n1" {
		t.Errorf("served by leader %v, suggestion %+v; want the leader itself", res.ServedByLeader, res.Suggestion)
	}

	tail, err := b.Pull(ctx, PullRequest{Topic: "t", Queue: 0, Offset: 4})
	if err != nil || tail.Status != PullNoNew {
		t.Errorf("pull at the tail: %+v %v, want no new", tail, err)
	}
	if _, err := b.Pull(ctx, PullRequest{Topic: "t", Queue: 0, Offset: 9}); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("pull past the end on the leader: %v, want ErrOutOfRange", err)
	}
}

func TestPullLongPollWakesOnProduce(t *testing.T) {
	b, _ := newFakeBroker(t)
	produce(t, b, ProduceRequest{Topic: "t", Messages: inQueue(2, "first")})
	got := make(chan PullResult, 1)
	go func() {
		res, err := b.Pull(context.Background(), PullRequest{Topic: "t", Queue: 2, Offset: 1, Wait: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	time.Sleep(20 * time.Millisecond) // let it wait; a late start still finds the message
	produce(t, b, ProduceRequest{Topic: "t", Messages: inQueue(2, "second")})
	select {
	case res := <-got:
		if res.Status != PullFound || len(res.Messages) != 1 || string(res.Messages[0].Body) != "second" {
			t.Errorf("long poll: %+v, want the second message", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll did not wake on produce")
	}
}

func TestFollowerWithoutTheTopicSendsToLeader(t *testing.T) {
	b, f := newFakeBroker(t)
	f.RegisterNode(context.Background(), store.NodeInfo{ID: "n2", ClientAddr: "n2:9000"})
	f.setRole(election.Follower, false, "n2")
	res, err := b.Pull(context.Background(), PullRequest{Topic: "unseen"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != PullRetryElsewhere || res.Suggestion.NodeID != "n2" {
		t.Errorf("follower pull of an unknown topic: status %d suggestion %+v, want retry elsewhere at n2", res.Status, res.Suggestion)
	}
}

func TestMembershipErrorsMapped(t *testing.T) {
	b, _ := newFakeBroker(t)
	ctx := context.Background()
	if err := b.RemoveMember(ctx, "n9", false); !errors.Is(err, ErrNotFound) || !errors.Is(err, election.ErrNoSuchServer) {
		t.Errorf("remove an unknown server: %v, want ErrNotFound wrapping election.ErrNoSuchServer", err)
	}
	if err := b.RemoveMember(ctx, "n1", false); !errors.Is(err, ErrFailedPrecondition) || !errors.Is(err, election.ErrRefused) {
		t.Errorf("remove the leader: %v, want ErrFailedPrecondition wrapping election.ErrRefused", err)
	}
}
