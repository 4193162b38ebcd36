package client

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// stalledNode accepts TCP connections and never answers, like a SIGSTOPped
// process or a node behind a blackhole: the connection stays open, nothing
// comes back.
func stalledNode(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

// fakeNode answers Status with whatever leader() says and accepts produce
// requests only when it leads.
type fakeNode struct {
	api.UnimplementedBrokerServer
	id       string
	addr     string
	leader   func() (id, addr string, term uint64)
	produced atomic.Int64
}

func (f *fakeNode) Status(context.Context, *api.StatusRequest) (*api.StatusResponse, error) {
	id, addr, term := f.leader()
	return &api.StatusResponse{Term: term, LeaderId: id, LeaderAddress: addr, AnsweredBy: f.id}, nil
}

func (f *fakeNode) Produce(_ context.Context, r *api.ProduceRequest) (*api.ProduceResponse, error) {
	if id, _, _ := f.leader(); id != f.id {
		return nil, status.Error(codes.Unavailable, "not the leader")
	}
	f.produced.Add(1)
	acks := make([]*api.Ack, len(r.Messages))
	for i := range acks {
		acks[i] = &api.Ack{Offset: uint64(i)}
	}
	return &api.ProduceResponse{Acks: acks}, nil
}

func startFake(t *testing.T, f *fakeNode) {
	t.Helper()
	f.addr = serveBroker(t, f)
}

// serveBroker serves b on a free loopback port until the test ends and
// returns its address.
func serveBroker(t *testing.T, b api.BrokerServer) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	api.RegisterBrokerServer(s, b)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// TestPausedLeaderIsLeftForTheNewLeader: a produce sent to a leader that
// accepts connections but never answers moves to the new leader as soon as
// the other nodes name it, long before the attempt's own deadline (a
// minute here, so only the stall check can make the send succeed in time).
func TestPausedLeaderIsLeftForTheNewLeader(t *testing.T) {
	paused := stalledNode(t)
	var elected atomic.Bool
	var follower, next *fakeNode
	leader := func() (string, string, uint64) {
		if elected.Load() {
			return "n3", next.addr, 2
		}
		return "n1", paused, 1
	}
	follower = &fakeNode{id: "n2", leader: leader}
	next = &fakeNode{id: "n3", leader: leader}
	startFake(t, follower)
	startFake(t, next)

	c, err := New(Config{Servers: []string{paused, follower.addr, next.addr}, RequestTimeout: time.Minute, RetryTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.AfterFunc(300*time.Millisecond, func() { elected.Store(true) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	acks, err := c.NewProducer().Send(ctx, "t", Message{Body: []byte("x")})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if len(acks) != 1 || next.produced.Load() != 1 {
		t.Fatalf("acks %d, produced at the new leader %d; want 1 and 1", len(acks), next.produced.Load())
	}
	t.Logf("acknowledged by the new leader %v after the start (leader elected at 300ms)", time.Since(start).Round(time.Millisecond))
}

// TestDiscoveryDoesNotWaitForAPausedLeader: a fresh client (one CLI
// command) whose first server is a paused leader learns from the followers
// who leads without waiting for that leader's answer. Waiting for it would
// take at least the 2 s cap of one Status attempt.
func TestDiscoveryDoesNotWaitForAPausedLeader(t *testing.T) {
	paused := stalledNode(t)
	leader := func() (string, string, uint64) { return "n1", paused, 1 }
	f2 := &fakeNode{id: "n2", leader: leader}
	f3 := &fakeNode{id: "n3", leader: leader}
	startFake(t, f2)
	startFake(t, f3)
	c, err := New(Config{Servers: []string{paused, f2.addr, f3.addr}, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	st, err := c.Status(context.Background())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaderAddress != paused {
		t.Fatalf("status names %s, want the paused leader %s as the followers see it", st.LeaderAddress, paused)
	}
	if took >= 2*time.Second {
		t.Fatalf("Status waited %v for the paused leader", took)
	}
	start = time.Now()
	c.refreshLeader(context.Background())
	if took := time.Since(start); took >= time.Second {
		t.Fatalf("refreshLeader waited %v (its whole bound) for the paused leader", took)
	}
	if c.leaderAddr() != paused {
		t.Fatalf("leader %q, want %s", c.leaderAddr(), paused)
	}
}

// TestAttemptTimeoutGrowsWithRequestAndWait: a large produce request and a
// long-poll pull get more than a small call's RequestTimeout.
func TestAttemptTimeoutGrowsWithRequestAndWait(t *testing.T) {
	c, err := New(Config{Servers: []string{"127.0.0.1:1"}, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		size int
		wait time.Duration
		want time.Duration
	}{
		{0, 0, time.Second},
		{AttemptBytesPerSecond, 0, 2 * time.Second},
		{AttemptBytesPerSecond / 4, 0, 1250 * time.Millisecond},
		{0, 5 * time.Second, 6 * time.Second},
	} {
		if got := c.attemptTimeout(tc.size, tc.wait); got != tc.want {
			t.Errorf("attemptTimeout(%d, %v) = %v, want %v", tc.size, tc.wait, got, tc.want)
		}
	}
}

// TestStatusTakesTheLeadersOwnAnswer: when a follower answers first, the
// leader's own answer of the same term still ends the wait at once and is
// the one returned (it was ignored for not having a higher term, so Status
// waited StallTimeout and returned the follower's view).
func TestStatusTakesTheLeadersOwnAnswer(t *testing.T) {
	paused := stalledNode(t)
	var leaderNode *fakeNode
	leader := func() (string, string, uint64) { return "n3", leaderNode.addr, 4 }
	f2 := &fakeNode{id: "n2", leader: leader}
	leaderNode = &fakeNode{id: "n3", leader: leader}
	startFake(t, f2)
	startFake(t, leaderNode)
	c, err := New(Config{Servers: []string{paused, f2.addr, leaderNode.addr}, StallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 20; i++ { // the follower answers first in some rounds
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := c.Status(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if st.AnsweredBy != "n3" {
			t.Fatalf("round %d: answer of %s, want the leader's own", i, st.AnsweredBy)
		}
	}
}
