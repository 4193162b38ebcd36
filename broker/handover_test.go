package broker

import (
	"testing"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// threeVoters is a fake's membership as a group of n1, n2, n3 whose
// transfers are recorded.
type threeVoters struct {
	*fakeReplica
	to []string
}

func (m *threeVoters) Servers() ([]election.Server, error) {
	return []election.Server{{ID: "n1", Voter: true}, {ID: "n2", Voter: true}, {ID: "n3", Voter: true}}, nil
}

func (m *threeVoters) Transfer(id string) error { m.to = append(m.to, id); return nil }

// lackingLeader is leader n1 of a fake three-voter group whose log holds
// entries 1-600 but no longer their bodies (as after a snapshot install);
// n2 holds 100-500, n3 10-400.
func lackingLeader(t *testing.T) (*Broker, *threeVoters) {
	t.Helper()
	f := newFakeReplica("n1")
	f.setRole(election.Leader, true, "n1")
	f.last = 600
	cfg := DefaultConfig()
	cfg.NodeID, cfg.ClientAddr, cfg.RetentionAge = "n1", "n1:9000", 0
	m := &threeVoters{fakeReplica: f}
	b, err := New(cfg, Replica{Writer: f, State: f, Leadership: f, Membership: m, Snapshots: f}, f, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	now := time.Now()
	b.view.Set("n2", NodeState{First: 100, Applied: 500, ReceivedAt: now}, nil)
	b.view.Set("n3", NodeState{First: 10, Applied: 400, ReceivedAt: now}, nil)
	return b, m
}

// TestHolderVoter: the voter chosen to take over holds the entry, answered
// recently, is not damaged and has applied the most.
func TestHolderVoter(t *testing.T) {
	b, _ := lackingLeader(t)
	for _, c := range []struct {
		index uint64
		want  string
	}{{50, "n3"}, {200, "n2"}, {450, "n2"}, {5, ""}, {600, ""}} {
		if got := b.holderVoter(c.index); got != c.want {
			t.Errorf("holder of entry %d: %q, want %q", c.index, got, c.want)
		}
	}
	b.view.Set("n3", NodeState{First: 10, Applied: 400, ReceivedAt: time.Now(), Damaged: true}, nil)
	if got := b.holderVoter(50); got != "" {
		t.Errorf("a damaged holder was chosen: %q", got)
	}
}

// TestLeaderLackingAnEntryHandsOver: every path that needs an entry on the
// leader (the scheduler's and the transaction check-back's queue reads, a
// transaction decision, a send-back by id) hands leadership, at most once
// per period, to the voter that holds it; a follower hands nothing over.
func TestLeaderLackingAnEntryHandsOver(t *testing.T) {
	reads := map[string]func(b *Broker) error{
		"queue read": func(b *Broker) error {
			_, _, err := b.readQueue(mq.TxnHalfTopic, int32(store.TxnHalfQueue), 0, []store.Location{{LogIndex: 200}}, 10, 1<<20)
			return err
		},
		"half message": func(b *Broker) error {
			_, err := b.halfMessage(raftlog.MessageID(200, 0))
			return err
		},
		"send-back lookup": func(b *Broker) error {
			_, err := b.lookupLeader(raftlog.MessageID(200, 0))
			return err
		},
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			b, m := lackingLeader(t)
			if err := read(b); err == nil {
				t.Fatal("a leader without the entry read it")
			}
			if err := read(b); err == nil { // within the period: no second attempt
				t.Fatal("a leader without the entry read it")
			}
			if len(m.to) != 1 || m.to[0] != "n2" {
				t.Fatalf("transfers %v, want one to n2", m.to)
			}

			b, m = lackingLeader(t)
			m.setRole(election.Follower, false, "n2")
			read(b)
			if len(m.to) != 0 {
				t.Fatalf("a follower handed leadership over: %v", m.to)
			}
		})
	}
}
