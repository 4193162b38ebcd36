package election

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestNewGroupKeepsTheLog: a follower's stores of a 3-node group (with a
// snapshot and entries after it) start, with NewGroup, as a one-node group
// at a new raft address while the old members are gone. The node elects
// itself without waiting out an unclean start's recovery, applies every
// entry, keeps every log entry (nothing deleted), and is the only member.
func TestNewGroupKeepsTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a 3-node raft group")
	}
	config := groupConfigs(t, 3, time.Minute)
	stores := make([]memStores, 3)
	nodes := make([]*Node, 3)
	t.Cleanup(func() {
		for _, n := range nodes {
			if n != nil {
				n.Kill()
			}
		}
	})
	for i := range nodes {
		stores[i] = memStores{raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()}
		n, err := Start(config(i), newTestFSM(), RaftStores{Log: stores[i].log, Stable: stores[i].stable, Snapshots: stores[i].snaps})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
	}
	leader := readyLeader(t, nodes, -1)
	follower := (leader + 1) % 3
	apply := func(from, to int) {
		t.Helper()
		for k := from; k < to; k++ {
			if err := nodes[leader].Apply(fmt.Appendf(nil, "m%d", k), 10*time.Second).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(0, 20)
	waitUntil(t, 10*time.Second, "the follower to apply m19", func() bool { return nodes[follower].fsm.(*testFSM).Has("m19") })
	if _, err := nodes[follower].Snapshot(); err != nil {
		t.Fatal(err)
	}
	apply(20, 40)
	last, _ := stores[leader].log.LastIndex()
	waitUntil(t, 10*time.Second, "the follower to hold every entry", func() bool {
		l, _ := stores[follower].log.LastIndex()
		return l == last
	})
	for i := range nodes {
		nodes[i].Kill()
		nodes[i] = nil
	}

	cfg := config(follower)
	cfg.Peers = nil
	cfg.BindAddr = testPorts(t, 1)[0] // a new address
	cfg.NewGroup = true
	fsm := newTestFSM()
	s := stores[follower]
	n, err := Start(cfg, fsm, RaftStores{Log: s.log, Stable: s.stable, Snapshots: s.snaps, Unclean: true})
	if err != nil {
		t.Fatal(err)
	}
	nodes[follower] = n
	// The recovery of an unclean start would wait a minute here.
	waitUntil(t, 5*time.Second, "the recovered node to lead", n.Ready)
	if n.Recovering() {
		t.Error("a node recovered as a new group waits as after an unclean start")
	}
	for k := range 40 {
		if !fsm.Has(fmt.Sprintf("m%d", k)) {
			t.Fatalf("m%d was not applied after the recovery", k)
		}
	}
	if first, _ := s.log.FirstIndex(); first != 1 {
		t.Errorf("first log index %d after the recovery, want 1: entries were deleted", first)
	}
	if l, _ := s.log.LastIndex(); l <= last+1 {
		t.Errorf("last log index %d, want beyond %d (the new configuration and the new leader's entry)", l, last+1)
	}
	var e raft.Log
	if err := s.log.GetLog(last+1, &e); err != nil || e.Type != raft.LogConfiguration {
		t.Errorf("entry %d: %v, type %v; want the new configuration", last+1, err, e.Type)
	}
	servers, err := n.Servers()
	if err != nil {
		t.Fatal(err)
	}
	if want := []Server{{ID: cfg.ID, Addr: cfg.BindAddr, Voter: true}}; fmt.Sprint(servers) != fmt.Sprint(want) {
		t.Errorf("servers %+v, want %+v", servers, want)
	}
	if err := n.Apply([]byte("after"), 10*time.Second).Error(); err != nil {
		t.Fatalf("apply on the recovered node: %v", err)
	}

	// A second start with NewGroup finds this node alone and adds nothing.
	n.Kill()
	nodes[follower] = nil
	before, _ := s.log.LastIndex()
	n, err = Start(cfg, newTestFSM(), RaftStores{Log: s.log, Stable: s.stable, Snapshots: s.snaps})
	if err != nil {
		t.Fatal(err)
	}
	nodes[follower] = n
	waitUntil(t, 5*time.Second, "the node to lead again", n.Ready)
	var again raft.Log
	if err := s.log.GetLog(before+1, &again); err == nil && again.Type == raft.LogConfiguration {
		t.Errorf("a second start with NewGroup appended another configuration at %d", before+1)
	}
}

func TestNewGroupRefusesEmptyStores(t *testing.T) {
	cfg := groupConfigs(t, 1, 0)(0)
	cfg.Peers = nil
	cfg.NewGroup = true
	_, err := Start(cfg, newTestFSM(), RaftStores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore()})
	if !errors.Is(err, ErrNothingToRecover) {
		t.Fatalf("start with NewGroup on empty stores: %v, want ErrNothingToRecover", err)
	}
	cfg.Peers = []Peer{{ID: cfg.ID, Addr: cfg.BindAddr}}
	if err := cfg.Validate(); err == nil {
		t.Fatal("NewGroup with peers validated")
	}
}

// TestNewGroupFromBareConfiguration: stores holding only a 3-voter
// configuration (no current term recorded) are refused with NewGroupDone,
// unchanged, and without it start as this node alone, at the
// configuration's term or later.
func TestNewGroupFromBareConfiguration(t *testing.T) {
	cfg := groupConfigs(t, 1, 0)(0)
	cfg.Peers = nil
	cfg.NewGroup = true
	old := raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: "127.0.0.1:1"},
		{Suffrage: raft.Voter, ID: "o2", Address: "127.0.0.1:2"},
		{Suffrage: raft.Voter, ID: "o3", Address: "127.0.0.1:3"},
	}}
	logs, stable := raft.NewInmemStore(), raft.NewInmemStore()
	if err := logs.StoreLog(&raft.Log{Index: 1, Term: 4, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(old)}); err != nil {
		t.Fatal(err)
	}
	if err := stable.SetUint64([]byte("LastVoteTerm"), 4); err != nil { // state, though no current term
		t.Fatal(err)
	}
	done := cfg
	done.NewGroupDone = true
	if _, err := Start(done, newTestFSM(), RaftStores{Log: logs, Stable: stable, Snapshots: raft.NewInmemSnapshotStore()}); !errors.Is(err, ErrRecoveredBefore) {
		t.Fatalf("start with NewGroupDone and other members: %v, want ErrRecoveredBefore", err)
	}
	if last, _ := logs.LastIndex(); last != 1 {
		t.Fatalf("the refused start appended: last index %d", last)
	}
	n, err := Start(cfg, newTestFSM(), RaftStores{Log: logs, Stable: stable, Snapshots: raft.NewInmemSnapshotStore()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Kill() })
	waitUntil(t, 5*time.Second, "the node to lead", n.Ready)
	if term := n.raft.CurrentTerm(); term <= 4 {
		t.Errorf("term %d, want beyond the log's 4", term)
	}
	servers, err := n.Servers()
	if err != nil || len(servers) != 1 || servers[0].ID != cfg.ID {
		t.Errorf("servers %+v (%v), want %s alone", servers, err, cfg.ID)
	}
}
