package election

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// Checking a node before it is added to the group (member add).
//
// A node may be added when it holds no log, or a log of this group (a
// member removed and started again with its data, or an add that was
// rolled back after the node had received part of the log). A node that
// began a group of its own (started without --join) holds a log of its
// own: once added, the leader's appends would either overwrite that log
// under a state machine that has already applied it, or, if its term is
// higher, make this group's leader step down again and again.
//
// CheckJoiner tells these apart with two raft calls over this node's
// transport, neither of which changes anything on the node asked (raft
// v1.7.2, raft.go):
//
//   - An AppendEntries with term 0, no entries, and no leader named in its
//     header. A node that has ever had a term (> 0) returns at once with
//     its term and last log index. A node that never had one (term 0: a
//     fresh data directory) accepts it as a heartbeat of nobody: it records
//     the time of contact and keeps its leader, none; no term, log or state
//     changes. Term 0 and last index 0: nothing to protect, it may be added.
//   - For a node with a term, a pre-vote request from this leader at its
//     current term and last log entry. A pre-vote never changes the voter's
//     term, vote or role. The node grants it only if this leader is a voter
//     of the node's latest configuration (or it knows none), it follows no
//     other leader, and this leader's log is at least as up to date as its
//     own: what a node that holds this group's log answers, and what a node
//     whose configuration is a group of its own never answers (this leader
//     is not in it).
//
// A node whose term is higher than this leader's is refused without a
// pre-vote: the first append to it would depose this leader.

// joinerTimeout bounds each of CheckJoiner's raft calls.
const joinerTimeout = 3 * time.Second

// CheckJoiner checks that the node id at addr may be added to this group:
// it holds no log, or this group's (see above). It returns an error
// wrapping ErrOwnLog when the node holds a log of its own and ErrNoAnswer
// when it does not answer raft calls. Call it on the leader.
func (n *Node) CheckJoiner(ctx context.Context, id, addr string) error {
	// The transport itself: neither held while idle (quiet.go) nor waiting
	// for a node that is down (patience.go).
	trans := n.trans.Transport
	var app raft.AppendEntriesResponse
	err := callBounded(ctx, func() error {
		req := raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}}
		return trans.AppendEntries(raft.ServerID(id), raft.ServerAddress(addr), &req, &app)
	})
	if err != nil {
		return fmt.Errorf("%w from %s at %s: %w", ErrNoAnswer, id, addr, err)
	}
	if app.Term == 0 && app.LastLog == 0 {
		return nil
	}
	own := fmt.Errorf("node %s at %s %w (term %d, last index %d): it was started without --join; stop it, empty its data directory and start it with --join",
		id, addr, ErrOwnLog, app.Term, app.LastLog)
	st := n.raft.Stats()
	term, _ := strconv.ParseUint(st["term"], 10, 64)
	if app.Term > term {
		return own
	}
	pre, ok := trans.(raft.WithPreVote)
	if !ok {
		return own // no way to tell whose log it holds: refuse, as for a foreign one
	}
	lastIndex, _ := strconv.ParseUint(st["last_log_index"], 10, 64)
	lastTerm, _ := strconv.ParseUint(st["last_log_term"], 10, 64)
	var vote raft.RequestPreVoteResponse
	err = callBounded(ctx, func() error {
		req := raft.RequestPreVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(n.cfg.ID),
				Addr: trans.EncodePeer(raft.ServerID(n.cfg.ID), trans.LocalAddr())},
			Term: term, LastLogIndex: lastIndex, LastLogTerm: lastTerm,
		}
		return pre.RequestPreVote(raft.ServerID(id), raft.ServerAddress(addr), &req, &vote)
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w from %s at %s: %w", ErrNoAnswer, id, addr, err)
	case vote.Granted:
		return nil
	}
	return own
}

// callBounded runs call, a raft transport call, and returns its error, or
// ctx's or a timeout's when that comes first (the call then ends on the
// transport's own timeout). A call that fails at once is made again, up to
// joinerAttempts times: the transport may hand it pooled connections to an
// earlier process at that address (up to its pool size), each of which
// fails at once and is then dropped.
func callBounded(ctx context.Context, call func() error) error {
	var err error
	for range joinerAttempts {
		err = callBoundedOnce(ctx, call)
		if err == nil || ctx.Err() != nil || errors.Is(err, errNoAnswerInTime) {
			break
		}
	}
	return err
}

// joinerAttempts is one more than the transport's connection pool
// (NetworkTransportConfig.MaxPool in start.go).
const joinerAttempts = 4

var errNoAnswerInTime = fmt.Errorf("no answer within %s", joinerTimeout)

func callBoundedOnce(ctx context.Context, call func() error) error {
	done := make(chan error, 1)
	go func() { done <- call() }()
	t := time.NewTimer(joinerTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errNoAnswerInTime
	case <-ctx.Done():
		return ctx.Err()
	}
}
