package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
)

// A group with --auth enforcing behind a name server (and without a
// RocketMQ port): the CLI through --namesrv signs its calls with
// --access-key as it does with -s, for the whole cluster (topic create,
// produce, consume) and for one group (status --broker-name); without
// credentials it is refused.
func TestClusterThroughTheNameServerWithAuth(t *testing.T) {
	procRequire(t)
	dir := t.TempDir()
	keyFile, adminFile := filepath.Join(dir, "auth.key"), filepath.Join(dir, "admin.secret")
	for f, s := range map[string]string{keyFile: strings.Repeat("0123456789abcdef", 4), adminFile: "root-secret\n"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	g := procStartGroup(t, localgroup.Config{Nodes: 1, ServerArgs: []string{"--broker-name", "ga", "--cluster", "c1", "--namesrv", ns.Addr(),
		"--register-period", "1s", "--auth", "enforcing", "--auth-key-file", keyFile, "--auth-admin-user", "root", "--auth-admin-secret-file", adminFile}})
	env := []string{"RAFTMQ_CONFIG=" + filepath.Join(dir, "contexts.json")}
	root := []string{"--access-key", "root", "--secret-key-file", adminFile}
	must := func(args ...string) string {
		t.Helper()
		out, errOut, err := g.cliEnv(env, "", args...)
		if err != nil {
			t.Fatalf("raftmq %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	must("cluster", "health", "--namesrv", ns.Addr(), "--wait", "60s", "--groups", "1")
	must(append([]string{"topic", "create", "orders", "--queues", "2", "--namesrv", ns.Addr()}, root...)...)
	if _, errOut, err := g.cliEnv(env, "", "produce", "-t", "orders", "--namesrv", ns.Addr(), "--timeout", "5s", "x"); err == nil {
		t.Fatalf("produce --namesrv without credentials to an enforcing group was taken: %s", errOut)
	}
	out := must(append([]string{"produce", "-t", "orders", "--namesrv", ns.Addr(), "--format", "json", "m1", "m2"}, root...)...)
	if n := strings.Count(out, `"group":"ga"`); n != 2 {
		t.Fatalf("produce --namesrv with credentials: %d acks from ga:\n%s", n, out)
	}
	out = must(append([]string{"consume", "-t", "orders", "--namesrv", ns.Addr(), "--group", "cg", "--format", "json"}, root...)...)
	if !strings.Contains(out, `"m1"`) || !strings.Contains(out, `"m2"`) {
		t.Fatalf("consume --namesrv with credentials:\n%s", out)
	}
	if out := must(append([]string{"status", "--namesrv", ns.Addr(), "--broker-name", "ga"}, root...)...); !strings.Contains(out, "group ga") {
		t.Fatalf("status --namesrv --broker-name ga: %s", out)
	}
}
