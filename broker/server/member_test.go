package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/broker"
)

// TestMemberAddWithABadAddressChangesNothing: `member add` with an address
// that is not HOST:PORT, or where nothing listens, is refused before the
// configuration changes; one where something listens that never catches up
// is removed again before the caller's deadline, and the caller is told so
// (FailedPrecondition), not DeadlineExceeded. Otherwise each would leave a
// broken member whose unreachable address the leader logs every 170 ms.
func TestMemberAddWithABadAddressChangesNothing(t *testing.T) {
	c := newCluster(t, 3, nil)
	b := c.Node(c.Leader()).Broker()
	members := func() string {
		st, err := b.Status()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, n := range st.Nodes {
			ids = append(ids, n.ID)
		}
		return strings.Join(ids, ",")
	}
	before := members()
	ctx := ctxT(t, 60*time.Second)

	for _, addr := range []string{"not-an-address", "127.0.0.1:0", ":7001", "no-such-host.invalid:7001"} {
		_, err := b.AddMember(ctx, "n4", addr)
		if !errorsIs(err, broker.ErrInvalidArgument) || !strings.Contains(err.Error(), addr) {
			t.Errorf("member add n4@%s: %v, want an invalid-argument error naming the address", addr, err)
		}
	}
	dead := freeAddr(t)
	_, err := b.AddMember(ctx, "n4", dead)
	if !errorsIs(err, broker.ErrFailedPrecondition) || !strings.Contains(err.Error(), "nothing answers at raft address "+dead) {
		t.Errorf("member add n4@%s (nothing listening): %v", dead, err)
	}
	if got := members(); got != before {
		t.Fatalf("refused adds changed the members: %s, was %s", got, before)
	}

	// Something listens, but it is no raft node: it never catches up.
	l, err := net.Listen("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	cl := c.Client(t)
	actx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	start := time.Now()
	_, err = cl.AddMember(actx, "n4", l.Addr().String())
	took := time.Since(start)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "removed again") {
		t.Fatalf("member add of a node that never catches up: %v (after %v), want FailedPrecondition saying it was removed again", err, took)
	}
	t.Logf("refused after %v: %v", took.Round(time.Millisecond), err)
	waitFor(t, 10*time.Second, "the members as before", func() bool { return members() == before })
	for i, s := range c.Nodes() { // a follower applies the removal a moment after the leader
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d to have 3 servers in its configuration", i), func() bool {
			servers, err := s.Node().Servers()
			return err == nil && len(servers) == 3
		})
	}
}
