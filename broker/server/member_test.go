package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
)

// TestMemberAddWithABadAddressChangesNothing: `member add` with an address
// that is not HOST:PORT, or where nothing listens, is refused before the
// configuration changes, and so is one where something that is no raft
// node listens. A raft node that never reports its state is removed again
// before the caller's deadline, and the caller is told so
// (FailedPrecondition), not DeadlineExceeded; holding part of the group's
// log by then, it is let through the same check when added again.
// Otherwise each would leave a broken member whose unreachable address the
// leader logs every 170 ms.
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

	// Something listens, but it is no raft node: it does not answer the
	// raft calls that ask whether it holds a log.
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
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no answer to a raft call") || !strings.Contains(err.Error(), "the group is unchanged") {
		t.Fatalf("member add of something that is no raft node: %v (after %v), want FailedPrecondition saying it did not answer and the group is unchanged", err, took)
	}
	t.Logf("refused after %v: %v", took.Round(time.Millisecond), err)

	// A raft node whose state the leader never hears (its advertised
	// node-to-node address is dead).
	cfg := outsideNode(t, "n4")
	cfg.Broker.PeerAddr = freeAddr(t)
	n4, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n4.Kill()
	for _, what := range []string{"an empty node", "a node holding part of the log"} {
		actx, cancel := context.WithTimeout(ctx, 8*time.Second)
		_, err = cl.AddMember(actx, "n4", cfg.Raft.BindAddr)
		cancel()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "removed again") {
			t.Fatalf("member add of %s that never reports its state: %v, want FailedPrecondition saying it was removed again", what, err)
		}
		t.Logf("%s: %v", what, err)
		waitFor(t, 10*time.Second, "the members as before", func() bool { return members() == before })
	}
	if n4.Node().Stats().LastIndex == 0 {
		t.Error("n4 received none of the log")
	}
	waitFor(t, 10*time.Second, "the members as before", func() bool { return members() == before })
	for i, s := range c.Nodes() { // a follower applies the removal a moment after the leader
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d to have 3 servers in its configuration", i), func() bool {
			servers, err := s.Node().Servers()
			return err == nil && len(servers) == 3
		})
	}
}

// outsideNode is the config of a node id outside any cluster of the test,
// with an empty data directory, to be added with member add (Join).
func outsideNode(t *testing.T, id string) server.Config {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = freeAddr(t)
	cfg.Raft.ID = id
	cfg.Raft.BindAddr = freeAddr(t)
	cfg.Broker.ClientAddr = cfg.Listen
	cfg.Raft.Join = true
	cfg.Broker.StatePeriod = 50 * time.Millisecond
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Info, Output: testWriter{t}})
	return cfg
}

// TestMemberAddRefusesANodeWithItsOwnLog: a node started on an empty data
// directory without peers and without Join leads a group of one, itself;
// such a node is refused by member add before the configuration changes,
// with an error that says what to do; the group keeps its leader and its
// term, and the refused node keeps its own group, term and log.
func TestMemberAddRefusesANodeWithItsOwnLog(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	ctx := ctxT(t, 60*time.Second)

	cfg := outsideNode(t, "n4")
	cfg.Raft.Join = false // the default: a group of its own
	own, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Kill()
	waitFor(t, 30*time.Second, "n4 to lead its own group", func() bool { return own.Node().Role() == election.Leader && own.Node().Ready() })
	if servers, err := own.Node().Servers(); err != nil || len(servers) != 1 || servers[0].ID != "n4" || !servers[0].Voter {
		t.Fatalf("n4's configuration: %+v (%v), want n4 alone", servers, err)
	}
	ownBefore := own.Node().Stats()
	before := c.Node(l).Node().Stats()

	_, err = c.Client(t).AddMember(ctx, "n4", cfg.Raft.BindAddr)
	want := "node n4 at " + cfg.Raft.BindAddr + " already holds a log of its own (term "
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "it was started without --join; stop it, empty its data directory and start it with --join") {
		t.Fatalf("member add of a node with its own log: %v, want FailedPrecondition saying %q and what to do", err, want)
	}
	t.Logf("refused: %v", err)

	after := c.Node(l).Node().Stats()
	if c.Leader() != l || after.Term != before.Term || after.LeaderChanges != before.LeaderChanges {
		t.Errorf("the group's leader changed: was n%d at term %d, now n%d at term %d (%d leader changes, were %d)",
			l+1, before.Term, c.Leader()+1, after.Term, after.LeaderChanges, before.LeaderChanges)
	}
	for i, s := range c.Nodes() {
		if servers, err := s.Node().Servers(); err != nil || len(servers) != 3 {
			t.Errorf("node %d: configuration %v (%v), want the 3 members", i, servers, err)
		}
	}
	ownAfter := own.Node().Stats()
	if ownAfter.Role != election.Leader || ownAfter.Term != ownBefore.Term || ownAfter.LastIndex < ownBefore.LastIndex {
		t.Errorf("the refused node changed: %+v, was %+v", ownAfter, ownBefore)
	}
}

// TestMemberAddOfAFormerMember: a node started with Join on an empty data
// directory is added, catches up and becomes a voter; removed, stopped and started again with its data, it holds this
// group's log, and member add takes it back.
func TestMemberAddOfAFormerMember(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := ctxT(t, 90*time.Second)
	if _, err := c.Node(c.Leader()).Broker().CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := c.produce(ctx, broker.ProduceRequest{Topic: "t", ProducerID: "p1", Seq: uint64(i),
			Messages: []broker.ProduceMessage{{Body: fmt.Appendf(nil, "m%d", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := outsideNode(t, "n4")
	n4, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { n4.Kill() }()
	add := func(what string) {
		t.Helper()
		r, err := c.Node(c.Leader()).Broker().AddMember(ctx, "n4", cfg.Raft.BindAddr)
		if err != nil || !r {
			t.Fatalf("member add of %s: %v, %v", what, r, err)
		}
		leaderLast := c.Node(c.Leader()).Node().Stats().CommitIndex
		waitFor(t, 30*time.Second, "n4 to apply the group's log", func() bool { return n4.Node().Stats().AppliedIndex >= leaderLast })
	}
	add("an empty node")

	if err := c.Node(c.Leader()).Broker().RemoveMember(ctx, "n4", true); err != nil {
		t.Fatal(err)
	}
	if err := n4.Close(); err != nil {
		t.Fatal(err)
	}
	if n4, err = server.Start(cfg); err != nil {
		t.Fatal(err)
	}
	if n4.Node().Stats().LastIndex == 0 {
		t.Fatal("n4 restarted without its log")
	}
	add("a removed member restarted with its data")
	servers, err := c.Node(c.Leader()).Node().Servers()
	if err != nil || len(servers) != 4 || !servers[3].Voter {
		t.Fatalf("configuration %v (%v), want n4 a voter among 4", servers, err)
	}
}
