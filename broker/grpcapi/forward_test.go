package grpcapi

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// TestForward: the adapter forwards a call exactly when the broker names
// another node as leader at a known address and the call was not
// forwarded already; otherwise the broker's error leaves as a status.
func TestForward(t *testing.T) {
	leader := &countingBroker{}
	srv := grpc.NewServer()
	api.RegisterBrokerServer(srv, leader)
	addr := serve(t, srv)
	p := NewPeers("n0", nil, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	forwardedCtx := metadata.NewIncomingContext(ctx, metadata.Pairs(forwardedKey, "n3"))

	produce := func(ctx context.Context, err error) (*api.ProduceResponse, error) {
		return forward(ctx, &fakeLeaders{id: "n1"}, p, func() (*api.ProduceResponse, error) {
			if err != nil {
				return nil, err
			}
			return &api.ProduceResponse{NodeId: "n1"}, nil
		}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.ProduceResponse, error) {
			if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get(forwardedKey)) != 1 || md.Get(forwardedKey)[0] != "n1" {
				t.Errorf("forwarded without %s naming this node: %v", forwardedKey, md)
			}
			return api.NewBrokerClient(cc).Produce(ctx, &api.ProduceRequest{Topic: "t"})
		})
	}
	cases := []struct {
		name      string
		ctx       context.Context
		err       error
		code      codes.Code
		forwarded bool
	}{
		{"served here", ctx, nil, codes.OK, false},
		{"another node leads: forwarded", ctx, &broker.NotLeaderError{LeaderID: "n2", PeerAddr: addr}, codes.OK, true},
		{"wrapped, still forwarded", ctx, errors.Join(errors.New("x"), &broker.NotLeaderError{LeaderID: "n2", PeerAddr: addr}), codes.OK, true},
		{"a forwarded call is never forwarded again", forwardedCtx, &broker.NotLeaderError{LeaderID: "n2", PeerAddr: addr}, codes.Unavailable, false},
		{"no leader known", ctx, &broker.NotLeaderError{}, codes.Unavailable, false},
		{"the leader's address is not known", ctx, &broker.NotLeaderError{LeaderID: "n2"}, codes.Unavailable, false},
		{"named as leader itself", ctx, &broker.NotLeaderError{LeaderID: "n1", PeerAddr: addr}, codes.Unavailable, false},
		{"another error", ctx, broker.ErrInvalidArgument, codes.InvalidArgument, false},
	}
	for _, c := range cases {
		before := leader.produces.Load()
		_, err := produce(c.ctx, c.err)
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
		if got := leader.produces.Load() > before; got != c.forwarded {
			t.Errorf("%s: forwarded %v, want %v", c.name, got, c.forwarded)
		}
	}
}

// fakeLeaders is this node (id) and the leader it knows, which the test
// changes with set.
type fakeLeaders struct {
	id      string
	mu      sync.Mutex
	leader  string
	changed chan struct{}
}

func (f *fakeLeaders) ID() string { return f.id }

func (f *fakeLeaders) set(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = id
	if f.changed != nil {
		close(f.changed)
	}
	f.changed = make(chan struct{})
}

func (f *fakeLeaders) AwaitLeaderOtherThan(id string, done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		l := f.leader
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		ch := f.changed
		f.mu.Unlock()
		if l != "" && l != id {
			return true
		}
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// pausedBroker never answers a produce: a leader stopped with SIGSTOP or
// cut off, whose connection stays open.
type pausedBroker struct {
	api.UnimplementedBrokerServer
	produces atomic.Int32
}

func (p *pausedBroker) Produce(ctx context.Context, _ *api.ProduceRequest) (*api.ProduceResponse, error) {
	p.produces.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestForwardGivesUpAReplacedLeader: a call forwarded to a leader that
// never answers is given up as soon as this node learns that another node
// leads, and runs again: forwarded to the new leader, which answers. While
// no other leader is known it waits on the old one.
func TestForwardGivesUpAReplacedLeader(t *testing.T) {
	paused := &pausedBroker{}
	ps := grpc.NewServer()
	api.RegisterBrokerServer(ps, paused)
	pausedAddr := serve(t, ps)
	next := &countingBroker{}
	ns := grpc.NewServer()
	api.RegisterBrokerServer(ns, next)
	nextAddr := serve(t, ns)
	p := NewPeers("n0", nil, nil)
	defer p.Close()
	lc := &fakeLeaders{id: "n1"}
	lc.set("n2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	named := &namedLeader{}
	named.moveTo("n2", pausedAddr)
	local, remote := named.local, produceRemote

	// No other leader known: the forward waits on the paused one until
	// the caller's deadline.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := forward(short, lc, p, local, remote)
	cancelShort()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("forward to a paused leader, no other known: %v; want DeadlineExceeded", err)
	}

	// n3 is elected while the forward waits on n2: the call goes to n3.
	start := time.Now()
	go func() {
		time.Sleep(200 * time.Millisecond)
		named.moveTo("n3", nextAddr)
		lc.set("n3")
	}()
	if _, err := forward(ctx, lc, p, local, remote); err != nil {
		t.Fatalf("forward while n3 replaced the paused n2: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second || next.produces.Load() != 1 || paused.produces.Load() != 2 {
		t.Fatalf("answered after %v; produces: %d on the new leader, %d on the paused one; want the new leader's answer soon after the change, 1 and 2", took, next.produces.Load(), paused.produces.Load())
	}
}

// busyLeader refuses every produce busy.
type busyLeader struct{ api.UnimplementedBrokerServer }

func (busyLeader) Produce(context.Context, *api.ProduceRequest) (*api.ProduceResponse, error) {
	return nil, toStatus(broker.ErrBusy)
}

// TestForwardBusyAfterReplacedLeader: a busy refusal means nothing of the
// call was done, except after the call was given up on a replaced leader,
// which may have done it: then the answer is an unknown outcome (Aborted),
// so that the client neither takes it for a failure nor gives up.
func TestForwardBusyAfterReplacedLeader(t *testing.T) {
	paused := &pausedBroker{}
	ps := grpc.NewServer()
	api.RegisterBrokerServer(ps, paused)
	pausedAddr := serve(t, ps)
	bs := grpc.NewServer()
	api.RegisterBrokerServer(bs, busyLeader{})
	busyAddr := serve(t, bs)
	p := NewPeers("n0", nil, nil)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lc := &fakeLeaders{id: "n1"}
	lc.set("n3")
	named := &namedLeader{}
	named.moveTo("n3", busyAddr)
	if _, err := forward(ctx, lc, p, named.local, produceRemote); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("forwarded straight to a busy leader: %v; want ResourceExhausted", err)
	}

	lc.set("n2")
	named.moveTo("n2", pausedAddr)
	go func() {
		for paused.produces.Load() == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		named.moveTo("n3", busyAddr)
		lc.set("n3")
	}()
	_, err := forward(ctx, lc, p, named.local, produceRemote)
	if status.Code(err) != codes.Aborted {
		t.Fatalf("busy on the new leader after the paused one was given up: %v; want Aborted (outcome unknown)", err)
	}
}

// namedLeader is this node's broker as forward sees it: another node
// leads, the one moveTo named last.
type namedLeader struct {
	mu  sync.Mutex
	err *broker.NotLeaderError
}

func (n *namedLeader) moveTo(id, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.err = &broker.NotLeaderError{LeaderID: id, PeerAddr: addr}
}

func (n *namedLeader) local() (*api.ProduceResponse, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return nil, n.err
}

// produceRemote forwards a produce call to topic t.
func produceRemote(ctx context.Context, cc grpc.ClientConnInterface) (*api.ProduceResponse, error) {
	return api.NewBrokerClient(cc).Produce(ctx, &api.ProduceRequest{Topic: "t"})
}
