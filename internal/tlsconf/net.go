package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// recordHandshake is the first byte of a TLS connection: the content type
// of a handshake record.
const recordHandshake = 0x16

// refuseDrain is how long a refused plaintext connection is read before
// it is closed.
const refuseDrain = 100 * time.Millisecond

// ErrPlaintext is the error of a plaintext connection to an enforcing port.
var ErrPlaintext = errors.New("plaintext connection refused: this node enforces TLS")

// Accept decides what raw is: a TLS handshake is completed with cfg, and
// the TLS connection and its state returned; plaintext is returned as it
// is in permissive mode (state nil) and closed in enforcing mode. The
// first byte and the handshake must arrive within HandshakeTimeout.
func (n *Node) Accept(raw net.Conn, cfg *tls.Config) (net.Conn, *tls.ConnectionState, error) {
	if !n.On() {
		return raw, nil, nil
	}
	raw.SetDeadline(time.Now().Add(HandshakeTimeout))
	var first [1]byte
	if _, err := io.ReadFull(raw, first[:]); err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("first byte from %s: %w", raw.RemoteAddr(), err)
	}
	pc := &peekedConn{Conn: raw, first: first[:]}
	if first[0] != recordHandshake {
		if n.Mode() == Enforcing {
			// Read what the client has sent before closing: a close with
			// unread data resets the connection, and the client then sees
			// a broken pipe or a reset (which it may take for a passing
			// fault) instead of the end of the stream.
			raw.SetReadDeadline(time.Now().Add(refuseDrain))
			io.Copy(io.Discard, io.LimitReader(raw, 64<<10))
			raw.Close()
			n.log.Debug("plaintext connection refused", "remote", raw.RemoteAddr())
			return nil, nil, fmt.Errorf("%s: %w", raw.RemoteAddr(), ErrPlaintext)
		}
		raw.SetDeadline(time.Time{})
		return pc, nil, nil
	}
	tc := tls.Server(pc, cfg)
	if err := tc.Handshake(); err != nil {
		raw.Close()
		n.log.Debug("tls handshake refused", "remote", raw.RemoteAddr(), "error", err)
		return nil, nil, fmt.Errorf("tls handshake with %s: %w", raw.RemoteAddr(), err)
	}
	raw.SetDeadline(time.Time{})
	st := tc.ConnectionState()
	return tc, &st, nil
}

// peekedConn gives back the byte Accept read before the rest.
type peekedConn struct {
	net.Conn
	first []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// Listen wraps l so that its connections go through Accept with a config
// of ServerConfig(requireCert). Accept of the returned listener does not
// wait for a connection's first byte: that happens on the connection's
// first Read or Write, in the goroutine serving it. A disabled node gets l
// back.
func (n *Node) Listen(l net.Listener, requireCert bool) net.Listener {
	if !n.On() {
		return l
	}
	return &listener{Listener: l, n: n, cfg: n.ServerConfig(requireCert)}
}

type listener struct {
	net.Listener
	n   *Node
	cfg *tls.Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &lazyConn{Conn: c, l: l}, nil
}

// lazyConn runs Accept on its first Read or Write.
type lazyConn struct {
	net.Conn // the raw connection until ready, for addresses and Close
	l        *listener
	once     sync.Once
	c        net.Conn
	err      error
	rd, wd   time.Time // deadlines set before the handshake
	mu       sync.Mutex
}

func (c *lazyConn) ready() error {
	c.once.Do(func() {
		c.c, _, c.err = c.l.n.Accept(c.Conn, c.l.cfg)
		if c.err == nil {
			c.mu.Lock()
			c.c.SetReadDeadline(c.rd)
			c.c.SetWriteDeadline(c.wd)
			c.mu.Unlock()
		}
	})
	return c.err
}

func (c *lazyConn) Read(p []byte) (int, error) {
	if err := c.ready(); err != nil {
		return 0, err
	}
	return c.c.Read(p)
}

func (c *lazyConn) Write(p []byte) (int, error) {
	if err := c.ready(); err != nil {
		return 0, err
	}
	return c.c.Write(p)
}

// Close closes the raw connection (no TLS close_notify: the peers of
// raftmq's protocols never rely on it).
func (c *lazyConn) Close() error { return c.Conn.Close() }

func (c *lazyConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rd, c.wd = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *lazyConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rd = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *lazyConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wd = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// Dial connects to a peer node at addr: plaintext for a disabled node,
// TLS with ClientConfig otherwise. In permissive mode a peer that closes
// the connection during the handshake or answers with something that is
// not TLS (a node still disabled) is dialed again in plaintext; a
// certificate the CA did not sign is never a reason to fall back.
func (n *Node) Dial(ctx context.Context, network, addr string, nextProtos ...string) (net.Conn, error) {
	return n.DialName(ctx, network, addr, "", nextProtos...)
}

// DialName is Dial verifying the peer's certificate for serverName (""
// the host of addr): the name a caller resolved into addr (gRPC hands its
// dialer the resolved IP address; the certificate names the host name).
func (n *Node) DialName(ctx context.Context, network, addr, serverName string, nextProtos ...string) (net.Conn, error) {
	var d net.Dialer
	if !n.On() {
		return d.DialContext(ctx, network, addr)
	}
	td := tls.Dialer{NetDialer: &d, Config: n.ClientConfig(serverName, nextProtos...)}
	c, err := td.DialContext(ctx, network, addr)
	if err == nil || n.Mode() != Permissive || !notTLS(err) {
		return c, err
	}
	n.log.Debug("peer does not speak tls: dialing plaintext (permissive mode)", "addr", addr, "error", err)
	return d.DialContext(ctx, network, addr)
}

// notTLS reports whether a failed client handshake means the peer does not
// speak TLS (rather than refused or failed to prove who it is).
func notTLS(err error) bool {
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		return true
	}
	var alert tls.AlertError
	var verr *tls.CertificateVerificationError
	var unk x509.UnknownAuthorityError
	var host x509.HostnameError
	var inv x509.CertificateInvalidError
	if errors.As(err, &alert) || errors.As(err, &verr) || errors.As(err, &unk) || errors.As(err, &host) || errors.As(err, &inv) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false // nothing listens: plaintext would fail the same way
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// GRPCCredentials are the transport credentials of a gRPC server of this
// node: TLS with ServerConfig(false, "h2"), and plaintext as Accept allows.
func (n *Node) GRPCCredentials() credentials.TransportCredentials {
	return &grpcCreds{n: n, cfg: n.ServerConfig(false, "h2")}
}

type grpcCreds struct {
	n   *Node
	cfg *tls.Config
}

// plainInfo is the AuthInfo of a plaintext connection.
type plainInfo struct{ credentials.CommonAuthInfo }

func (plainInfo) AuthType() string { return "insecure" }

func (g *grpcCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, st, err := g.n.Accept(raw, g.cfg)
	if err != nil {
		return nil, nil, err
	}
	if st == nil {
		return c, plainInfo{credentials.CommonAuthInfo{SecurityLevel: credentials.NoSecurity}}, nil
	}
	return c, credentials.TLSInfo{State: *st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}, nil
}

func (g *grpcCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconf: server credentials only")
}

func (g *grpcCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

func (g *grpcCreds) Clone() credentials.TransportCredentials { return &grpcCreds{n: g.n, cfg: g.cfg} }

func (g *grpcCreds) OverrideServerName(string) error { return nil }

// VerifiedPeer reports whether the gRPC call of ctx came over TLS with a
// client certificate the CA signed: a node of the cluster (or a client
// given such a certificate).
func VerifiedPeer(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(ti.State.VerifiedChains) > 0
}
