package integration

// The compose group with TLS and authentication enforced
// (docker-compose.secure.yml over docker-compose.yml, `make up-secure`):
// certificates, the auth key and the admin secret are made at first start
// in a volume; clients need the CA and credentials; the demo runs against
// it.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestComposeSecure(t *testing.T) {
	c := composeUpFiles(t, "docker-compose.secure.yml")
	ca, secret := composeSecrets(t, c.composeRun)
	tlsArgs := []string{"--tls-ca", ca}
	admin := append([]string{"--access-key", "admin", "--secret-key-file", secret}, tlsArgs...)
	run := func(timeout time.Duration, args ...string) (string, string, error) {
		out, errOut, err := c.cliRun(timeout, nil, args...)
		return string(out), string(errOut), err
	}
	must := func(timeout time.Duration, args ...string) string {
		t.Helper()
		out, errOut, err := run(timeout, args...)
		if err != nil {
			t.Fatalf("raftmq %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	start := time.Now()
	must(3*time.Minute, append([]string{"health", "--all", "-s", c.addrs(), "--wait", "150s"}, tlsArgs...)...)
	t.Logf("healthy over TLS %v after compose up", time.Since(start).Round(time.Millisecond))

	// The secrets were made at first start: no admin secret is built in.
	if b, err := os.ReadFile(secret); err != nil || len(strings.TrimSpace(string(b))) < 16 {
		t.Fatalf("admin secret %q: %v", b, err)
	}
	if _, errOut, err := run(30*time.Second, "status", "-s", c.addrs(), "--timeout", "5s"); err == nil {
		t.Fatal("a plaintext client was served by the secure group")
	} else {
		t.Logf("plaintext status refused: %s", procCut(errOut, 300))
	}
	must(time.Minute, append([]string{"topic", "create", "secure-orders", "--queues", "2", "-s", c.addrs()}, admin...)...)
	if out, errOut, err := run(30*time.Second, append([]string{"produce", "-t", "secure-orders", "-s", c.addrs(), "--timeout", "5s", "x"}, tlsArgs...)...); err == nil {
		t.Fatalf("produce without credentials was taken: %s", out)
	} else if !strings.Contains(errOut, "credentials") {
		t.Errorf("produce without credentials: refused without saying why: %s", errOut)
	}
	must(time.Minute, append([]string{"produce", "-t", "secure-orders", "-s", c.addrs(), "m1", "m2"}, admin...)...)

	// The name server (its external listener, published) speaks TLS and
	// knows the admin from the nodes' registrations.
	ns := fmt.Sprintf("127.0.0.1:%d", c.namesrvPort)
	var routes string
	procWaitFor(t, time.Minute, "the name server routes the topic over TLS", func() (bool, string) {
		out, errOut, err := run(30*time.Second, append([]string{"namesrv", "routes", "--namesrv", ns, "--topic", "secure-orders"}, admin...)...)
		routes = out
		return err == nil && strings.Contains(out, "leader"), out + errOut
	})
	t.Logf("routes:\n%s", routes)
	if _, errOut, err := run(30*time.Second, append([]string{"namesrv", "routes", "--namesrv", ns}, tlsArgs...)...); err == nil || !strings.Contains(errOut, "code 16") {
		t.Fatalf("namesrv routes without credentials: %v %s", err, errOut)
	}

	// The demo against the secure group: one leader kill under load.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	demoStart := time.Now()
	out, errOut, err := composeExec(ctx, c.env, c.root, nil, c.cli, append([]string{"demo", "--docker", "--compose-file",
		filepath.Join(c.root, "docker-compose.yml") + "," + filepath.Join(c.root, "docker-compose.secure.yml"),
		"--kills", "1", "--reads", "0", "--json"}, admin...)...)
	if err != nil {
		t.Fatalf("demo --docker against the secure group: %v\n%s\n%s", err, composeTail(out, 3000), composeTail(errOut, 3000))
	}
	var res struct {
		OK         bool   `json:"ok"`
		Mode       string `json:"mode"`
		Lost       int    `json:"lost"`
		Duplicated int    `json:"duplicated"`
		Acked      int    `json:"acked"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("demo JSON: %v\n%s", err, composeTail(out, 2000))
	}
	if !res.OK || res.Mode != "docker" || res.Lost != 0 || res.Duplicated != 0 {
		t.Fatalf("demo: %s", out)
	}
	t.Logf("demo --docker over TLS as admin in %v: %s", time.Since(demoStart).Round(time.Second), procCut(string(out), 600))
}
