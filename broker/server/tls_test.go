package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/internal/tlsconf/tlstest"
)

// TestTLSEnforcingGroup: a group of three nodes with --tls-mode enforcing
// serves a client that trusts the cluster CA (produce, and consume from
// followers, which forward over node-to-node TLS), refuses a plaintext
// client and plaintext HTTP, refuses the Peer service to a caller without
// a node certificate, and a node whose certificate another CA signed
// cannot join: member add fails, it never receives an entry, and the
// group goes on working.
func TestTLSEnforcingGroup(t *testing.T) {
	ca, rogue := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
	httpAddrs := make([]string, 3)
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		p := ca.Issue(t, cfg.Raft.ID)
		cfg.TLS = tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: ca.CAFile}
		cfg.HTTP = freeAddr(t)
		httpAddrs[i] = cfg.HTTP
		if i == 0 {
			cfg.Remoting = freeAddr(t)
		}
	})
	c.Leader()
	ctx := ctxT(t, 60*time.Second)
	trust, err := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Config{Servers: c.Addrs(), TLS: trust})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "secure", 2, false); err != nil {
		t.Fatalf("create topic over TLS: %v", err)
	}
	p := cl.NewProducer()
	for i := range 20 {
		if _, err := p.Send(ctx, "secure", client.Message{Body: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatalf("send %d over TLS: %v", i, err)
		}
	}
	recs, _ := consumeAll(t, cl, "secure", true)
	if len(recs) != 20 {
		t.Fatalf("consumed %d messages over TLS, want 20", len(recs))
	}

	// A plaintext client is refused.
	pcfg := client.DefaultConfig()
	pcfg.Servers, pcfg.RetryTimeout, pcfg.GiveUpUnreachable = c.Addrs(), 3*time.Second, time.Second
	plain, err := client.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	if _, err := plain.ListTopics(sctx); err == nil {
		t.Fatal("a plaintext client was served by an enforcing group")
	} else {
		t.Logf("plaintext client: %v", err)
	}
	// A client that does not trust the cluster CA is refused too.
	other, _ := tlsconf.ClientFiles(rogue.CAFile, "", "", "")
	pcfg.TLS = other
	wrong, err := client.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if _, err := wrong.ListTopics(sctx); err == nil {
		t.Fatal("a client that does not trust the cluster CA was served")
	} else {
		t.Logf("client of another CA: %v", err)
	}

	// HTTP: https with the CA works, plaintext does not.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: trust}}
	resp, err := hc.Get("https://" + httpAddrs[0] + "/healthz")
	if err != nil {
		t.Fatalf("https /healthz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("https /healthz: %q", body)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + httpAddrs[0] + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("plaintext /healthz answered by an enforcing node")
	}

	// The remoting port: a TLS handshake with the CA completes, plaintext
	// is closed after its first bytes.
	rmq := c.Node(0).RemotingAddr()
	if tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", rmq, trust); err != nil {
		t.Fatalf("TLS to the remoting port: %v", err)
	} else {
		tc.Close()
	}
	if pc, err := net.DialTimeout("tcp", rmq, 5*time.Second); err != nil {
		t.Fatal(err)
	} else {
		pc.SetDeadline(time.Now().Add(5 * time.Second))
		pc.Write([]byte{0, 0, 0, 20, 0, 0, 0, 10}) // the start of a remoting frame
		if n, err := pc.Read(make([]byte, 1)); err == nil {
			t.Fatalf("plaintext to an enforcing remoting port was answered (%d bytes)", n)
		}
		pc.Close()
	}

	// The Peer service wants a node certificate; the Broker service not.
	cc, err := api.Dial(c.Addrs()[0], grpc.WithTransportCredentials(credentials.NewTLS(trust)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := api.NewPeerClient(cc).NodeState(ctx, &api.NodeStateRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("NodeState without a node certificate: %v, want PermissionDenied", err)
	}
	if _, err := api.NewBrokerClient(cc).Status(ctx, &api.StatusRequest{}); err != nil {
		t.Fatalf("Status over TLS without a client certificate: %v", err)
	}
	node := ca.Issue(t, "n9")
	withCert, _ := tlsconf.ClientFiles(ca.CAFile, node.CertFile, node.KeyFile, "")
	cc2, err := api.Dial(c.Addrs()[0], grpc.WithTransportCredentials(credentials.NewTLS(withCert)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()
	if _, err := api.NewPeerClient(cc2).NodeState(ctx, &api.NodeStateRequest{}); err != nil {
		t.Fatalf("NodeState with a node certificate: %v", err)
	}

	// A node with a certificate of another CA cannot join.
	rp := rogue.Issue(t, "n4")
	rcfg := server.DefaultConfig()
	rcfg.DataDir = t.TempDir()
	rcfg.Listen = freeAddr(t)
	rcfg.Raft.ID = "n4"
	rcfg.Raft.BindAddr = freeAddr(t)
	rcfg.Raft.Join = true
	rcfg.Broker.ClientAddr = rcfg.Listen
	rcfg.TLS = tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: rp.CertFile, KeyFile: rp.KeyFile, CAFile: rogue.CAFile}
	rcfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "n4-rogue", Level: hclog.Info, Output: testWriter{t}})
	rn, err := server.Start(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rn.Kill()
	actx, cancel := context.WithTimeout(ctx, 8*time.Second)
	_, err = cl.AddMember(actx, "n4", rcfg.Raft.BindAddr)
	cancel()
	if err == nil {
		t.Fatal("a node with another CA's certificate was added")
	}
	t.Logf("member add of the rogue node: %v", err)
	if got := rn.Node().Stats().LastIndex; got != 0 {
		t.Fatalf("the rogue node holds log index %d; it must receive nothing", got)
	}
	waitFor(t, 15*time.Second, "3 servers in every node's configuration", func() bool {
		for _, s := range c.Nodes() {
			if servers, err := s.Node().Servers(); err != nil || len(servers) != 3 {
				return false
			}
		}
		return true
	})
	if _, err := p.Send(ctx, "secure", client.Message{Body: []byte("after")}); err != nil {
		t.Fatalf("send after the rogue node's attempt: %v", err)
	}
}

// TestTLSPermissiveMigration moves a running plaintext group to enforcing
// node by node (disabled -> permissive -> enforcing, one node at a time)
// while a plaintext-then-TLS client keeps producing: the way docs/security.md
// tells an operator to do it.
func TestTLSPermissiveMigration(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	c := newCluster(t, 3, nil)
	c.Leader()
	ctx := ctxT(t, 90*time.Second)
	pcl := c.Client(t)
	if _, err := pcl.CreateTopic(ctx, "moving", 1, false); err != nil {
		t.Fatal(err)
	}
	trust, _ := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	tcl, err := client.New(client.Config{Servers: c.Addrs(), TLS: trust})
	if err != nil {
		t.Fatal(err)
	}
	defer tcl.Close()
	sent := 0
	send := func(cl *client.Client, what string) {
		t.Helper()
		if _, err := cl.NewProducer().Send(ctx, "moving", client.Message{Body: []byte(what)}); err != nil {
			t.Fatalf("send %s: %v", what, err)
		}
		sent++
	}
	send(pcl, "plaintext group")
	for _, mode := range []tlsconf.Mode{tlsconf.Permissive, tlsconf.Enforcing} {
		for i := range c.Nodes() {
			p := ca.Issue(t, c.Config(i).Raft.ID)
			c.Stop(i)
			c.Reconfigure(i, func(cfg *server.Config) {
				cfg.TLS = tlsconf.Config{Mode: mode, CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: ca.CAFile}
			})
			c.Restart(i)
			c.Leader()
			if mode == tlsconf.Permissive {
				send(pcl, fmt.Sprintf("plaintext, %s permissive", c.Config(i).Raft.ID))
			}
			if mode == tlsconf.Enforcing || i == c.Size()-1 {
				send(tcl, fmt.Sprintf("tls, %s %s", c.Config(i).Raft.ID, mode))
			}
		}
	}
	recs, _ := consumeAll(t, tcl, "moving", true)
	if len(recs) != sent {
		t.Fatalf("consumed %d messages after the migration, want %d", len(recs), sent)
	}
}

// TestTLSRotationUnderLoad: every node's certificate is replaced and
// reloaded (ReloadTLS, what SIGHUP calls) while a producer sends, and a
// node restarted afterwards joins with the new one: nothing acknowledged
// is lost and every new connection presents the new certificate.
func TestTLSRotationUnderLoad(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		p := ca.Issue(t, cfg.Raft.ID)
		cfg.TLS = tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: ca.CAFile, ReloadEvery: -1}
	})
	c.Leader()
	ctx := ctxT(t, 90*time.Second)
	trust, _ := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	cl, err := client.New(client.Config{Servers: c.Addrs(), TLS: trust})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "rotate", 2, false); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		p := cl.NewProducer()
		acked := 0
		for {
			select {
			case <-stop:
				done <- acked
				return
			default:
			}
			if _, err := p.Send(ctx, "rotate", client.Message{Body: []byte(fmt.Sprintf("m%d", acked))}); err != nil {
				t.Errorf("send %d during rotation: %v", acked, err)
				done <- acked
				return
			}
			acked++
		}
	}()
	time.Sleep(300 * time.Millisecond)
	serials := map[string]string{}
	for i, s := range c.Nodes() {
		ca.Issue(t, c.Config(i).Raft.ID)
		if err := s.ReloadTLS(); err != nil {
			t.Fatalf("reload %s: %v", c.Config(i).Raft.ID, err)
		}
		serials[c.Config(i).Listen] = s.TLSCertificate().Leaf.SerialNumber.String()
		time.Sleep(100 * time.Millisecond)
	}
	// A restarted node dials and is dialed with the new certificates.
	f := (c.Leader() + 1) % 3
	c.Stop(f)
	c.Restart(f)
	serials[c.Config(f).Listen] = c.Node(f).TLSCertificate().Leaf.SerialNumber.String()
	waitFor(t, 20*time.Second, "the restarted node to catch up", func() bool {
		l := c.Node(c.Leader()).Node().Stats()
		return c.Node(f).Node().Stats().AppliedIndex >= l.CommitIndex
	})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	acked := <-done
	for addr, want := range serials {
		tc, err := tls.Dial("tcp", addr, trust)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		got := tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
		tc.Close()
		if got != want {
			t.Errorf("%s serves certificate %s after the reload, want %s", addr, got, want)
		}
	}
	recs, _ := consumeAll(t, cl, "rotate", true)
	if len(recs) != acked {
		t.Fatalf("consumed %d messages, %d were acknowledged", len(recs), acked)
	}
	t.Logf("%d messages acknowledged during the rotation, %d read back", acked, len(recs))
}
