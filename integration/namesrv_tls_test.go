package integration

// The name server with --tls-mode enforcing, as a process, in front of a
// group with --tls-mode enforcing and --auth enforcing: the nodes register
// over TLS, the unmodified RocketMQ Go client with WithTls (which speaks
// TLS to the name server and the brokers alike) and credentials produces
// and consumes, a plaintext client gets nothing, and the CLI reads routes
// with the cluster CA.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/internal/tlsconf/tlstest"
)

func TestNamesrvTLSEnforcing(t *testing.T) {
	t.Cleanup(plaintextRocketMQ)
	procRequire(t)
	dir := t.TempDir()
	keyFile, adminFile := filepath.Join(dir, "auth.key"), filepath.Join(dir, "admin.secret")
	for f, s := range map[string]string{keyFile: strings.Repeat("0123456789abcdef", 4), adminFile: "root-secret\n"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca := tlstest.NewCA(t, "cluster")
	p := ca.Issue(t, "node") // the nodes and the name server: all on 127.0.0.1
	tlsArgs := []string{"--tls-mode", "enforcing", "--tls-cert", p.CertFile, "--tls-key", p.KeyFile, "--tls-ca", ca.CAFile}
	ns, _, _ := procNamesrv(t, append([]string{"--auth", "enforcing", "--auth-key-file", keyFile}, tlsArgs...)...)
	trust, err := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := procStartGroup(t, localgroup.Config{Nodes: 3, Remoting: true, ClientTLS: trust, ServerArgs: append([]string{"--namesrv", ns, "--register-period", "2s",
		"--auth", "enforcing", "--auth-key-file", keyFile, "--auth-admin-user", "root", "--auth-admin-secret-file", adminFile}, tlsArgs...)})
	root := []string{"--access-key", "root", "--secret-key-file", adminFile, "--tls-ca", ca.CAFile}
	c.mustCLI("", "health", "--all", "-s", c.addrs(), "--tls-ca", ca.CAFile, "--wait", "30s")
	const topic = "nstls-orders"
	c.mustCLI("", append([]string{"topic", "create", topic, "--queues", "4", "-s", c.addrs()}, root...)...)
	procWaitFor(t, 30*time.Second, "the nodes registered over TLS", func() (bool, string) {
		out, errOut, err := c.cli("", append([]string{"namesrv", "routes", "--namesrv", ns, "--topic", topic, "--json"}, root...)...)
		return err == nil && strings.Count(out, `"127.0.0.1:`) >= 3, out + errOut
	})
	// raftmq's CLI through the name server (client/cluster): TLS with the
	// CA, its cluster lookups signed.
	if out := c.mustCLI("", append([]string{"produce", "-t", topic, "--namesrv", ns, "--format", "json", "via-namesrv"}, root...)...); !strings.Contains(out, `"offset"`) {
		t.Fatalf("produce --namesrv over TLS: %s", out)
	}
	if _, errOut, err := c.cli("", "namesrv", "routes", "--namesrv", ns, "--access-key", "root", "--secret-key-file", adminFile, "--timeout", "3s"); err == nil {
		t.Fatalf("a plaintext namesrv routes was answered by an enforcing TLS name server: %s", errOut)
	}
	// The cluster view over TLS, signed: every group through its name
	// server; in plaintext nothing answers.
	c.mustCLI("", append([]string{"cluster", "health", "--namesrv", ns, "--groups", "1", "--wait", "30s"}, root...)...)
	if out := c.mustCLI("", append([]string{"cluster", "status", "--namesrv", ns, "--json"}, root...)...); !strings.Contains(out, `"healthy":true`) {
		t.Fatalf("cluster status over TLS: %s", out)
	}
	if out, errOut, err := c.cli("", "cluster", "status", "--namesrv", ns, "--access-key", "root", "--secret-key-file", adminFile, "--timeout", "3s"); err == nil {
		t.Fatalf("a plaintext cluster status was answered by an enforcing TLS name server: %s%s", out, errOut)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cred := primitive.Credentials{AccessKey: "root", SecretKey: "root-secret"}
	newProducer := func(group string, useTLS bool) interface {
		SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
		Shutdown() error
	} {
		pr, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns}), producer.WithGroupName(group), producer.WithInstanceName(group),
			producer.WithRetry(1), producer.WithSendMsgTimeout(5*time.Second), producer.WithCredentials(cred), producer.WithTls(useTLS))
		if err != nil {
			t.Fatal(err)
		}
		if err := pr.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pr.Shutdown() })
		return pr
	}
	good := newProducer("nstls-pg", true)
	sent := map[string]bool{}
	procWaitFor(t, 30*time.Second, "a send over TLS", func() (bool, string) {
		if _, err := good.SendSync(ctx, primitive.NewMessage(topic, []byte("first"))); err != nil {
			return false, err.Error()
		}
		sent["first"] = true
		return true, ""
	})
	for i := range 10 {
		b := fmt.Sprint("m", i)
		if _, err := good.SendSync(ctx, primitive.NewMessage(topic, []byte(b))); err != nil {
			t.Fatalf("send %d over TLS: %v", i, err)
		}
		sent[b] = true
	}
	plain := newProducer("nstls-pg-plain", false)
	if _, err := plain.SendSync(ctx, primitive.NewMessage(topic, []byte("plain"))); err == nil {
		t.Fatal("a plaintext RocketMQ client sent through an enforcing TLS name server")
	}

	got := make(chan string, 100)
	pc, err := consumer.NewPushConsumer(consumer.WithNameServer([]string{ns}), consumer.WithGroupName("nstls-cg"), consumer.WithInstance("nstls-cg"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithCredentials(cred), consumer.WithTls(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got <- string(m.Body)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	seen := map[string]bool{}
	deadline := time.After(60 * time.Second)
	for len(seen) < len(sent) {
		select {
		case b := <-got:
			if sent[b] {
				seen[b] = true
			}
		case <-deadline:
			t.Fatalf("consumed over TLS %d of %d: %v", len(seen), len(sent), seen)
		}
	}
}

// plaintextRocketMQ leaves the RocketMQ Go client plaintext for the tests
// that follow: its WithTls sets a default that every client of the
// process shares (its client options all point at one remoting config).
// A producer is made, and never started, only to apply WithTls(false).
func plaintextRocketMQ() {
	producer.NewDefaultProducer(producer.WithNameServer([]string{"127.0.0.1:1"}), producer.WithInstanceName("tls-reset"), producer.WithTls(false))
}
