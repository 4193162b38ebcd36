package broker

import (
	"hash/fnv"
	"sort"
)

// Suggestion names the node a consumer should use for its next pull.
type Suggestion struct {
	NodeID string
	Addr   string
	Reason string
}

// NodeView is what one node knows of another (or of itself) for routing.
type NodeView struct {
	ID      string
	Addr    string // client address
	Healthy bool   // answered recently and is not lagging
	Applied uint64 // applied log index
	First   uint64 // lowest log index whose message bodies it holds
	Loaded  bool
}

// RouteInput is everything the suggestion depends on. Building it is the
// broker's job; deciding is Suggest's, a pure function.
type RouteInput struct {
	SelfIsLeader bool
	Self         NodeView
	Leader       NodeView   // zero when no leader is known
	Followers    []NodeView // on the leader: the other nodes

	// NeedIndex is the log index a node must have applied to serve the
	// consumer's next pull (the entry holding its next offset, or the
	// leader's applied index when the consumer is at the tail).
	NeedIndex uint64
	// BehindBytes estimates how far the next offset is behind the queue end.
	BehindBytes uint64
	// AtTail: the consumer has read everything this node has.
	AtTail bool

	ColdBytes uint64 // BehindBytes above this is a cold read
	SelfLag   uint64 // entries this node is behind the leader (followers)
	MaxLag    uint64
	// Topic and Queue spread readers over followers: a topic's queues go
	// round robin over them, so a group's consumers share the followers
	// evenly, and every reader of one queue lands on the same follower
	// (whose read cache then holds that queue's entries).
	Topic string
	Queue int32
}

// Suggestion reasons, also used as metric labels.
const (
	ReasonHot          = "hot data, leader not loaded"
	ReasonCold         = "cold read"
	ReasonLoaded       = "leader loaded"
	ReasonNoFollower   = "no follower has the data"
	ReasonLagging      = "this follower lags"
	ReasonMissing      = "this follower lacks the offset"
	ReasonDeleted      = "the leader no longer holds the offset's entry"
	ReasonNotHeld      = "message bodies not held here"
	ReasonCaughtUp     = "caught up with the tail"
	ReasonNoLeader     = "no leader known"
	ReasonStayFollower = "follower serves"
)

// Suggest applies raftmq's read routing:
//
// On the leader: send the consumer to a follower when it reads cold data
// (further behind than ColdBytes), the leader is loaded or the leader no
// longer holds the message bodies at NeedIndex, and a healthy, unloaded
// follower holds NeedIndex; spread readers over such followers by topic and
// queue. Otherwise keep it on the leader.
//
// On a follower: send the consumer back to the leader when this follower
// lags more than MaxLag, lacks NeedIndex (not applied yet, or its body
// deleted), or the consumer has caught up with the tail and the leader is
// not loaded. Otherwise keep serving it.
func Suggest(in RouteInput) Suggestion {
	self := Suggestion{NodeID: in.Self.ID, Addr: in.Self.Addr}
	if in.SelfIsLeader {
		cold := in.BehindBytes > in.ColdBytes
		missing := in.Self.First > in.NeedIndex
		if !cold && !in.Self.Loaded && !missing {
			self.Reason = ReasonHot
			return self
		}
		var ok []NodeView
		for _, f := range in.Followers {
			if f.Healthy && !f.Loaded && f.Applied >= in.NeedIndex && f.First <= in.NeedIndex && f.Addr != "" {
				ok = append(ok, f)
			}
		}
		if len(ok) == 0 {
			self.Reason = ReasonNoFollower
			return self
		}
		sort.Slice(ok, func(i, j int) bool { return ok[i].ID < ok[j].ID })
		h := fnv.New32a()
		h.Write([]byte(in.Topic))
		f := ok[(h.Sum32()+uint32(in.Queue))%uint32(len(ok))]
		reason := ReasonLoaded
		switch {
		case missing:
			reason = ReasonDeleted
		case cold:
			reason = ReasonCold
		}
		return Suggestion{NodeID: f.ID, Addr: f.Addr, Reason: reason}
	}
	if in.Leader.ID == "" || in.Leader.Addr == "" {
		self.Reason = ReasonNoLeader
		return self
	}
	leader := Suggestion{NodeID: in.Leader.ID, Addr: in.Leader.Addr}
	switch {
	case in.SelfLag > in.MaxLag:
		leader.Reason = ReasonLagging
	case in.Self.Applied < in.NeedIndex || in.Self.First > in.NeedIndex:
		leader.Reason = ReasonMissing
	case in.AtTail && !in.Leader.Loaded:
		leader.Reason = ReasonCaughtUp
	default:
		self.Reason = ReasonStayFollower
		return self
	}
	return leader
}
