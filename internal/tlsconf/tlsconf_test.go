package tlsconf_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/internal/tlsconf/tlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func node(t *testing.T, mode tlsconf.Mode, ca *tlstest.CA, p tlstest.Pair, every time.Duration) *tlsconf.Node {
	t.Helper()
	n, err := tlsconf.New(tlsconf.Config{Mode: mode, CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: ca.CAFile, ReloadEvery: every})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// echo serves l: every connection gets its first line back.
func echo(t *testing.T, l net.Listener) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					c.Write([]byte(line))
				}
			}()
		}
	}()
}

func listen(t *testing.T, n *tlsconf.Node, requireCert bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echo(t, n.Listen(l, requireCert))
	return l.Addr().String()
}

// roundTrip sends a line over c and reads the answer.
func roundTrip(c net.Conn) (string, error) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func plain(t *testing.T, addr string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return roundTrip(c)
}

func withTLS(addr string, cfg *tls.Config) (string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	return roundTrip(c)
}

func TestPermissiveServesTLSAndPlaintext(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	srv := node(t, tlsconf.Permissive, ca, ca.Issue(t, "n1"), -1)
	addr := listen(t, srv, false)
	if got, err := plain(t, addr); err != nil || got != "hello\n" {
		t.Fatalf("plaintext on a permissive port: %q, %v", got, err)
	}
	cfg, err := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := withTLS(addr, cfg); err != nil || got != "hello\n" {
		t.Fatalf("TLS on a permissive port: %q, %v", got, err)
	}
	cfg.MaxVersion = tls.VersionTLS11
	if _, err := withTLS(addr, cfg); err == nil {
		t.Fatal("TLS 1.1 accepted; the minimum is 1.2")
	}
}

func TestEnforcingRefusesPlaintext(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	srv := node(t, tlsconf.Enforcing, ca, ca.Issue(t, "n1"), -1)
	addr := listen(t, srv, false)
	for range 5 {
		// The end of the stream, not a reset: clients tell that apart.
		if got, err := plain(t, addr); !errors.Is(err, io.EOF) {
			t.Fatalf("plaintext on an enforcing port: %q, %v; want io.EOF", got, err)
		}
	}
	cfg, _ := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	if got, err := withTLS(addr, cfg); err != nil || got != "hello\n" {
		t.Fatalf("TLS on an enforcing port: %q, %v", got, err)
	}
}

func TestUntrustedClientCertRefused(t *testing.T) {
	ca, rogue := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
	srv := node(t, tlsconf.Enforcing, ca, ca.Issue(t, "n1"), -1)
	addr := listen(t, srv, true) // the raft port: a certificate is required
	good := ca.Issue(t, "n2")
	bad := rogue.Issue(t, "n9")
	cfg, _ := tlsconf.ClientFiles(ca.CAFile, good.CertFile, good.KeyFile, "")
	if got, err := withTLS(addr, cfg); err != nil || got != "hello\n" {
		t.Fatalf("a node of the cluster CA: %q, %v", got, err)
	}
	cfg, _ = tlsconf.ClientFiles(ca.CAFile, bad.CertFile, bad.KeyFile, "")
	if got, err := withTLS(addr, cfg); err == nil {
		t.Fatalf("a certificate of another CA was accepted: %q", got)
	}
	cfg, _ = tlsconf.ClientFiles(ca.CAFile, "", "", "")
	if got, err := withTLS(addr, cfg); err == nil {
		t.Fatalf("no client certificate on a port that requires one: %q", got)
	}
	// A node that dials with the rogue certificate and trusts the rogue
	// CA fails on both sides.
	rn := node(t, tlsconf.Enforcing, rogue, bad, -1)
	if c, err := rn.Dial(context.Background(), "tcp", addr); err == nil {
		if got, err := roundTrip(c); err == nil {
			t.Fatalf("rogue node dialed and was answered %q", got)
		}
	}
}

func TestReloadPicksUpNewCert(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	p := ca.Issue(t, "n1")
	srv := node(t, tlsconf.Enforcing, ca, p, 20*time.Millisecond)
	addr := listen(t, srv, false)
	serial := func() string {
		cfg, _ := tlsconf.ClientFiles(ca.CAFile, "", "", "")
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := serial()
	time.Sleep(10 * time.Millisecond) // a new modification time on coarse clocks
	ca.Issue(t, "n1")                 // rotated in place
	deadline := time.Now().Add(5 * time.Second)
	for serial() == before {
		if time.Now().After(deadline) {
			t.Fatal("the rotated certificate was not picked up by the file watch")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Reload (SIGHUP) picks it up at once, and a broken file keeps the old one.
	manual := node(t, tlsconf.Enforcing, ca, p, -1)
	old := manual.Certificate().Leaf.SerialNumber
	ca.Issue(t, "n1")
	if err := manual.Reload(); err != nil {
		t.Fatal(err)
	}
	if manual.Certificate().Leaf.SerialNumber.Cmp(old) == 0 {
		t.Fatal("Reload kept the old certificate")
	}
	cur := manual.Certificate()
	if err := writeFile(p.KeyFile, "garbage"); err != nil {
		t.Fatal(err)
	}
	if err := manual.Reload(); err == nil || manual.Certificate() != cur {
		t.Fatalf("Reload of a broken key: err %v, certificate swapped %v", err, manual.Certificate() != cur)
	}
}

func TestPermissiveDialFallsBackOnlyToPlaintextPeers(t *testing.T) {
	ca, rogue := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
	disabled, err := tlsconf.New(tlsconf.Config{Mode: tlsconf.Disabled})
	if err != nil {
		t.Fatal(err)
	}
	plainAddr := listen(t, disabled, true)
	dialer := node(t, tlsconf.Permissive, ca, ca.Issue(t, "n1"), -1)
	c, err := dialer.Dial(context.Background(), "tcp", plainAddr)
	if err != nil {
		t.Fatalf("permissive dial of a plaintext peer: %v", err)
	}
	if got, err := roundTrip(c); err != nil || got != "hello\n" {
		t.Fatalf("permissive dial of a plaintext peer: %q, %v", got, err)
	}
	if _, ok := c.(*tls.Conn); ok {
		t.Fatal("a plaintext peer was answered over TLS?")
	}
	// A TLS peer whose certificate the cluster CA did not sign: no fallback.
	rn := node(t, tlsconf.Permissive, rogue, rogue.Issue(t, "n9"), -1)
	rogueAddr := listen(t, rn, false)
	if c, err := dialer.Dial(context.Background(), "tcp", rogueAddr); err == nil {
		c.Close()
		t.Fatal("dialed a peer with an untrusted certificate")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("want a certificate error, got %v", err)
	}
	// An enforcing dialer never falls back.
	strict := node(t, tlsconf.Enforcing, ca, ca.Issue(t, "n2"), -1)
	if c, err := strict.Dial(context.Background(), "tcp", plainAddr); err == nil {
		c.Close()
		t.Fatal("an enforcing node dialed a plaintext peer")
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := tlsconf.ParseMode("strict"); err == nil {
		t.Fatal("ParseMode accepted strict")
	}
	err := tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: "a"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("Validate without key: %v", err)
	}
	if _, err := tlsconf.ClientFiles("", "c.pem", "", ""); err == nil {
		t.Fatal("ClientFiles with a certificate and no key")
	}
}
