package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// Topics lists the topics this node has applied.
func (b *Broker) Topics() []store.TopicInfo { return b.fsm.Topics() }

// LogFloor is the log index below which retention has dropped every message
// (0: nothing dropped).
func (b *Broker) LogFloor() uint64 { return b.fsm.LogFloor() }

// ListTopics lists the topics as the leader has applied them, so queue ends
// are current (leader only).
func (b *Broker) ListTopics(ctx context.Context) ([]store.TopicInfo, error) {
	if err := b.awaitLeader(ctx); err != nil {
		return nil, err
	}
	return b.Topics(), nil
}

// DescribeTopic describes one topic as the leader has applied it: a
// consumer that stops at the end must not take a lagging follower's end
// (leader only).
func (b *Broker) DescribeTopic(ctx context.Context, name string) (store.TopicInfo, error) {
	if err := b.awaitLeader(ctx); err != nil {
		return store.TopicInfo{}, err
	}
	return b.Topic(name)
}

// Topic describes one topic as this node has applied it.
func (b *Broker) Topic(name string) (store.TopicInfo, error) {
	if err := store.ValidateName("topic", name); err != nil {
		return store.TopicInfo{}, storeErr(err)
	}
	ti, err := b.fsm.Topic(name)
	return ti, b.replicaErr(err)
}

// NodeStatus is one node in a status report.
type NodeStatus struct {
	ID         string
	Role       string // raft's role (leader, follower, candidate), RoleDown or RoleUnknown
	RaftAddr   string
	ClientAddr string
	PeerAddr   string // where the other nodes call it; ClientAddr when it registered none
	HTTPAddr   string
	Voter      bool
	Healthy    bool
	Applied    uint64
	Commit     uint64
	Last       uint64
	First      uint64
	Term       uint64
	Load       float64
	Lag        uint64
	LastSeen   time.Time
	Error      string
	// Damaged: the node met a damaged log entry (DamagedIndex); the
	// reason holds the repair steps.
	Damaged       bool
	DamagedIndex  uint64
	DamagedReason string
	// ServedAsLeader and ServedAsFollower are the messages the node served
	// to consumers since it started, as leader and as follower, as last
	// heard from it.
	ServedAsLeader   uint64
	ServedAsFollower uint64
}

// Status is the group as this node sees it.
type Status struct {
	Group         string
	GroupID       string // "" until the group's first leader set one
	Term          uint64
	LeaderID      string
	LeaderAddr    string
	Nodes         []NodeStatus
	AnsweredBy    string
	LeaderChanges uint64
}

// Status reports the group: this node's own figures and the latest heard
// from every other member.
func (b *Broker) Status() (Status, error) {
	st := b.node.Stats()
	s := Status{Group: b.cfg.Group, GroupID: b.GroupID(), Term: st.Term, LeaderID: st.LeaderID, AnsweredBy: b.cfg.NodeID, LeaderChanges: st.LeaderChanges}
	if n, ok := b.fsm.Node(st.LeaderID); ok {
		s.LeaderAddr = n.ClientAddr
	}
	servers, err := b.node.Servers()
	if err != nil {
		return Status{}, b.replicaErr(err)
	}
	self := b.NodeState()
	leaderApplied := self.Applied
	if st.LeaderID != "" && st.LeaderID != b.cfg.NodeID {
		if p, ok := b.view.Get(st.LeaderID); ok {
			leaderApplied = p.State.Applied
		}
	}
	for _, srv := range servers {
		ns := NodeStatus{ID: srv.ID, RaftAddr: srv.Addr, Voter: srv.Voter}
		if n, ok := b.fsm.Node(srv.ID); ok {
			ns.ClientAddr, ns.PeerAddr, ns.HTTPAddr = n.ClientAddr, n.PeerAddr, n.HTTPAddr
		}
		if ns.PeerAddr == "" {
			ns.PeerAddr = ns.ClientAddr
		}
		var ps NodeState
		if srv.ID == b.cfg.NodeID {
			ps, ns.Healthy, ns.LastSeen = self, true, time.Now()
			ns.ServedAsLeader, ns.ServedAsFollower = self.ServedAsLeader, self.ServedAsFollower
			if err := b.Readiness(); err != nil {
				ns.Healthy, ns.Error = false, err.Error()
			}
			if ns.ClientAddr == "" { // not registered through raft yet
				ns.ClientAddr = b.cfg.ClientAddr
			}
			if ns.HTTPAddr == "" {
				ns.HTTPAddr = b.cfg.HTTPAddr
			}
		} else if p, ok := b.view.Get(srv.ID); ok {
			ps, ns.LastSeen, ns.Error = p.State, p.LastOK, p.Err
			// Counts since the node started: what it said last stands.
			ns.ServedAsLeader, ns.ServedAsFollower = p.State.ServedAsLeader, p.State.ServedAsFollower
			ns.Healthy = time.Since(p.LastOK) <= b.fresh()
			if !ns.Healthy {
				// Not heard for a while: what it said last is stale.
				ps = NodeState{Role: mq.RoleDown}
			}
		} else {
			ns.Error = "no state heard yet"
		}
		ns.Role, ns.Applied, ns.Commit, ns.Last, ns.First, ns.Term, ns.Load = ps.Role, ps.Applied, ps.Commit, ps.Last, ps.First, ps.Term, ps.Load
		ns.Damaged, ns.DamagedIndex, ns.DamagedReason = ps.Damaged, ps.DamagedIndex, ps.DamagedReason
		if ns.Damaged {
			ns.Healthy = false
		}
		if !ns.Healthy && ns.Role == "" {
			ns.Role = mq.RoleUnknown
		}
		if leaderApplied > ns.Applied && ns.Applied > 0 {
			ns.Lag = leaderApplied - ns.Applied
		}
		s.Nodes = append(s.Nodes, ns)
	}
	return s, nil
}

// TransferLeader moves leadership to node id, or to the most caught-up
// follower when id is empty (leader only). It returns the new leader.
func (b *Broker) TransferLeader(ctx context.Context, id string) (string, time.Duration, error) {
	if err := b.await(ctx, b.isLeader); err != nil {
		return "", 0, err
	}
	if id == b.cfg.NodeID {
		return id, 0, nil
	}
	if id == "" {
		// raft would pick the most caught-up follower, damaged or not.
		id = b.healthyVoter()
	} else if p, ok := b.view.Get(id); ok && p.State.Damaged {
		return "", 0, fmt.Errorf("%w: %s is damaged (log index %d) and must not lead", ErrFailedPrecondition, id, p.State.DamagedIndex)
	}
	start := time.Now()
	if err := b.node.Transfer(id); err != nil {
		return "", 0, b.replicaErr(err)
	}
	for ctx.Err() == nil {
		if l := b.node.LeaderID(); l != "" && l != b.cfg.NodeID {
			return l, time.Since(start), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "", 0, fmt.Errorf("%w: no new leader seen", ErrTimeout)
}

// AddMember adds a node as a non-voter, waits until it has caught up, then
// promotes it to voter (leader only). The new node must be started first
// (with --join) so it can receive the log and register its address; a
// node that holds a log of its own is refused (election.CheckJoiner).
//
// The address is checked (HOST:PORT, resolvable, something listening)
// before the configuration changes. A node this call added that has not
// caught up shortly before ctx's deadline is removed again, so a failed
// add leaves the configuration as it was; the error says which happened.
func (b *Broker) AddMember(ctx context.Context, id, raftAddr string) (bool, error) {
	if id == "" || raftAddr == "" {
		return false, invalid("member add needs an id and a raft address")
	}
	if err := election.CheckAddr(ctx, raftAddr); err != nil {
		return false, fmt.Errorf("%w: member add %s: raft %w", ErrInvalidArgument, id, err)
	}
	if err := b.awaitLeader(ctx); err != nil {
		return false, err
	}
	servers, err := b.node.Servers()
	if err != nil {
		return false, b.replicaErr(err)
	}
	wasMember := false
	for _, s := range servers {
		if s.ID == id && s.Voter {
			return true, nil
		}
		if s.ID == id {
			wasMember = true
		}
		if s.ID != id && s.Addr == raftAddr {
			return false, fmt.Errorf("%w: raft address %s already belongs to %s", ErrAlreadyExists, raftAddr, s.ID)
		}
	}
	if err := b.node.Reachable(ctx, id, raftAddr); err != nil {
		return false, fmt.Errorf("%w: nothing answers at raft address %s of %s (%w): start the node there first, with --join; the group is unchanged",
			ErrFailedPrecondition, raftAddr, id, err)
	}
	if !wasMember {
		// A member is known to hold this group's log (or none); anyone else
		// is asked first, so that a node that began a group of its own is
		// never handed this group's log.
		if err := b.node.CheckJoiner(ctx, id, raftAddr); errors.Is(err, election.ErrNoAnswer) {
			return false, fmt.Errorf("%w: member add %s: %w: is a raftmq node started with --join listening there? the group is unchanged",
				ErrFailedPrecondition, id, err)
		} else if err != nil {
			b.log.Warn("member add refused", "id", id, "addr", raftAddr, "error", err)
			return false, storeErr(err)
		}
	}
	if err := b.node.AddNonvoter(id, raftAddr); err != nil {
		return false, b.replicaErr(err)
	}
	added := time.Now()
	b.log.Info("added non-voter; waiting for it to catch up", "id", id, "addr", raftAddr)
	giveUp := make(<-chan time.Time) // never, without a deadline
	if dl, ok := ctx.Deadline(); ok {
		// Leave time to remove the node again and to answer before the
		// caller's deadline, so the caller learns what was left.
		left := time.Until(dl)
		t := time.NewTimer(left - min(left/4, addRollbackReserve))
		defer t.Stop()
		giveUp = t.C
	}
	for {
		p, ok := b.view.Get(id)
		// What the view held before the add may be the state of an earlier
		// node under this id (removed, wiped, started again).
		ok = ok && p.LastOK.After(added)
		if ok && p.State.Damaged {
			return false, fmt.Errorf("%w: %s is damaged (log index %d) and is not promoted: %s", ErrFailedPrecondition, id, p.State.DamagedIndex, p.State.DamagedReason)
		}
		if ok && p.CaughtUp(time.Now(), added, b.fresh()) {
			break
		}
		select {
		case <-giveUp:
			return false, b.undoAdd(id, wasMember, "did not catch up before the deadline")
		case <-ctx.Done():
			return false, b.undoAdd(id, wasMember, "was not caught up when the call ended ("+ctx.Err().Error()+")")
		case <-b.stop:
			return false, ErrShutdown
		case <-time.After(b.cfg.StatePeriod):
		}
	}
	if err := b.node.Promote(id, raftAddr); err != nil {
		return false, b.replicaErr(err)
	}
	b.log.Info("promoted to voter", "id", id)
	return true, nil
}

// addRollbackReserve bounds the time AddMember keeps before its deadline
// to remove a node that has not caught up and to answer.
const addRollbackReserve = 3 * time.Second

// undoAdd removes a non-voter that AddMember added and that did not catch
// up, and returns the error that tells what state the group is in.
func (b *Broker) undoAdd(id string, wasMember bool, why string) error {
	progress := "it never reported its state (is it a raftmq node started with --join, with that --raft address?)"
	if p, ok := b.view.Get(id); ok && p.State.Applied > 0 {
		progress = fmt.Sprintf("it had applied %d of %d entries; its data is kept, so adding it again resumes from there (give member add a longer --timeout)",
			p.State.Applied, p.State.PollerApplied)
	}
	if wasMember {
		return fmt.Errorf("%w: %s %s; it stays a non-voter, as it was before this call (`raftmq member remove %s` drops it); %s",
			ErrFailedPrecondition, id, why, id, progress)
	}
	if err := b.node.Remove(id, false); err != nil {
		b.log.Error("member add: removing the node that did not catch up failed", "id", id, "error", err)
		return fmt.Errorf("member add %s: it %s, and removing it again failed (%w): it is still in the configuration as a non-voter; run `raftmq member remove %s`",
			id, why, b.replicaErr(err), id)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if err := b.w.ForgetNode(ctx, id); err != nil {
		b.log.Warn("forget removed node's addresses", "id", id, "error", err)
	}
	b.log.Warn("member add rolled back: the node did not catch up", "id", id, "reason", why)
	return fmt.Errorf("%w: %s %s, so it was removed again and the group's configuration is as before; %s",
		ErrFailedPrecondition, id, why, progress)
}

// RemoveMember removes a node from the group (leader only).
func (b *Broker) RemoveMember(ctx context.Context, id string, force bool) error {
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	if err := b.node.Remove(id, force); err != nil {
		return b.replicaErr(err)
	}
	if err := b.w.ForgetNode(ctx, id); err != nil {
		b.log.Warn("forget removed node's addresses", "id", id, "error", err)
	}
	return nil
}
