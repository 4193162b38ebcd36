package route

import (
	"hash/fnv"
	"sort"
)

// Suggestion names the node a consumer should use for its next pull, and why.
type Suggestion struct {
	NodeID string // "" when no node is known (no leader): the consumer finds the leader
	Addr   string
	Reason Reason
}

// Reason says why a suggestion names its node. The values are those of the
// wire enum api.SuggestionReason; String is the metric label and the JSON
// name, Text the human sentence sent beside it.
type Reason int32

// Suggestion reasons.
const (
	ReasonUnspecified Reason = iota
	// The leader keeps the consumer.
	ReasonLeaderNotLoaded // hot data and the leader is not loaded
	ReasonFollowersBehind // no healthy follower has applied the data yet (a burst just arrived)
	ReasonNoFollower      // no follower is healthy and reachable
	ReasonOffsetMoved     // the offset is below the retained minimum: continue there
	// The leader sends the consumer to a follower.
	ReasonLeaderLoaded  // the leader is loaded and this follower has the data
	ReasonColdRead      // the consumer is further behind than ColdBytes (RocketMQ's cold-data rule)
	ReasonLeaderDeleted // the leader no longer holds the message bodies; this follower does
	// A follower keeps the consumer.
	ReasonFollowerServes // this follower has the data and the consumer may stay
	ReasonNoLeader       // no leader known: this node serves what it has
	// A follower sends the consumer (back) to the leader.
	ReasonFollowerLagging // this follower lags the leader by more than MaxLag entries
	ReasonNotApplied      // this follower has not applied the data the consumer needs yet
	ReasonNotHeld         // this node no longer holds the message bodies
	ReasonCaughtUp        // the consumer reached the tail and the leader is not loaded (ReadsOnFollowers: the leader sends it to a follower)
	ReasonDamaged         // this node is damaged and serves nothing
	// The leader sends the consumer to a follower (ReadsOnFollowers).
	ReasonFollowerReads // reads go to followers: this follower has the data

	numReasons
)

var reasonNames = [numReasons]string{
	"unspecified", "leader_not_loaded", "followers_behind", "no_follower", "offset_moved",
	"leader_loaded", "cold_read", "leader_deleted",
	"follower_serves", "no_leader",
	"follower_lagging", "not_applied", "not_held", "caught_up", "damaged",
	"follower_reads",
}

var reasonTexts = [numReasons]string{
	"",
	"hot data, leader not loaded",
	"no healthy follower has applied the data yet",
	"no healthy follower",
	"offset below the queue's minimum",
	"leader loaded",
	"cold read",
	"the leader no longer holds the offset's entry",
	"follower serves",
	"no leader known",
	"this follower lags",
	"this follower has not applied the offset yet",
	"message bodies not held here",
	"caught up with the tail",
	"this node is damaged",
	"reads go to followers",
}

// String is the reason's stable name (metric label, JSON).
func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// Text is the reason as a sentence.
func (r Reason) Text() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonTexts[r]
}

// Reasons lists every reason but ReasonUnspecified.
func Reasons() []Reason {
	out := make([]Reason, 0, numReasons-1)
	for r := ReasonUnspecified + 1; r < numReasons; r++ {
		out = append(out, r)
	}
	return out
}

// Local is what this node found when it looked for the consumer's offset.
type Local int

// What a pull found on this node.
const (
	LocalServed   Local = iota // messages returned, or the consumer is at the tail
	LocalNoTopic               // the topic is not applied here
	LocalBelowMin              // the offset is below this node's minimum
	LocalPastEnd               // the offset is past what this node applied
	LocalNotHeld               // the FSM indexes the offset, the log no longer holds its body
	LocalDamaged               // this node is damaged
)

// Answer is what a pull answers, as Suggest decides it.
type Answer int

// Pull answers.
const (
	AnswerServe          Answer = iota // what this node found: messages, or nothing new at the tail
	AnswerRetryElsewhere               // PullRetryElsewhere: nothing here, pull from the suggested node
	AnswerOffsetMoved                  // PullOffsetMoved: continue at the queue's minimum
	AnswerNotFound                     // the leader has no such topic: a definite answer
	AnswerOutOfRange                   // past the end of the leader's queue: a definite answer
	AnswerUnavailable                  // no reachable node serves it now: an error the client retries
)

// Decision is the policy's answer to one pull: what to answer, and where
// the consumer's next pull goes.
type Decision struct {
	Answer     Answer
	Suggestion Suggestion
}

// NodeView is what one node knows of another (or of itself) for routing.
type NodeView struct {
	ID      string
	Addr    string  // client address
	Healthy bool    // answered recently, not damaged, a voter in a known role
	Applied uint64  // applied log index
	First   uint64  // lowest log index whose message bodies it holds
	Load    float64 // its load signal
	Loaded  bool    // Load is at or above its threshold
}

// Input is everything a pull's answer and suggestion depend on,
// gathered once per pull by the broker. Deciding is Suggest's, a pure
// function.
type Input struct {
	SelfIsLeader bool
	Self         NodeView
	Leader       NodeView   // on a follower; zero when no leader is known, or it is damaged
	Followers    []NodeView // on the leader: the other nodes

	Local Local
	// NeedIndex is the log index a node must have applied to serve the
	// consumer's next pull (the entry holding its next offset, or the
	// leader's applied index when the consumer is at the tail).
	NeedIndex uint64
	// BehindBytes estimates how far the next offset is behind the queue end.
	BehindBytes uint64
	// AtTail: the consumer has read everything this node has.
	AtTail bool

	ColdBytes uint64 // BehindBytes above this is a cold read
	SelfLag   uint64 // entries this follower is behind the leader
	MaxLag    uint64 // a follower further behind than this does not serve
	// Topic and Queue spread readers over followers: a topic's queues go
	// round robin over them, so a group's consumers share the followers
	// evenly, and every reader of one queue lands on the same follower
	// (whose read cache then holds that queue's entries).
	Topic string
	Queue int32
	// ReadsOnFollowers: the leader keeps no consumer a follower can serve
	// (RocketMQ's clients: a pull in flight to a leader that is killed
	// fails only at the client's 30 s timeout, and the client keeps
	// pulling from the node its last answer named until its route poll,
	// so its queue stalls that long). The leader sends a consumer at the
	// tail to a healthy follower at most MaxLag behind it
	// (ReasonCaughtUp), and one behind the tail to a healthy follower that
	// has applied NeedIndex (ReasonFollowerReads); a follower keeps
	// either. The leader keeps a consumer only when no follower qualifies.
	ReadsOnFollowers bool
}

// Suggest applies raftmq's read routing: what a pull answers and where the
// consumer's next pull goes. It makes every routing decision of a pull.
//
// On the leader:
//   - no such topic: AnswerNotFound; past the queue's end: AnswerOutOfRange;
//     damaged: AnswerUnavailable (it is handing leadership over);
//   - below the retained minimum: AnswerOffsetMoved, stay (ReasonOffsetMoved);
//   - hot data, leader not loaded, bodies held: stay (ReasonLeaderNotLoaded),
//     except with ReadsOnFollowers (a consumer at the tail: tailFollower,
//     ReasonCaughtUp; one behind it: as below, ReasonFollowerReads);
//   - otherwise (leader loaded, cold read, or bodies no longer held) send
//     the consumer to a healthy follower that holds NeedIndex, lags at most
//     MaxLag and is not loaded and busier than the leader (by busierBy),
//     spread by topic and queue
//     (ReasonLeaderLoaded / ReasonColdRead / ReasonLeaderDeleted);
//   - when none qualifies, stay: ReasonFollowersBehind if some healthy
//     follower exists but none has applied NeedIndex (a burst just
//     arrived), ReasonNoFollower if none is healthy;
//   - bodies not held here: AnswerRetryElsewhere to that follower, or
//     AnswerUnavailable when no follower holds them; else AnswerServe.
//
// On a follower, send the consumer back to the leader when this node is
// damaged, lacks the topic, the offset or its body (ReasonNotApplied,
// ReasonNotHeld), lags more than MaxLag (ReasonFollowerLagging), or the
// consumer reached the tail while the leader is not loaded
// (ReasonCaughtUp), except with ReadsOnFollowers, where it keeps a consumer
// at the tail (ReasonFollowerServes) and the leader sends one to a
// follower (tailFollower, ReasonCaughtUp). Otherwise keep serving (ReasonFollowerServes); with no
// leader known, serve what it has (ReasonNoLeader), or name no node when it
// has nothing to serve. A follower answers AnswerServe when it served, and
// AnswerRetryElsewhere when it did not: never a definite "no such topic" or
// "out of range", since it may just lag. A damaged follower that knows no
// other node to name answers AnswerUnavailable.
func Suggest(in Input) Decision {
	if in.SelfIsLeader {
		return decideOnLeader(in)
	}
	s := suggestOnFollower(in)
	switch {
	case in.Local == LocalServed:
		return Decision{Answer: AnswerServe, Suggestion: s}
	case in.Local == LocalDamaged && (s.Addr == "" || s.NodeID == in.Self.ID):
		return Decision{Answer: AnswerUnavailable, Suggestion: s}
	}
	return Decision{Answer: AnswerRetryElsewhere, Suggestion: s}
}

func suggestOnFollower(in Input) Suggestion {
	self := Suggestion{NodeID: in.Self.ID, Addr: in.Self.Addr}
	if in.Leader.ID == "" || in.Leader.Addr == "" || in.Leader.ID == in.Self.ID {
		if in.Local != LocalServed {
			return Suggestion{Reason: ReasonNoLeader}
		}
		self.Reason = ReasonNoLeader
		return self
	}
	leader := Suggestion{NodeID: in.Leader.ID, Addr: in.Leader.Addr}
	switch {
	case in.Local == LocalDamaged:
		leader.Reason = ReasonDamaged
	case in.Local == LocalNoTopic || in.Local == LocalPastEnd:
		leader.Reason = ReasonNotApplied
	case in.Local == LocalBelowMin || in.Local == LocalNotHeld:
		leader.Reason = ReasonNotHeld
	case in.SelfLag > in.MaxLag:
		leader.Reason = ReasonFollowerLagging
	case in.ReadsOnFollowers && in.AtTail:
		// Held here until new entries are applied, whatever the leader's
		// load: the leader keeps no consumer at the tail.
		self.Reason = ReasonFollowerServes
		return self
	case in.Self.Applied < in.NeedIndex:
		leader.Reason = ReasonNotApplied
	case in.Self.First > in.NeedIndex:
		leader.Reason = ReasonNotHeld
	case in.AtTail && !in.Leader.Loaded:
		leader.Reason = ReasonCaughtUp
	default:
		self.Reason = ReasonFollowerServes
		return self
	}
	return leader
}

// tailFollower is the follower a consumer at the tail is held by
// (ReadsOnFollowers): a healthy one at most MaxLag behind the leader,
// spread by topic and queue. Until it has applied the consumer's offset it
// sends the consumer back (ReasonNotApplied), which lasts moments.
func tailFollower(in Input) (Suggestion, bool) {
	var ok []NodeView
	for _, f := range in.Followers {
		if f.Healthy && f.Addr != "" && f.Applied+in.MaxLag >= in.Self.Applied {
			ok = append(ok, f)
		}
	}
	if len(ok) == 0 {
		return Suggestion{}, false
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i].ID < ok[j].ID })
	h := fnv.New32a()
	h.Write([]byte(in.Topic))
	f := ok[(h.Sum32()+uint32(in.Queue))%uint32(len(ok))]
	return Suggestion{NodeID: f.ID, Addr: f.Addr, Reason: ReasonCaughtUp}, true
}

// busierBy: a loaded follower whose load exceeds the leader's by this factor
// gets no readers from it (moving them there would not relieve the group).
// Nodes that share one process (in-process test groups) measure the same
// CPU load; the margin keeps sampling noise from excluding them.
const busierBy = 1.25

func decideOnLeader(in Input) Decision {
	self := Suggestion{NodeID: in.Self.ID, Addr: in.Self.Addr}
	switch in.Local {
	case LocalNoTopic:
		return Decision{Answer: AnswerNotFound}
	case LocalPastEnd:
		return Decision{Answer: AnswerOutOfRange}
	case LocalDamaged:
		return Decision{Answer: AnswerUnavailable, Suggestion: Suggestion{Reason: ReasonDamaged}}
	case LocalBelowMin:
		self.Reason = ReasonOffsetMoved
		return Decision{Answer: AnswerOffsetMoved, Suggestion: self}
	}
	s := suggestOnLeader(in, self)
	if in.Local == LocalNotHeld {
		if s.NodeID == in.Self.ID {
			return Decision{Answer: AnswerUnavailable, Suggestion: s}
		}
		return Decision{Answer: AnswerRetryElsewhere, Suggestion: s}
	}
	return Decision{Answer: AnswerServe, Suggestion: s}
}

func suggestOnLeader(in Input, self Suggestion) Suggestion {
	cold := in.BehindBytes > in.ColdBytes
	missing := in.Local == LocalNotHeld || in.Self.First > in.NeedIndex
	loaded := in.Self.Loaded
	if in.ReadsOnFollowers && in.AtTail && !missing {
		if f, ok := tailFollower(in); ok {
			return f
		}
	}
	if !cold && !loaded && !missing && !in.ReadsOnFollowers {
		self.Reason = ReasonLeaderNotLoaded
		return self
	}
	var ok []NodeView
	healthy := 0
	for _, f := range in.Followers {
		if !f.Healthy || f.Addr == "" || (f.Loaded && f.Load > busierBy*in.Self.Load) {
			continue
		}
		healthy++
		if f.Applied >= in.NeedIndex && f.First <= in.NeedIndex && f.Applied+in.MaxLag >= in.Self.Applied {
			ok = append(ok, f)
		}
	}
	if len(ok) == 0 {
		self.Reason = ReasonFollowersBehind
		if healthy == 0 {
			self.Reason = ReasonNoFollower
		}
		return self
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i].ID < ok[j].ID })
	h := fnv.New32a()
	h.Write([]byte(in.Topic))
	f := ok[(h.Sum32()+uint32(in.Queue))%uint32(len(ok))]
	reason := ReasonColdRead
	switch {
	case missing:
		reason = ReasonLeaderDeleted
	case loaded:
		reason = ReasonLeaderLoaded
	case !cold:
		reason = ReasonFollowerReads
	}
	return Suggestion{NodeID: f.ID, Addr: f.Addr, Reason: reason}
}
