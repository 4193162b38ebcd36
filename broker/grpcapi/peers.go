package grpcapi

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// Peers is a pool of gRPC connections to the other nodes. It implements
// broker.PeerClient (the Peer service) and is what the server forwards
// client calls through (the Broker service).
type Peers struct {
	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	dial   map[string]string // peer API address -> address to dial instead
	tls    *tlsconf.Node     // nil or disabled: plaintext
	closed bool
	node   atomic.Pointer[[]byte] // the node secret every call is signed with (nil: unsigned)
	// streams carry the produce calls this node forwards, one stream per
	// leader it forwards to.
	streams api.ProduceStreams
}

// SetNodeSecret makes every call to the other nodes carry the group's node
// credential (mq.NodeAccessKey signed with secret), which a node with
// --auth permissive or enforcing asks of node-to-node calls and of the
// client calls a node forwards to the leader. Calls already dialed sign
// from their next call on.
func (p *Peers) SetNodeSecret(secret []byte) {
	if len(secret) == 0 {
		p.node.Store(nil)
		return
	}
	p.node.Store(&secret)
}

// nodeCredentials signs each call with the node secret, when there is one.
type nodeCredentials struct{ p *Peers }

func (c nodeCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	secret := c.p.node.Load()
	if secret == nil {
		return nil, nil
	}
	ri, _ := credentials.RequestInfoFromContext(ctx)
	return map[string]string{mq.CallCredentialKey: mq.SignCall(mq.NodeAccessKey, *secret, ri.Method, time.Now())}, nil
}

func (nodeCredentials) RequireTransportSecurity() bool { return false }

var _ broker.PeerClient = (*Peers)(nil)

// NewPeers returns an empty pool of node self. dial, for fault injection
// only, maps a peer's API address to the address to dial instead (a
// proxy); nil: none. tls, when on, dials the peers over TLS with this
// node's certificate (internal/tlsconf: plaintext only to a peer that does
// not speak TLS, and only in permissive mode); nil: plaintext.
func NewPeers(self string, dial map[string]string, tls *tlsconf.Node) *Peers {
	p := &Peers{conns: map[string]*grpc.ClientConn{}, dial: dial, tls: tls}
	p.streams.StreamContext = func(ctx context.Context) context.Context { return ForwardedContext(ctx, self) }
	return p
}

// Produce forwards a produce call to the node on cc (a connection of this
// pool) as a call on this node's produce stream to it, marked forwarded.
func (p *Peers) Produce(ctx context.Context, cc grpc.ClientConnInterface, req *api.ProduceRequest) (*api.ProduceResponse, error) {
	return p.streams.Produce(ctx, cc, req)
}

// Conn returns the connection to the node at addr, dialing lazily.
func (p *Peers) Conn(addr string) (grpc.ClientConnInterface, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, broker.ErrShutdown
	}
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	target := addr
	if d, ok := p.dial[addr]; ok {
		target = d
	}
	opts := []grpc.DialOption{grpc.WithPerRPCCredentials(nodeCredentials{p})}
	if p.tls.On() {
		// The dialer does TLS itself (its permissive fallback needs a
		// fresh connection, which credentials cannot make), so gRPC
		// sees a connection it need not secure.
		// gRPC resolves target and hands the dialer an IP address; the
		// certificate is checked against the host name given.
		n := p.tls
		host, _, err := net.SplitHostPort(target)
		if err != nil {
			host = ""
		}
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return n.DialName(ctx, "tcp", a, host, "h2")
		}))
	}
	c, err := api.Dial(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial peer %s: %w", addr, err)
	}
	p.conns[addr] = c
	return c, nil
}

// NodeState asks a peer for its state.
func (p *Peers) NodeState(ctx context.Context, addr string) (broker.NodeState, error) {
	cc, err := p.Conn(addr)
	if err != nil {
		return broker.NodeState{}, err
	}
	r, err := peerCall(ctx, cc, &api.NodeStateRequest{}, api.PeerClient.NodeState, legacyNodeState)
	if err != nil {
		return broker.NodeState{}, err
	}
	return broker.NodeState{ID: r.Id, Role: r.Role, Term: r.Term, Applied: r.AppliedIndex, Commit: r.CommitIndex,
		Last: r.LastIndex, First: r.FirstIndex, Load: r.Load, Loaded: r.Loaded, LeaderID: r.LeaderId,
		Damaged: r.Damaged, DamagedIndex: r.DamagedIndex, DamagedReason: r.DamagedReason,
		ServedAsLeader: r.ServedAsLeader, ServedAsFollower: r.ServedAsFollower, BatchReadVersion: r.BatchReadVersion}, nil
}

// GroupStatus asks the node at addr, of this group or another, for its
// group's status.
func (p *Peers) GroupStatus(ctx context.Context, addr string) (broker.Status, error) {
	cc, err := p.Conn(addr)
	if err != nil {
		return broker.Status{}, err
	}
	r, err := api.NewBrokerClient(cc).Status(ctx, &api.StatusRequest{})
	if err != nil {
		return broker.Status{}, err
	}
	return statusOf(r), nil
}

// Register asks the leader at addr to record n.
func (p *Peers) Register(ctx context.Context, addr string, n store.NodeInfo) error {
	cc, err := p.Conn(addr)
	if err != nil {
		return err
	}
	_, err = peerCall(ctx, cc, &api.RegisterRequest{Id: n.ID, ClientAddress: n.ClientAddr, HttpAddress: n.HTTPAddr, PeerAddress: n.PeerAddr,
		ExternalAddress: n.ExternalAddr},
		api.PeerClient.Register, legacyRegister)
	return err
}

// peerCall calls a Peer method; a node of the release before the Peer
// service answers Unimplemented, and is asked again under the method's
// legacy name on the Broker service.
func peerCall[Q any, R any](ctx context.Context, cc grpc.ClientConnInterface, req *Q,
	rpc func(api.PeerClient, context.Context, *Q, ...grpc.CallOption) (*R, error), legacy string) (*R, error) {
	r, err := rpc(api.NewPeerClient(cc), ctx, req)
	if status.Code(err) != codes.Unimplemented {
		return r, err
	}
	r = new(R)
	if err := cc.Invoke(ctx, legacy, req, r); err != nil {
		return nil, err
	}
	return r, nil
}

// Close closes every connection; it is idempotent.
func (p *Peers) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for a, c := range p.conns {
		c.Close()
		delete(p.conns, a)
	}
	return nil
}
