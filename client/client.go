// Package client is the Go SDK of raftmq: a Client that finds the leader by
// itself and survives leader changes, an idempotent Producer, a Consumer that
// follows the broker's read-routing suggestions and takes part in consumer
// groups, and the admin calls the CLI is built on.
//
// It speaks only the api/ protocol and never imports server packages.
package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// Config of a Client.
type Config struct {
	// Servers are client API addresses of any nodes of the group.
	Servers []string
	// RequestTimeout bounds how long a node may take to answer one attempt
	// of a small call (not the retries). A produce request gets a further
	// second per AttemptBytesPerSecond of its size, and a pull adds the time
	// it asked the broker to wait. An attempt on a node that stopped
	// answering (paused, partitioned) usually ends much sooner: see
	// StallTimeout.
	RequestTimeout time.Duration
	// StallTimeout is how long an attempt may go unanswered before the
	// client asks every other node, every stallCheckEvery, whether another
	// node now leads; it abandons the attempt as soon as one does and
	// retries there (a produce with the same producer sequence, which the
	// group appends once). A leader that accepts connections but never
	// answers then costs the election plus at most one check interval, not
	// RequestTimeout. First leader discovery waits at most this long for the
	// leader's own answer once a follower has named it.
	StallTimeout time.Duration
	// RetryTimeout bounds all attempts of a call whose context has no deadline.
	RetryTimeout time.Duration
	// GiveUpUnreachable, when above 0, ends a call with ErrNoNode once every
	// server has refused the connection (or does not resolve, or is not
	// raftmq's API) for that long: a command line tool pointed at a wrong
	// address. 0 retries until RetryTimeout, as a long-lived producer
	// riding out a restart of the whole group must.
	GiveUpUnreachable time.Duration
	// OnWaiting, when set, is called once per call that has been retrying
	// for WaitingAfter, with what it waits for ("waiting for 127.0.0.1:9009
	// (connection refused) ...").
	OnWaiting    func(msg string)
	WaitingAfter time.Duration
	// TLS, when set, dials every node over TLS with it: RootCAs verifies
	// the nodes' certificates (nil: the system pool), Certificates or
	// GetClientCertificate are presented when a node asks (nodes accept
	// clients without one), ServerName overrides the host name checked
	// (default: the host of each server address). Nil: plaintext, which a
	// node with --tls-mode enforcing refuses.
	TLS *tls.Config
	// Credentials, when set, sign every call (a node with --auth
	// enforcing refuses calls without them).
	Credentials *Credentials
	// GroupID, when set, is the id of the group this client is for (as
	// `raftmq status` shows it): its calls name it from the first, and a
	// node of another group refuses them. Empty: the client pins the id of
	// the first group that answers (group.go).
	GroupID string
}

// DefaultConfig returns defaults for everything but Servers.
func DefaultConfig() Config {
	return Config{RequestTimeout: 2 * time.Second, StallTimeout: 150 * time.Millisecond, RetryTimeout: 30 * time.Second}
}

// AttemptBytesPerSecond is the slowest transfer rate an attempt is granted
// for its request: a 1 MiB produce request may take RequestTimeout + 0.25 s.
const AttemptBytesPerSecond = 4 << 20

// stallCheckEvery is how often a stalled attempt asks the other nodes who
// leads. Concurrent attempts share one answer (leaderView), so a stalled
// leader costs every node at most one Status call per interval per client.
const stallCheckEvery = 50 * time.Millisecond

// attemptTimeout is the deadline of one attempt that sends size bytes and
// may legitimately wait on the broker for wait (a long-poll pull).
func (c *Client) attemptTimeout(size int, wait time.Duration) time.Duration {
	return c.cfg.RequestTimeout + wait + time.Duration(int64(size)*int64(time.Second)/AttemptBytesPerSecond)
}

// Client is safe for concurrent use.
type Client struct {
	cfg Config

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	leader string // client address of the leader, "" when unknown
	closed bool

	lastFail atomic.Pointer[failure] // the latest failed attempt of any call
	// troubleAt is when an attempt last found no leader or no node
	// (Unavailable, or timed out), in Unix nanoseconds; 0 once an attempt
	// started after it has succeeded.
	troubleAt atomic.Int64
	reach     reachability

	viewMu sync.Mutex
	view   *leaderView // the latest answer to "who leads, other than X"

	group atomic.Pointer[string] // the pinned group id (group.go)

	streams api.ProduceStreams
}

// leaderView is one round of asking nodes who leads, shared by the stalled
// attempts of a client for stallCheckEvery.
type leaderView struct {
	at      time.Time
	except  string // the node that was not asked
	leader  string // client address of the leader the others named, "" if none
	pending chan struct{}
}

// failure is a failed attempt, kept so that a call whose own context ends
// during retries can say why it was retrying.
type failure struct {
	err  error
	addr string
	at   time.Time
}

// Trouble returns when a call of this client last found no leader or no
// node answering in time (an Unavailable error or an attempt that timed
// out), unless an attempt started after that has succeeded since; the zero
// time otherwise. The several-group producer (client/cluster) sends
// elsewhere meanwhile.
func (c *Client) Trouble() time.Time {
	if t := c.troubleAt.Load(); t != 0 {
		return time.Unix(0, t)
	}
	return time.Time{}
}

// failedSince returns the latest failed attempt made after t, or nil.
func (c *Client) failedSince(t time.Time) *failure {
	if f := c.lastFail.Load(); f != nil && !f.at.Before(t) {
		return f
	}
	return nil
}

// New returns a client; it dials lazily, so it never fails for an
// unreachable server.
func New(cfg Config) (*Client, error) {
	var servers []string
	for _, s := range cfg.Servers {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				servers = append(servers, p)
			}
		}
	}
	if len(servers) == 0 {
		return nil, errors.New("no servers given (-s/--servers or RAFTMQ_SERVERS)")
	}
	cfg.Servers = servers
	if cfg.Credentials != nil {
		if err := cfg.Credentials.validate(); err != nil {
			return nil, err
		}
	}
	d := DefaultConfig()
	if cfg.WaitingAfter <= 0 {
		cfg.WaitingAfter = 2 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = d.RequestTimeout
	}
	if cfg.RetryTimeout <= 0 {
		cfg.RetryTimeout = d.RetryTimeout
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = d.StallTimeout
	}
	c := &Client{cfg: cfg, conns: map[string]*grpc.ClientConn{}}
	if id := cfg.GroupID; id != "" {
		c.group.Store(&id)
	}
	return c, nil
}

// Close closes every connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for a, conn := range c.conns {
		conn.Close()
		delete(c.conns, a)
	}
	return nil
}

func (c *Client) conn(addr string) (api.BrokerClient, error) {
	cc, err := c.clientConn(addr)
	if err != nil {
		return nil, err
	}
	return api.NewBrokerClient(cc), nil
}

// clientConn is conn for any service of the node at addr.
func (c *Client) clientConn(addr string) (grpc.ClientConnInterface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("client is closed")
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	opts := c.groupOptions()
	if c.cfg.TLS != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(c.cfg.TLS)))
	}
	if cr := c.cfg.Credentials; cr != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(callCredentials{*cr}))
	}
	cc, err := api.Dial(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c.conns[addr] = cc
	return cc, nil
}

// Retryable reports whether an error may go away by itself: no leader, a
// leader change, a timeout of one attempt or an unreachable node.
func Retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.Canceled:
		return true
	case codes.FailedPrecondition:
		return otherGroup(err) // the group's other nodes may serve it
	case codes.ResourceExhausted:
		// A busy broker (retry), unless gRPC refused a message over its
		// size limit, which no retry fixes.
		return !api.OverSizeLimit(err)
	}
	return false
}

func (c *Client) leaderAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

func (c *Client) setLeader(addr string) {
	c.mu.Lock()
	c.leader = addr
	c.mu.Unlock()
}

// candidates lists where to send a leader-bound call: the known leader
// first, then every configured server.
func (c *Client) candidates() []string {
	out := []string{}
	if l := c.leaderAddr(); l != "" {
		out = append(out, l)
	}
	for _, s := range c.cfg.Servers {
		if len(out) == 0 || s != out[0] {
			out = append(out, s)
		}
	}
	return out
}

// refreshLeader asks every server at once who leads and takes the answer
// with the highest term, so one dead or paused node costs no extra time.
func (c *Client) refreshLeader(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	best := c.askLeader(ctx, c.candidates(), c.cfg.StallTimeout)
	if best != nil {
		c.setLeader(best.LeaderAddress)
	} else {
		c.setLeader("")
	}
}

// askLeader asks the nodes at addrs at once who leads and returns the answer
// naming a leader with the highest term (nil if none does). It returns when
// the leader itself answers, when a majority of addrs has answered (a
// refusal counts), or grace after the first answer that names a leader: a
// paused leader, which its followers still name, costs no time, and a slow
// one at most grace.
func (c *Client) askLeader(ctx context.Context, addrs []string, grace time.Duration) *api.StatusResponse {
	answers := make(chan *api.StatusResponse, len(addrs))
	for _, a := range addrs {
		go func(a string) {
			st, err := c.statusAt(ctx, a)
			if err != nil {
				st = nil
			}
			answers <- st
		}(a)
	}
	var best *api.StatusResponse
	var graceC <-chan time.Time
	for n := 1; n <= len(addrs); n++ {
		var st *api.StatusResponse
		select {
		case st = <-answers:
		case <-graceC:
			return best
		}
		if st != nil && !c.ofGroup(st) {
			st = nil // another group's node at one of the addresses
		}
		if st != nil && st.LeaderAddress != "" && better(st, best) {
			best = st
			if st.LeaderId == st.AnsweredBy {
				break // the leader itself answered
			}
			if graceC == nil {
				t := time.NewTimer(grace)
				defer t.Stop()
				graceC = t.C
			}
		}
		if best != nil && n > len(addrs)/2 {
			break
		}
	}
	return best
}

// better reports whether status answer st beats best: a higher term, or
// the same term answered by the leader itself (the most current view).
func better(st, best *api.StatusResponse) bool {
	return best == nil || st.Term > best.Term || (st.Term == best.Term && st.LeaderId == st.AnsweredBy && best.LeaderId != best.AnsweredBy)
}

func (c *Client) statusAt(ctx context.Context, addr string) (*api.StatusResponse, error) {
	cl, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, min(c.cfg.RequestTimeout, 2*time.Second))
	defer cancel()
	st, err := cl.Status(actx, &api.StatusRequest{})
	c.reach.note(addr, err)
	return st, err
}

// do runs call against the leader (any node forwards, but the leader saves a
// hop), retrying retryable errors with backoff until ctx or RetryTimeout ends.
// call must be idempotent across retries (Producer makes sends so). Each
// attempt is bounded by attemptTimeout(0, 0).
func (c *Client) do(ctx context.Context, call func(context.Context, api.BrokerClient) error) error {
	return c.doSized(ctx, 0, 0, call)
}

// doSized is do for a call that sends size bytes and may wait on the broker
// for wait: its attempts get attemptTimeout(size, wait), and the stall check
// starts wait + StallTimeout after an attempt was sent.
func (c *Client) doSized(ctx context.Context, size int, wait time.Duration, call func(context.Context, api.BrokerClient) error) error {
	return c.doConn(ctx, size, wait, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		return call(ctx, api.NewBrokerClient(cc))
	})
}

// doConn is doSized for any service of the nodes.
func (c *Client) doConn(ctx context.Context, size int, wait time.Duration, call func(context.Context, grpc.ClientConnInterface) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RetryTimeout)
		defer cancel()
	}
	if c.leaderAddr() == "" {
		c.refreshLeader(ctx) // one round of Status to all servers; saves a forwarding hop
	}
	backoff := 10 * time.Millisecond
	var last error
	lastAddr := ""
	start, told := time.Now(), false
	sent := false    // some attempt may have stored something
	refused := false // some attempt was refused busy, storing nothing
	gaveUp := func() error {
		why := "none of " + strings.Join(c.candidates(), ", ") + " answered in time"
		if last != nil {
			why = "last error, from " + lastAddr + ": " + explain(last)
		}
		switch {
		case !sent && refused:
			return fmt.Errorf("%w: %w (%s)", ErrNotSent, ctx.Err(), why)
		case !sent:
			return fmt.Errorf("%w: %w: %w (%s)", ErrNotSent, ErrNoConnection, ctx.Err(), why)
		}
		return fmt.Errorf("%w (%s)", ctx.Err(), why)
	}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil { // spent asking who leads: nothing was sent
			return gaveUp()
		}
		addrs := c.candidates()
		addr := addrs[attempt%len(addrs)]
		if attempt > 0 && c.leaderAddr() != "" {
			addr = c.leaderAddr()
		}
		cc, err := c.clientConn(addr)
		if err != nil {
			return err
		}
		began := time.Now().UnixNano()
		err = c.attempt(ctx, addr, c.attemptTimeout(size, wait), wait+c.cfg.StallTimeout,
			func(actx context.Context) error { return call(actx, cc) })
		if err == nil {
			if t := c.troubleAt.Load(); t != 0 && t < began {
				c.troubleAt.CompareAndSwap(t, 0)
			}
			return nil
		}
		last, lastAddr = err, addr
		isBusy := api.Busy(err)
		switch {
		case isBusy:
			refused = true
		case !neverSent(err):
			sent = true
		}
		c.lastFail.Store(&failure{err: err, addr: addr, at: time.Now()})
		c.reach.note(addr, err)
		if !Retryable(err) {
			return err
		}
		if g := c.cfg.GiveUpUnreachable; g > 0 {
			if down, why := c.reach.allDown(c.cfg.Servers, g); down {
				if !sent {
					return fmt.Errorf("%w: %w: %w: %s", ErrNotSent, ErrNoConnection, ErrNoNode, why)
				}
				return fmt.Errorf("%w: %s", ErrNoNode, why)
			}
		}
		if !told && c.cfg.OnWaiting != nil && time.Since(start) >= c.cfg.WaitingAfter {
			told = true
			c.cfg.OnWaiting(c.reach.waiting(addr, err))
		}
		if ctx.Err() != nil {
			return gaveUp()
		}
		if errors.Is(err, errLeaderMoved) {
			continue // the leader is known and was set: go there at once
		}
		if code := status.Code(err); code == codes.Unavailable || code == codes.DeadlineExceeded || otherGroup(err) {
			c.troubleAt.Store(time.Now().UnixNano())
			c.setLeader("")
			c.refreshLeader(ctx)
		}
		pause := min(backoff, maxBackoff)
		if isBusy {
			// Busy: the node holds what it can answer soon. Retries of a
			// flood spread out (jitter) and slow down (to maxBusyBackoff)
			// rather than resend their requests every 50 ms.
			pause = backoff/2 + mrand.N(backoff/2+1)
		}
		backoff = min(backoff*2, maxBusyBackoff)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return gaveUp()
		}
	}
}

// The pauses between the attempts of one call double from 10 ms up to
// these: maxBusyBackoff after a node refused busy, maxBackoff otherwise
// (no leader, a leader change: a new leader is there within a second).
const (
	maxBackoff     = 50 * time.Millisecond
	maxBusyBackoff = time.Second
)

// errLeaderMoved marks an attempt abandoned because another node leads.
var errLeaderMoved = status.Error(codes.Unavailable, "leader moved")

// leaderMovedError is the Unavailable error of an abandoned attempt; it
// matches errLeaderMoved with errors.Is.
type leaderMovedError struct{ from, to string }

func (e *leaderMovedError) Error() string {
	return fmt.Sprintf("%s did not answer and %s now leads", e.from, e.to)
}

func (e *leaderMovedError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

func (e *leaderMovedError) Is(target error) bool { return target == errLeaderMoved }

// attempt runs one call to addr, bounded by timeout. Once it has gone
// unanswered for patience, it asks the other nodes every stallCheckEvery
// whether another node now leads, and gives up as soon as one does. The
// checks run beside the call: an answer is returned the moment it arrives.
func (c *Client) attempt(ctx context.Context, addr string, timeout, patience time.Duration, call func(context.Context) error) error {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The call runs on this goroutine; the watcher starts only once it has
	// gone unanswered for patience.
	var moved atomic.Pointer[string]
	ended := make(chan struct{})
	watch := time.AfterFunc(patience, func() {
		for {
			if l := c.leaderElsewhere(actx, addr); l != "" {
				moved.Store(&l)
				cancel()
				return
			}
			select {
			case <-ended:
				return
			case <-actx.Done():
				return
			case <-time.After(stallCheckEvery):
			}
		}
	})
	err := call(actx)
	watch.Stop()
	close(ended)
	if l := moved.Load(); err != nil && l != nil {
		c.setLeader(*l)
		return &leaderMovedError{from: addr, to: *l}
	}
	return err
}

// leaderElsewhere asks the nodes other than addr who leads and returns that
// leader's address when it is not addr. Concurrent callers for the same addr
// share one round of questions, and a round answers for stallCheckEvery.
func (c *Client) leaderElsewhere(ctx context.Context, addr string) string {
	c.viewMu.Lock()
	if v := c.view; v != nil && v.except == addr {
		if v.pending != nil {
			ch := v.pending
			c.viewMu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return ""
			}
			c.viewMu.Lock()
			v = c.view
			c.viewMu.Unlock()
			if v.leader != addr {
				return v.leader
			}
			return ""
		}
		if time.Since(v.at) < stallCheckEvery {
			c.viewMu.Unlock()
			if v.leader != addr {
				return v.leader
			}
			return ""
		}
	}
	v := &leaderView{except: addr, pending: make(chan struct{})}
	c.view = v
	c.viewMu.Unlock()

	var others []string
	for _, a := range c.candidates() {
		if a != addr {
			others = append(others, a)
		}
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.cfg.StallTimeout)
	best := c.askLeader(qctx, others, c.cfg.StallTimeout)
	cancel()
	leader := ""
	if best != nil && best.LeaderAddress != addr {
		leader = best.LeaderAddress
	}
	c.viewMu.Lock()
	c.view = &leaderView{at: time.Now(), except: addr, leader: leader}
	close(v.pending)
	c.viewMu.Unlock()
	return leader
}

// Status asks every node at once for the group's status and returns the
// leader's own answer, or, when the leader does not answer within
// StallTimeout of another node, the answer with the highest term naming a
// leader, or else the first answer at all.
func (c *Client) Status(ctx context.Context) (*api.StatusResponse, error) {
	addrs := c.candidates()
	type answer struct {
		addr string
		st   *api.StatusResponse
		err  error
	}
	ch := make(chan answer, len(addrs))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, a := range addrs {
		go func() {
			st, err := c.statusAt(sctx, a)
			ch <- answer{a, st, err}
		}()
	}
	var best, first *api.StatusResponse
	var whys []string
	var last error
	var graceC <-chan time.Time
collect:
	for range addrs {
		var a answer
		select {
		case a = <-ch:
		case <-graceC:
			break collect
		}
		if a.err != nil {
			last = a.err
			whys = append(whys, a.addr+": "+explain(a.err))
			continue
		}
		if first == nil {
			first = a.st
		}
		if a.st.LeaderAddress != "" && better(a.st, best) {
			best = a.st
			if a.st.LeaderId == a.st.AnsweredBy {
				break
			}
		}
		if graceC == nil {
			t := time.NewTimer(c.cfg.StallTimeout)
			defer t.Stop()
			graceC = t.C
		}
	}
	if best != nil {
		c.setLeader(best.LeaderAddress)
		return best, nil
	}
	if first != nil {
		return first, nil
	}
	return nil, &explained{msg: "no server answered: " + strings.Join(whys, "; "), err: last}
}

// StatusOf asks one node for its own view.
func (c *Client) StatusOf(ctx context.Context, addr string) (*api.StatusResponse, error) {
	return c.statusAt(ctx, addr)
}

// call runs one leader-bound RPC through do and returns its answer.
func call[R any](ctx context.Context, c *Client, rpc func(context.Context, api.BrokerClient) (R, error)) (R, error) {
	var out R
	err := c.do(ctx, func(ctx context.Context, cl api.BrokerClient) error {
		r, err := rpc(ctx, cl)
		if err == nil {
			out = r
		}
		return err
	})
	return out, err
}

// CreateTopic creates a topic with n queues (0: the node's default).
//
// An attempt whose answer was lost (a leader change) may have created the
// topic, so when a later attempt of the same call finds it existing with
// the queues asked, the topic is returned as created.
func (c *Client) CreateTopic(ctx context.Context, name string, queues int32, ifNotExists bool) (*api.TopicInfo, error) {
	attempts := 0
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.CreateTopicResponse, error) {
		attempts++
		return cl.CreateTopic(ctx, &api.CreateTopicRequest{Name: name, Queues: queues, IfNotExists: ifNotExists})
	})
	if attempts > 1 && status.Code(err) == codes.AlreadyExists {
		if t, derr := c.DescribeTopic(ctx, name); derr == nil && (queues == 0 || t.GetQueues() == queues) {
			return t, nil
		}
	}
	return r.GetTopic(), err
}

// ListTopics lists topics as the leader knows them.
func (c *Client) ListTopics(ctx context.Context) ([]*api.TopicInfo, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.ListTopicsResponse, error) {
		return cl.ListTopics(ctx, &api.ListTopicsRequest{})
	})
	return r.GetTopics(), err
}

// DescribeTopic describes a topic as the leader knows it, so max offsets
// are current.
func (c *Client) DescribeTopic(ctx context.Context, name string) (*api.TopicInfo, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.DescribeTopicResponse, error) {
		return cl.DescribeTopic(ctx, &api.DescribeTopicRequest{Name: name})
	})
	return r.GetTopic(), err
}

// CommitOffsets stores a group's offsets.
func (c *Client) CommitOffsets(ctx context.Context, group string, offsets []*api.QueueOffset) error {
	_, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.CommitOffsetsResponse, error) {
		return cl.CommitOffsets(ctx, &api.CommitOffsetsRequest{Group: group, Offsets: offsets})
	})
	return err
}

// FetchOffsets returns a group's committed offsets for a topic.
func (c *Client) FetchOffsets(ctx context.Context, group, topic string) (map[int32]uint64, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.FetchOffsetsResponse, error) {
		return cl.FetchOffsets(ctx, &api.FetchOffsetsRequest{Group: group, Topic: topic})
	})
	out := map[int32]uint64{}
	for _, o := range r.GetOffsets() {
		out[o.Queue] = o.Offset
	}
	return out, err
}

// TransferLeader moves leadership to id ("" = most caught-up follower).
func (c *Client) TransferLeader(ctx context.Context, id string) (*api.TransferLeaderResponse, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.TransferLeaderResponse, error) {
		return cl.TransferLeader(ctx, &api.TransferLeaderRequest{To: id})
	})
	if err == nil {
		c.setLeader("")
	}
	return r, err
}

// AddMember adds a node and promotes it to voter once it has caught up.
// One attempt may take all of ctx's time (RetryTimeout without a deadline):
// the leader waits for the node to catch up until shortly before that
// deadline, and removes it again if it has not, so that the error says what
// was left instead of the call ending in DeadlineExceeded.
func (c *Client) AddMember(ctx context.Context, id, raftAddr string) (*api.AddMemberResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RetryTimeout)
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	var out *api.AddMemberResponse
	err := c.doSized(ctx, 0, time.Until(dl), func(ctx context.Context, cl api.BrokerClient) error {
		r, err := cl.AddMember(ctx, &api.AddMemberRequest{Id: id, RaftAddress: raftAddr})
		if err == nil {
			out = r
		}
		return err
	})
	return out, err
}

// RemoveMember removes a node from the group.
func (c *Client) RemoveMember(ctx context.Context, id string, force bool) error {
	_, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.RemoveMemberResponse, error) {
		return cl.RemoveMember(ctx, &api.RemoveMemberRequest{Id: id, Force: force})
	})
	return err
}

// ListGroups lists consumer groups.
func (c *Client) ListGroups(ctx context.Context) ([]string, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.ListGroupsResponse, error) {
		return cl.ListGroups(ctx, &api.ListGroupsRequest{})
	})
	return r.GetGroups(), err
}

// DescribeGroup describes a consumer group.
func (c *Client) DescribeGroup(ctx context.Context, group string) (*api.DescribeGroupResponse, error) {
	return call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.DescribeGroupResponse, error) {
		return cl.DescribeGroup(ctx, &api.DescribeGroupRequest{Group: group})
	})
}

// ResetGroup moves a group's offsets for a topic to "earliest", "latest",
// an offset or "@<unix ms>", on req.Queues (all when empty); DryRun only
// answers the offsets.
func (c *Client) ResetGroup(ctx context.Context, req *api.ResetGroupRequest) ([]*api.QueueOffset, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.ResetGroupResponse, error) {
		return cl.ResetGroup(ctx, req)
	})
	return r.GetOffsets(), err
}

// SearchOffsets returns, per queue of topic (or of queues), the first offset
// whose message was stored at or after t (the queue's end when none was).
func (c *Client) SearchOffsets(ctx context.Context, topic string, t time.Time, queues []int32) ([]*api.QueueOffset, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.SearchOffsetsResponse, error) {
		return cl.SearchOffsets(ctx, &api.SearchOffsetsRequest{Topic: topic, TimestampMs: t.UnixMilli(), Queues: queues})
	})
	return r.GetOffsets(), err
}

func randomID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// newProducerID is a fresh random producer id, for a producer its group
// gives no number: 64 random bits in 11 characters of URL-safe base64,
// short because every request carries it into the log.
func newProducerID() string {
	var b [8]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
