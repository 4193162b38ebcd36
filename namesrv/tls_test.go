package namesrv

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/internal/tlsconf/tlstest"
	"github.com/raftmq/raftmq/remoting"
)

// TestTLSModes: a name server serves what its mode says to a client that
// dials as a node of each mode does (tlsconf.Node.Dial): an enforcing one
// refuses plaintext; a node with TLS permissive reaches a plaintext name
// server too (its handshake fails and it falls back).
func TestTLSModes(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	p := ca.Issue(t, "namesrv")
	node := func(mode tlsconf.Mode) *tlsconf.Node {
		n, err := tlsconf.New(tlsconf.Config{Mode: mode, CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: ca.CAFile, ReloadEvery: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return n
	}
	for _, tc := range []struct {
		name       string
		server     tlsconf.Mode
		client     tlsconf.Mode
		wantServed bool
	}{
		{"enforcing server, TLS client", tlsconf.Enforcing, tlsconf.Enforcing, true},
		{"enforcing server, plaintext client", tlsconf.Enforcing, tlsconf.Disabled, false},
		{"permissive server, plaintext client", tlsconf.Permissive, tlsconf.Disabled, true},
		{"permissive server, TLS client", tlsconf.Permissive, tlsconf.Enforcing, true},
		{"plaintext server, permissive client", tlsconf.Disabled, tlsconf.Permissive, true},
		{"plaintext server, enforcing client", tlsconf.Disabled, tlsconf.Enforcing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start(Config{Listen: "127.0.0.1:0", Expiry: time.Minute, TLS: node(tc.server)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			cl := remoting.NewClient()
			defer cl.Close()
			cl.DialTimeout = 2 * time.Second
			cn := node(tc.client)
			cl.Dial = func(ctx context.Context, addr string) (net.Conn, error) { return cn.Dial(ctx, "tcp", addr) }
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err = FetchClusterInfo(ctx, cl, s.Addr(), nil)
			if served := err == nil; served != tc.wantServed {
				t.Fatalf("served %v (%v), want %v", served, err, tc.wantServed)
			}
		})
	}
}
