package client

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrNoNode is returned (wrapped) when every server refused the connection,
// could not be resolved or does not speak raftmq's API for
// Config.GiveUpUnreachable: nothing there is a raftmq node that is merely
// busy or electing.
var ErrNoNode = errors.New("no raftmq node answers")

// reachability remembers, per server, since when every call to it has
// failed without reaching a raftmq node (see unreachable).
type reachability struct {
	mu    sync.Mutex
	since map[string]time.Time // first of the current run of such failures
	why   map[string]string
}

func (r *reachability) note(addr string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since == nil {
		r.since, r.why = map[string]time.Time{}, map[string]string{}
	}
	why := unreachable(err)
	if why == "" {
		delete(r.since, addr)
		delete(r.why, addr)
		return
	}
	if _, ok := r.since[addr]; !ok {
		r.since[addr] = time.Now()
	}
	r.why[addr] = why
}

// allDown reports whether every one of servers has failed to be reached
// for at least d, and why, one clause per server.
func (r *reachability) allDown(servers []string, d time.Duration) (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var whys []string
	for _, s := range servers {
		t, ok := r.since[s]
		if !ok || time.Since(t) < d {
			return false, ""
		}
		whys = append(whys, s+": "+r.why[s])
	}
	return len(servers) > 0, strings.Join(whys, "; ")
}

// waiting is what a call that has retried for a while is waiting for.
func (r *reachability) waiting(addr string, last error) string {
	r.mu.Lock()
	why := r.why[addr]
	r.mu.Unlock()
	if why == "" && last != nil {
		why = status.Convert(last).Message()
	}
	if why == "" {
		return "waiting for " + addr + " ..."
	}
	return fmt.Sprintf("waiting for %s (%s) ...", addr, why)
}

// unreachable says in a few words why err shows that nothing at the address
// is a raftmq node answering (connection refused, a name that does not
// resolve, a server that is not raftmq's gRPC API such as its HTTP port),
// or "" when err came from a node or may be passing (a timeout, a leader
// change).
func unreachable(err error) string {
	if otherGroup(err) {
		return "another raftmq group answers there now, or a node not caught up with this one: " + status.Convert(err).Message()
	}
	if err == nil || status.Code(err) != codes.Unavailable {
		return ""
	}
	msg := status.Convert(err).Message()
	switch {
	case strings.Contains(msg, "connection refused"):
		return "connection refused"
	case strings.Contains(msg, "no such host"), strings.Contains(msg, "produced zero addresses"),
		strings.Contains(msg, "missing port in address"), strings.Contains(msg, "too many colons"):
		return "the address does not resolve"
	case strings.Contains(msg, "server preface") && strings.Contains(msg, "use of closed network connection"):
		// The connection opened and the wait for the server's HTTP/2
		// preface ran out: a raftmq node sends it at once.
		return "accepts connections but answers nothing (a paused process or a blackholed address)"
	case strings.Contains(msg, "frame too large"), strings.Contains(msg, "server preface"),
		strings.Contains(msg, "http2: failed reading the frame"), strings.Contains(msg, "malformed HTTP"):
		return "not raftmq's client API (perhaps its HTTP port), or a node that requires TLS (--tls-ca)"
	case strings.Contains(msg, "authentication handshake failed"), strings.Contains(msg, "first record does not look like a TLS handshake"):
		// TLS to a plaintext node, or a certificate this client does not
		// trust: no retry helps.
		if i := strings.Index(msg, "tls: "); i >= 0 {
			return "TLS handshake failed: " + msg[i:]
		}
		return "TLS handshake failed"
	}
	return ""
}

// explain says in a few words what err means for the call that got it:
// why nothing answers (unreachable), that no connection became ready in
// time, or else the error's own message.
func explain(err error) string {
	if err == nil {
		return "no attempt finished"
	}
	if why := unreachable(err); why != "" {
		return why
	}
	if st, ok := status.FromError(err); ok {
		if notReady(st.Message()) {
			return "no connection became ready in time (a paused process or a blackholed address)"
		}
		return st.Message()
	}
	return err.Error()
}

// explained is an error whose message says what its cause means; errors.Is
// and status.Code still see the cause.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }
