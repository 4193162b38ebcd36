package localgroup

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// Prober asks a group for its status, over TLS with TLS (nil: plaintext).
// Status is open on a node with --auth: no credentials are needed.
type Prober struct{ TLS *tls.Config }

// LeaderStatus asks addrs at once (each for at most timeout) and returns
// the answer with a leader and the highest term.
func LeaderStatus(ctx context.Context, addrs []string, timeout time.Duration) (*api.StatusResponse, error) {
	return leaderStatus(ctx, addrs, timeout, nil)
}

// LeaderStatus is LeaderStatus over p's TLS.
func (p Prober) LeaderStatus(ctx context.Context, addrs []string, timeout time.Duration) (*api.StatusResponse, error) {
	return leaderStatus(ctx, addrs, timeout, p.TLS)
}

// WaitLeader asks the nodes addrs returns (each for at most 500 ms), every
// 20 ms, until one reports a leader other than not that ok accepts (nil:
// any), and returns that answer; when ctx ends first, the error says what
// was last heard.
func (p Prober) WaitLeader(ctx context.Context, addrs func() []string, not string, ok func(*api.StatusResponse) bool) (*api.StatusResponse, error) {
	var last error
	for {
		st, err := p.LeaderStatus(ctx, addrs(), 500*time.Millisecond)
		if err == nil && st.LeaderId != not && (ok == nil || ok(st)) {
			return st, nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = fmt.Errorf("%s still leads", not)
			}
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// StatusOnce is StatusOnce over p's TLS.
func (p Prober) StatusOnce(ctx context.Context, addr string, timeout time.Duration) (*api.StatusResponse, error) {
	return statusOnce(ctx, addr, timeout, p.TLS)
}

// leaderStatus is LeaderStatus over TLS with tc (nil: plaintext).
func leaderStatus(ctx context.Context, addrs []string, timeout time.Duration, tc *tls.Config) (*api.StatusResponse, error) {
	if len(addrs) == 0 {
		return nil, errors.New("no node to ask")
	}
	cl, err := client.New(client.Config{Servers: addrs, RequestTimeout: timeout, TLS: tc})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	type answer struct {
		st  *api.StatusResponse
		err error
	}
	ch := make(chan answer, len(addrs))
	for _, a := range addrs {
		go func() {
			actx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			st, err := cl.StatusOf(actx, a)
			ch <- answer{st, err}
		}()
	}
	var best *api.StatusResponse
	var errs []error
	for range addrs {
		a := <-ch
		if a.err != nil {
			errs = append(errs, a.err)
			continue
		}
		if a.st.LeaderId != "" && (best == nil || a.st.Term > best.Term) {
			best = a.st
		}
	}
	if best == nil {
		if len(errs) == len(addrs) {
			return nil, fmt.Errorf("no node answered: %w", errors.Join(errs...))
		}
		return nil, errors.New("no node knows a leader")
	}
	return best, nil
}

// StatusOnce asks addr for its status over a new connection.
func StatusOnce(ctx context.Context, addr string, timeout time.Duration) (*api.StatusResponse, error) {
	return statusOnce(ctx, addr, timeout, nil)
}

// statusOnce is StatusOnce over TLS with tc (nil: plaintext).
func statusOnce(ctx context.Context, addr string, timeout time.Duration, tc *tls.Config) (*api.StatusResponse, error) {
	cl, err := client.New(client.Config{Servers: []string{addr}, RequestTimeout: timeout, TLS: tc})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return cl.StatusOf(actx, addr)
}

// SelfStatus returns node n's own entry of st (the node that answered).
func SelfStatus(st *api.StatusResponse) *api.NodeStatus {
	for _, ns := range st.Nodes {
		if ns.Id == st.AnsweredBy {
			return ns
		}
	}
	return nil
}

// FollowerCaughtUp asks the group (at addrs, each for at most timeout)
// whether node id, answering at addr, has rejoined: it is a follower of a
// known leader, the leader reports it healthy, and it has applied what the
// leader has applied. It returns the node's applied index, or why not.
func FollowerCaughtUp(ctx context.Context, addrs []string, id, addr string, timeout time.Duration) (applied uint64, why string) {
	return Prober{}.FollowerCaughtUp(ctx, addrs, id, addr, timeout)
}

// FollowerCaughtUp is FollowerCaughtUp over p's TLS.
func (p Prober) FollowerCaughtUp(ctx context.Context, addrs []string, id, addr string, timeout time.Duration) (applied uint64, why string) {
	lst, err := p.LeaderStatus(ctx, addrs, timeout)
	if err != nil {
		return 0, err.Error()
	}
	var leaderApplied uint64
	healthy := false
	for _, n := range lst.Nodes {
		if n.Id == lst.LeaderId {
			leaderApplied = n.AppliedIndex
		}
		if n.Id == id {
			healthy = n.Healthy
		}
	}
	if lst.AnsweredBy != lst.LeaderId {
		// Only the leader's own applied index is current.
		l, err := p.StatusOnce(ctx, lst.LeaderAddress, timeout)
		if err != nil {
			return 0, "leader does not answer: " + err.Error()
		}
		if self := SelfStatus(l); self != nil {
			leaderApplied = self.AppliedIndex
		}
	}
	st, err := p.StatusOnce(ctx, addr, timeout)
	if err != nil {
		return 0, "does not answer: " + err.Error()
	}
	self := SelfStatus(st)
	switch {
	case self == nil:
		return 0, "does not list itself"
	case self.Role != "follower":
		return 0, "role " + self.Role
	case st.LeaderId == "":
		return 0, "knows no leader"
	case !healthy:
		return 0, "the leader " + lst.LeaderId + " does not report it healthy yet"
	case self.AppliedIndex < leaderApplied:
		return 0, fmt.Sprintf("applied %d < leader's %d", self.AppliedIndex, leaderApplied)
	}
	return self.AppliedIndex, ""
}
