package route

import (
	"sync"
	"time"
)

// NodeState is what nodes tell each other a few times a second, once a
// second at rest.
type NodeState struct {
	ID         string
	Role       string
	Term       uint64
	Applied    uint64 // last index applied to the FSM
	Commit     uint64
	Last       uint64
	First      uint64 // lowest index whose bodies this node holds
	Load       float64
	Loaded     bool
	LeaderID   string
	ReceivedAt time.Time // set by the receiver
	// PollerApplied is the receiver's own applied index when it asked
	// (set by the receiver): Applied >= PollerApplied means the node had
	// everything the asker had applied by then, however busy the group is.
	PollerApplied uint64
	// Damaged: the node met a damaged entry (DamagedIndex) and must not be
	// sent readers, handed leadership or promoted.
	Damaged       bool
	DamagedIndex  uint64
	DamagedReason string
	// ServedAsLeader and ServedAsFollower are the messages the node served
	// to consumers since it started, as leader and as follower.
	ServedAsLeader   uint64
	ServedAsFollower uint64
	// BatchReadVersion is the highest batch version of the Raft log the
	// node reads (0: a node of a release that does not say, which reads
	// version 1 only).
	BatchReadVersion uint32
}

// Peer is what a node last heard from another: its latest state, when
// that state arrived, and the error of the latest poll that failed.
type Peer struct {
	State  NodeState
	LastOK time.Time
	Err    string
}

// CaughtUp reports whether the peer answered recently and had applied,
// within 16 entries, what the asking node had applied when it asked.
// Comparing with the asker's applied index now would rarely hold under a
// steady write load, as the answer is up to a state period old. Only an
// answer heard after since counts: a node removed, wiped and added again
// under the same id leaves the state of its earlier incarnation in the
// view, which would promote it empty.
func (p Peer) CaughtUp(now, since time.Time, fresh time.Duration) bool {
	return p.LastOK.After(since) && now.Sub(p.LastOK) <= fresh && !p.State.Damaged && p.State.Applied+16 >= p.State.PollerApplied
}

// View holds the latest state heard from every other node. It is safe for
// concurrent use; its mutex is never held while calling out.
type View struct {
	mu    sync.Mutex
	peers map[string]*Peer
}

// NewView returns an empty view.
func NewView() *View { return &View{peers: map[string]*Peer{}} }

// Set records the answer of one poll of node id: its state, or the error
// that kept it from answering (the last state heard is kept).
func (v *View) Set(id string, st NodeState, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.peers[id]
	if p == nil {
		p = &Peer{}
		v.peers[id] = p
	}
	if err != nil {
		p.Err = err.Error()
		return
	}
	p.State, p.LastOK, p.Err = st, st.ReceivedAt, ""
}

// Get returns what was heard from node id, if anything.
func (v *View) Get(id string) (Peer, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p, ok := v.peers[id]
	if !ok {
		return Peer{}, false
	}
	return *p, true
}

// Retain forgets every node not in ids.
func (v *View) Retain(ids map[string]bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.peers {
		if !ids[id] {
			delete(v.peers, id)
		}
	}
}
