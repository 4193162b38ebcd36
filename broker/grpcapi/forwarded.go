package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc/metadata"

	"github.com/raftmq/raftmq/broker"
)

// ForwardedContext marks an outgoing call as forwarded by node self: the
// node that receives it answers it itself and never forwards it again. The
// remoting adapter forwards through it as this package's server does.
func ForwardedContext(ctx context.Context, self string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardedKey, self)
}

// LeaderChanges is what a forward needs of the broker: this node's id, and
// word that another node replaced the leader a call went to
// (*broker.Broker).
type LeaderChanges interface {
	ID() string
	AwaitLeaderOtherThan(id string, done <-chan struct{}) bool
}

var _ LeaderChanges = (*broker.Broker)(nil)

// ErrLeaderReplaced: CallLeader gave a call up because another node
// replaced the leader it went to. It is ErrUnavailable, which clients
// retry; the caller may forward the call to the new leader.
var ErrLeaderReplaced = fmt.Errorf("%w: the leader was replaced while the call waited for it", broker.ErrUnavailable)

// CallLeader runs call, a call forwarded to leader (its context is marked
// ForwardedContext), and gives it up when this node learns of another
// leader meanwhile: a leader that is paused or cut off keeps the connection
// open and never answers, and the call would wait out its whole timeout
// while the group has long elected another. The error is then
// ErrLeaderReplaced wrapping the call's. The request may still have reached
// the old leader; what it stored there is either lost with its term or
// committed by the next leader, and a retried send is recognised by its
// producer id and sequence, as a client's own retry would be.
func CallLeader(ctx context.Context, lc LeaderChanges, leader string, call func(ctx context.Context) error) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	var moved atomic.Bool
	go func() {
		if lc.AwaitLeaderOtherThan(leader, done) {
			moved.Store(true)
			cancel()
		}
	}()
	err := call(ForwardedContext(cctx, lc.ID()))
	if err != nil && moved.Load() && ctx.Err() == nil {
		return fmt.Errorf("%w: leader %s: %w", ErrLeaderReplaced, leader, err)
	}
	return err
}

// replacedRetries bounds how often forward sends a call on to the next
// leader after CallLeader gave it up (leaders replaced in a row).
const replacedRetries = 2

// leaderReplaced reports whether CallLeader gave err's call up.
func leaderReplaced(err error) bool { return errors.Is(err, ErrLeaderReplaced) }
