package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/internal/tlsconf/tlstest"
)

// TestTLSProcessEnforcing: three `raftmq server --tls-mode enforcing`
// processes serve the CLI and the SDK given the cluster CA, refuse the
// CLI without it, keep running through a SIGHUP (certificate reload), and
// a fourth process whose certificate another CA signed cannot join: member
// add fails, it receives no entry, the group keeps working.
func TestTLSProcessEnforcing(t *testing.T) {
	procRequire(t)
	ca, rogue := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
	p := ca.Issue(t, "node") // one certificate for every node: all on 127.0.0.1
	trust, err := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := procStartGroup(t, localgroup.Config{Nodes: 3, ClientTLS: trust,
		ServerArgs: []string{"--tls-mode", "enforcing", "--tls-cert", p.CertFile, "--tls-key", p.KeyFile, "--tls-ca", ca.CAFile}})
	addrs := c.addrs()
	c.mustCLI("", "topic", "create", "secure", "--queues", "2", "-s", addrs, "--tls-ca", ca.CAFile)
	if out := c.mustCLI("", "topic", "list", "-s", addrs, "--tls-ca", ca.CAFile); !strings.Contains(out, "secure") {
		t.Fatalf("topic list over TLS: %s", out)
	}
	if _, errOut, err := c.cli("", "topic", "list", "-s", addrs, "--timeout", "5s"); err == nil {
		t.Fatal("a plaintext CLI was served by an enforcing group")
	} else if !strings.Contains(errOut, "TLS") {
		t.Errorf("a plaintext CLI was refused without a word on TLS: %s", errOut)
	}

	cl, err := client.New(client.Config{Servers: strings.Split(addrs, ","), TLS: trust})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := cl.NewProducer()
	send := func(n int, what string) {
		t.Helper()
		for i := range n {
			if _, err := prod.Send(ctx, "secure", client.Message{Body: []byte(fmt.Sprintf("%s-%d", what, i))}); err != nil {
				t.Fatalf("send %s %d: %v", what, i, err)
			}
		}
	}
	send(20, "before")

	// SIGHUP reloads the certificate; it must not stop the node.
	ca.Issue(t, "node")
	c.signal("n1", syscall.SIGHUP)
	procWaitFor(t, 10*time.Second, "n1 to log the reload", func() (bool, string) {
		return strings.Contains(c.node("n1").LogTail(200), "tls certificate reloaded"), "not yet"
	})
	send(10, "after-reload")
	if !c.node("n1").Running() {
		t.Fatal("n1 exited on SIGHUP")
	}

	// A node with another CA's certificate.
	n4 := c.addNode("n4")
	rp := rogue.Issue(t, "n4")
	c.g.SetServerArgs([]string{"--tls-mode", "enforcing", "--tls-cert", rp.CertFile, "--tls-key", rp.KeyFile, "--tls-ca", rogue.CAFile})
	if err := c.g.Launch("n4"); err != nil {
		t.Fatal(err)
	}
	rtrust, _ := tlsconf.ClientFiles(rogue.CAFile, "", "", "")
	rcl, err := client.New(client.Config{Servers: []string{n4.Client}, TLS: rtrust, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	procWaitFor(t, procStartTimeout, "n4 to answer", func() (bool, string) {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		_, err := rcl.StatusOf(sctx, n4.Client)
		return err == nil, fmt.Sprint(err)
	})
	out, errOut, err := c.cli("", "member", "add", "n4@"+n4.Raft, "-s", addrs, "--tls-ca", ca.CAFile, "--timeout", "15s")
	if err == nil {
		t.Fatalf("member add of a node with another CA's certificate succeeded: %s", out)
	}
	t.Logf("member add of the rogue node: %s", strings.TrimSpace(errOut))
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	st, err := rcl.StatusOf(sctx, n4.Client)
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	if self := procSelf(st); self != nil && self.AppliedIndex != 0 {
		t.Fatalf("the rogue node applied index %d: it must receive nothing", self.AppliedIndex)
	}
	send(10, "after-rogue")
	recs := 0
	cons, err := cl.NewConsumer(client.DefaultConsumerConfig("secure", "tls-check"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	for recs < 40 && ctx.Err() == nil {
		r, err := cons.Poll(ctx)
		if err != nil && !client.Retryable(err) {
			t.Fatalf("poll: %v", err)
		}
		recs += len(r)
	}
	if recs != 40 {
		t.Fatalf("consumed %d messages over TLS, want 40", recs)
	}
}
