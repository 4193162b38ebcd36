package election

import (
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Role is a node's Raft role.
type Role string

// Roles.
const (
	Leader    Role = "leader"
	Follower  Role = "follower"
	Candidate Role = "candidate"
	Shutdown  Role = "shutdown"
)

// Event is a role or leader change.
type Event struct {
	Role Role
	// Term is exact for Leader events. When a node becomes a candidate or
	// steps down, raft announces the new role before it stores the new
	// term, so Term may still be the previous one there.
	Term     uint64
	LeaderID string
	// Ready is true once a new leader's barrier has applied every earlier
	// entry; leader-only work may start then.
	Ready bool
}

// OnChange registers fn to be called at every role or leader change (in
// order, on the observer goroutine), and once more when a new leader becomes
// ready (on that term's barrier goroutine, so possibly beside an observer
// call). fn must not block: observations queue behind it, and raft drops
// them once the queue (64) is full. remove unregisters fn; a call of fn
// already under way may still finish after it.
func (n *Node) OnChange(fn func(Event)) (remove func()) {
	l := &listener{fn: fn}
	n.mu.Lock()
	n.listeners = append(n.listeners, l)
	n.mu.Unlock()
	return func() {
		n.mu.Lock()
		n.listeners = slices.DeleteFunc(n.listeners, func(x *listener) bool { return x == l })
		n.mu.Unlock()
	}
}

// listener is one registered OnChange function; its pointer identifies it
// for removal.
type listener struct{ fn func(Event) }

func (n *Node) emit(ev Event) {
	n.mu.Lock()
	ls := slices.Clone(n.listeners)
	n.mu.Unlock()
	for _, l := range ls {
		l.fn(ev)
	}
}

func (n *Node) observe() {
	var lastLeader string
	var lastRole Role
	for {
		select {
		case <-n.stop:
			return
		case o := <-n.obsCh:
			switch d := o.Data.(type) {
			case raft.RaftState:
				role := roleOf(d)
				if role == lastRole {
					continue
				}
				lastRole = role
				n.roleChanges.Add(1)
				term := n.raft.CurrentTerm()
				if role == Leader {
					n.log.Info("role changed", "role", role, "term", term)
				} else {
					// The term may not be updated yet (see Event.Term);
					// "leader changed" reports it once it is.
					n.log.Info("role changed", "role", role)
				}
				n.emit(Event{Role: role, Term: term, LeaderID: n.LeaderID()})
				if role == Leader {
					n.goFunc(func() { n.barrier(term) })
				}
			case raft.LeaderObservation:
				id := string(d.LeaderID)
				if id == lastLeader {
					continue
				}
				lastLeader = id
				if id != "" {
					n.leaderChanges.Add(1)
				}
				n.log.Info("leader changed", "leader", id, "addr", d.LeaderAddr, "term", n.raft.CurrentTerm())
				n.emit(Event{Role: n.Role(), Term: n.raft.CurrentTerm(), LeaderID: id})
			}
		}
	}
}

// barrier makes sure every entry of earlier terms is applied before the new
// leader serves leader-only work (RocketMQ trap: a new master must rebuild
// its queue offsets first).
func (n *Node) barrier(term uint64) {
	for n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term && !n.closed.Load() {
		start := time.Now()
		f := n.raft.Barrier(10 * time.Second)
		n.trans.quiet.applied() // the barrier is an entry: end the holds (quiet.go)
		if err := f.Error(); err != nil {
			n.log.Warn("barrier failed", "term", term, "error", err)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		n.readyTerm.Store(term)
		n.log.Info("leader ready", "term", term, "barrier", time.Since(start))
		n.emit(Event{Role: Leader, Term: term, LeaderID: n.cfg.ID, Ready: true})
		return
	}
}

func roleOf(s raft.RaftState) Role {
	switch s {
	case raft.Leader:
		return Leader
	case raft.Candidate:
		return Candidate
	case raft.Follower:
		return Follower
	default:
		return Shutdown
	}
}

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Role is this node's current role.
func (n *Node) Role() Role { return roleOf(n.raft.State()) }

// Leads reports whether raft is the leader right now. Called from raft's
// own goroutine (as raftlog does when raft appends), it tells whether that
// append is one of the leader's own entries.
func (n *Node) Leads() bool { return n.raft.State() == raft.Leader }

// Ready is true on a leader whose barrier for the current term completed.
func (n *Node) Ready() bool {
	return n.raft.State() == raft.Leader && n.readyTerm.Load() == n.raft.CurrentTerm()
}

// LeaderID is the id of the current leader as this node knows it ("" if none).
func (n *Node) LeaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}
