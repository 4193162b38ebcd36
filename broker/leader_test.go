package broker

import (
	"fmt"
	"testing"
)

// TestLeaderPending: a leader-only call waits while no leader is known or
// reachable, or this leader is not ready, and returns at once when another
// node leads at a known address (the adapter forwards there) or on any
// other error.
func TestLeaderPending(t *testing.T) {
	b := &Broker{cfg: Config{NodeID: "n1"}}
	cases := []struct {
		err  error
		want bool
	}{
		{&NotLeaderError{}, true},
		{&NotLeaderError{LeaderID: "n2"}, true},
		{&NotLeaderError{LeaderID: "n1", PeerAddr: "a1"}, true},
		{fmt.Errorf("%w: new leader is still applying earlier entries", ErrUnavailable), true},
		{&NotLeaderError{LeaderID: "n2", PeerAddr: "a2", ClientAddr: "c2"}, false},
		{fmt.Errorf("wrapped: %w", &NotLeaderError{LeaderID: "n2", PeerAddr: "a2"}), false},
		{ErrShutdown, false},
		{ErrInvalidArgument, false},
	}
	for _, c := range cases {
		if got := b.leaderPending(c.err); got != c.want {
			t.Errorf("leaderPending(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
