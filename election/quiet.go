package election

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Appends that carry nothing new, and why an idle leader holds them.
//
// raft v1.7.2 sends every follower an append at each commit timeout (5 ms
// by default, so that a follower learns the commit index of a burst's last
// entries at once: followers serve reads at the tail) whether or not
// anything changed. On an idle group that is about 130 round trips a
// second per follower, most of an idle node's CPU; the separate heartbeats
// (every heartbeat timeout / 10) are what keep followers from electing.
//
// So an append with no entries that repeats what the follower already
// acknowledged (same term, same previous entry, a commit index it already
// has) is held instead of sent while the leader is quiet (no Apply for
// quietAfter). The hold looks at raft every quietPoll, the commit timeout's
// own pace, or every quietIdlePoll once no Apply came for quietIdleAfter (a
// node at rest then wakes a fiftieth as often), and ends as soon as there
// is news: the log grew (raft's loop then sends the new entries next) or
// the commit index moved past what the request says, in which case the
// request is raised to it, never beyond its previous entry (the follower's log matches the leader's up to there, so
// it may commit up to there). An Apply, a barrier or a membership change
// ends every hold at once; so the slower look only delays a commit that
// comes more than quietIdleAfter after its entry (a quorum lost for that
// long), by up to quietIdlePoll. After quietHold the request is sent as it
// is. Nothing is answered that a follower did not answer: the held request
// is sent, only later.
//
// At rest (no Apply for quietIdleAfter) heartbeats are paced too: raft
// sends them every heartbeat timeout / 10 to 2/10 (25-50 ms by default),
// about 27 round trips a second per follower, which at rest were most of
// the leader's remaining CPU. A heartbeat to a follower is held until
// restBeatGap (two fifths of the heartbeat timeout) has passed since the
// previous one to it, and sent at once when an Apply comes. A follower still
// hears from the leader two to three times within its heartbeat timeout,
// and a follower stands for election on its own timer, so a dead leader is
// replaced as fast as before. Nothing is answered here either: a heartbeat
// is only sent later. raftmq does not use raft's VerifyLeader, whose
// heartbeats a pace would delay.
//
// Only raft's replication or heartbeat goroutine of one follower waits:
// votes and the other followers do not. A leader that steps down or
// removes the follower stops that goroutine at most quietHold later, and
// shutdown ends the hold at once.
const (
	quietAfter     = 50 * time.Millisecond
	quietPoll      = 5 * time.Millisecond
	quietIdleAfter = time.Second
	quietIdlePoll  = 250 * time.Millisecond
)

// quietHold is the longest an append is held (a variable: tests lengthen
// it, so that a hold that missed its news shows).
var quietHold = 500 * time.Millisecond

// quiet holds the appends that repeat what a follower already has.
type quiet struct {
	raft    atomic.Pointer[raft.Raft] // set once raft runs; nil: hold nothing
	lastPut atomic.Int64              // unix nanos of the last Apply
	stop    <-chan struct{}           // shutdown
	holding atomic.Int32              // appends held right now
	mu      sync.Mutex
	wake    chan struct{}                // closed by an Apply while appends are held
	acked   map[raft.ServerID]ackedState // what each follower last acknowledged
	beats   map[raft.ServerID]time.Time  // when each follower's last heartbeat was sent
	hold    time.Duration                // quietHold when the node started
	beatGap time.Duration                // least time between heartbeats at rest; 0: not paced
}

// restBeatGap is the least time between two heartbeats to one follower at
// rest, for a heartbeat timeout of hb.
func restBeatGap(hb time.Duration) time.Duration { return hb * 2 / 5 }

// ackedState is the part of an acknowledged append that a repeat would carry.
type ackedState struct{ term, prev, commit uint64 }

func newQuiet(stop <-chan struct{}, heartbeatTimeout time.Duration) *quiet {
	return &quiet{stop: stop, wake: make(chan struct{}), acked: map[raft.ServerID]ackedState{},
		beats: map[raft.ServerID]time.Time{}, hold: quietHold, beatGap: restBeatGap(heartbeatTimeout)}
}

// applied records an Apply (or a barrier or membership change, which also
// grow the log): appends stop being held for quietAfter, and those held now
// are sent.
func (q *quiet) applied() {
	q.lastPut.Store(time.Now().UnixNano())
	if q.holding.Load() == 0 {
		return
	}
	q.mu.Lock()
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

// before waits while req repeats what follower id already has and the
// leader is quiet; it may raise req's commit index (see above).
func (q *quiet) before(id raft.ServerID, req *raft.AppendEntriesRequest) {
	r := q.raft.Load()
	if r == nil || len(req.Entries) > 0 {
		return
	}
	if req.PrevLogEntry == 0 { // heartbeats have no previous entry
		q.paceBeat(id)
		return
	}
	q.holding.Add(1) // before reading lastPut: an Apply sees the hold or the hold sees the Apply
	defer q.holding.Add(-1)
	q.mu.Lock()
	a, ok := q.acked[id]
	wake := q.wake
	q.mu.Unlock()
	if !ok || a.term != req.Term || a.prev != req.PrevLogEntry || req.LeaderCommitIndex > a.commit {
		return
	}
	if q.sinceApply() < quietAfter {
		return
	}
	deadline := time.NewTimer(q.hold)
	defer deadline.Stop()
	poll := quietPoll
	if q.sinceApply() >= quietIdleAfter {
		poll = quietIdlePoll
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-deadline.C:
			return
		case <-wake:
			return
		case <-tick.C:
		}
		if r.LastIndex() > req.PrevLogEntry {
			return
		}
		if c := min(r.CommitIndex(), req.PrevLogEntry); c > req.LeaderCommitIndex {
			req.LeaderCommitIndex = c
			return
		}
	}
}

// sinceApply is the time since the last Apply (or barrier or membership
// change): decades when none came yet, so a new node starts at rest.
func (q *quiet) sinceApply() time.Duration { return time.Since(time.Unix(0, q.lastPut.Load())) }

// paceBeat waits, at rest, until beatGap has passed since the last
// heartbeat to follower id, and records when this one goes.
func (q *quiet) paceBeat(id raft.ServerID) {
	q.holding.Add(1) // before reading lastPut, as in before
	defer q.holding.Add(-1)
	q.mu.Lock()
	last, wake := q.beats[id], q.wake
	q.mu.Unlock()
	wait := q.beatGap - time.Since(last)
	if wait > 0 && q.sinceApply() >= quietIdleAfter {
		t := time.NewTimer(wait)
		select {
		case <-q.stop:
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
	q.mu.Lock()
	q.beats[id] = time.Now()
	q.mu.Unlock()
}

// after records what follower id acknowledged; a failed append forgets
// it, so the next one is sent at once.
func (q *quiet) after(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil || !resp.Success {
		delete(q.acked, id)
		return
	}
	if req.PrevLogEntry == 0 && len(req.Entries) == 0 { // a heartbeat
		return
	}
	prev := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		prev = req.Entries[n-1].Index
	}
	q.acked[id] = ackedState{term: req.Term, prev: prev, commit: req.LeaderCommitIndex}
}
