package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Mode is how a node treats TLS on its ports (RocketMQ's tls.server.mode).
type Mode string

// The modes.
const (
	// Disabled: plaintext only, as before TLS existed.
	Disabled Mode = "disabled"
	// Permissive: every port accepts TLS and plaintext; the node dials
	// its peers with TLS and falls back to plaintext for a peer that does
	// not speak it. The step between disabled and enforcing.
	Permissive Mode = "permissive"
	// Enforcing: every port refuses plaintext; nodes must present a
	// certificate the cluster CA signed.
	Enforcing Mode = "enforcing"
)

// ParseMode parses a --tls-mode value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case Disabled, Permissive, Enforcing:
		return m, nil
	case "":
		return Disabled, nil
	}
	return "", fmt.Errorf("--tls-mode %q: want disabled, permissive or enforcing", s)
}

// DefaultReloadEvery is how often a node looks at its certificate files'
// modification times.
const DefaultReloadEvery = 10 * time.Second

// HandshakeTimeout bounds the first byte and the TLS handshake of an
// accepted connection.
const HandshakeTimeout = 10 * time.Second

// Config locates a node's TLS material.
type Config struct {
	Mode     Mode
	CertFile string // PEM certificate chain of this node (server and client use)
	KeyFile  string // PEM private key of CertFile
	CAFile   string // PEM CA certificates that sign the cluster's nodes (and clients' certificates)
	// ReloadEvery: how often the files' modification times are checked;
	// 0 means DefaultReloadEvery, below 0 never (Reload only).
	ReloadEvery time.Duration
	Logger      hclog.Logger
}

// Validate names the flag and value of the first problem.
func (c Config) Validate() error {
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return err
	}
	if c.Mode == Disabled || c.Mode == "" {
		return nil
	}
	for _, f := range []struct{ flag, v string }{{"--tls-cert", c.CertFile}, {"--tls-key", c.KeyFile}, {"--tls-ca", c.CAFile}} {
		if f.v == "" {
			return fmt.Errorf("%s: empty; --tls-mode %s needs --tls-cert, --tls-key and --tls-ca", f.flag, c.Mode)
		}
	}
	return nil
}

// material is one loaded generation of the files.
type material struct {
	cert  *tls.Certificate
	pool  *x509.CertPool
	stamp string // modification times and sizes of the three files
}

// Node holds a node's TLS material and swaps it atomically on reload.
// A nil *Node, or one in Disabled mode, means plaintext everywhere.
type Node struct {
	cfg  Config
	log  hclog.Logger
	cur  atomic.Pointer[material]
	mu   sync.Mutex // serialises reloads
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// New loads the files and, unless cfg.ReloadEvery < 0, watches them. A
// Disabled config returns a Node that loads nothing.
func New(cfg Config) (*Node, error) {
	if cfg.Mode == "" {
		cfg.Mode = Disabled
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	n := &Node{cfg: cfg, log: cfg.Logger, stop: make(chan struct{})}
	if cfg.Mode == Disabled {
		return n, nil
	}
	m, err := load(cfg)
	if err != nil {
		return nil, err
	}
	n.cur.Store(m)
	n.log.Info("tls certificate loaded", "mode", cfg.Mode, "cert", cfg.CertFile, "subject", subject(m.cert), "expires", expiry(m.cert))
	if every := cfg.ReloadEvery; every >= 0 {
		if every == 0 {
			every = DefaultReloadEvery
		}
		n.wg.Add(1)
		go n.watch(every)
	}
	return n, nil
}

// Mode is the node's mode; Disabled for a nil Node.
func (n *Node) Mode() Mode {
	if n == nil {
		return Disabled
	}
	return n.cfg.Mode
}

// On reports whether the node speaks TLS at all.
func (n *Node) On() bool { return n.Mode() != Disabled }

// Reload reads the files again and swaps the certificate, key and CA in;
// connections made from then on use them. On error the old ones stay.
func (n *Node) Reload() error {
	if !n.On() {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	m, err := load(n.cfg)
	if err != nil {
		n.log.Error("tls reload failed: keeping the certificate loaded before", "error", err)
		return err
	}
	n.cur.Store(m)
	n.log.Info("tls certificate reloaded", "cert", n.cfg.CertFile, "subject", subject(m.cert), "expires", expiry(m.cert))
	return nil
}

// Certificate is the certificate in use now.
func (n *Node) Certificate() *tls.Certificate {
	if m := n.cur.Load(); m != nil {
		return m.cert
	}
	return nil
}

// Close stops watching the files; it is idempotent.
func (n *Node) Close() {
	if n == nil {
		return
	}
	n.once.Do(func() { close(n.stop) })
	n.wg.Wait()
}

func (n *Node) watch(every time.Duration) {
	defer n.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		st, err := stamp(n.cfg)
		if err != nil || st == n.cur.Load().stamp {
			continue // a file being replaced; the next tick sees it
		}
		n.Reload()
	}
}

// stamp sums up the files' modification times and sizes.
func stamp(cfg Config) (string, error) {
	var b strings.Builder
	for _, p := range []string{cfg.CertFile, cfg.KeyFile, cfg.CAFile} {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%d/%d;", fi.ModTime().UnixNano(), fi.Size())
	}
	return b.String(), nil
}

func load(cfg Config) (*material, error) {
	st, err := stamp(cfg)
	if err != nil {
		return nil, fmt.Errorf("tls files: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", cfg.CertFile, cfg.KeyFile, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		cert.Leaf, _ = x509.ParseCertificate(cert.Certificate[0])
	}
	pool, err := LoadCA(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	return &material{cert: &cert, pool: pool, stamp: st}, nil
}

// LoadCA reads a PEM file of CA certificates.
func LoadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in it", path)
	}
	return pool, nil
}

func subject(c *tls.Certificate) string {
	if c.Leaf == nil {
		return ""
	}
	return c.Leaf.Subject.String()
}

func expiry(c *tls.Certificate) string {
	if c.Leaf == nil {
		return ""
	}
	return c.Leaf.NotAfter.UTC().Format(time.RFC3339)
}

// ServerConfig is the tls.Config of a port of this node. requireCert:
// the peer must present a certificate the CA signed (the raft port);
// otherwise a certificate is verified when given (the client ports, where
// nodes also call, see VerifiedPeer). Each handshake uses the material
// loaded last. nextProtos: ALPN ("h2" for gRPC).
func (n *Node) ServerConfig(requireCert bool, nextProtos ...string) *tls.Config {
	auth := tls.VerifyClientCertIfGiven
	if requireCert {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := n.cur.Load()
			if m == nil {
				return nil, errors.New("tls: no certificate loaded")
			}
			return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos, Certificates: []tls.Certificate{*m.cert},
				ClientAuth: auth, ClientCAs: m.pool}, nil
		},
	}
}

// ClientConfig is the tls.Config this node dials a peer with: it verifies
// the peer's certificate against the CA for serverName (the host of the
// address dialed when empty is given to tls.Dialer) and presents this
// node's certificate.
func (n *Node) ClientConfig(serverName string, nextProtos ...string) *tls.Config {
	m := n.cur.Load()
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, NextProtos: nextProtos,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return n.cur.Load().cert, nil
		}}
	if m != nil {
		c.RootCAs = m.pool
	}
	return c
}

// ClientFiles builds the tls.Config of a client (the CLI): caFile verifies
// the server; certFile and keyFile, both or neither, are presented when the
// server asks. serverName overrides the host name checked (default: the
// host of the address dialed).
func ClientFiles(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--tls-cert and --tls-key: give both or neither")
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pool, err := LoadCA(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}
