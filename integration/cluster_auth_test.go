package integration

import (
	"encoding/json"
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
	writeFiles(t, map[string]string{keyFile: strings.Repeat("0123456789abcdef", 4), adminFile: "root-secret\n"})
	ns := startNamesrv(t)
	g := enforcingGroup(t, ns.Addr(), "ga", keyFile, adminFile)
	env := []string{"RAFTMQ_CONFIG=" + filepath.Join(dir, "contexts.json")}
	root := []string{"--access-key", "root", "--secret-key-file", adminFile}
	must := func(args ...string) string { t.Helper(); return g.mustCLIEnv(env, args...) }
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

// Users and grants are kept per group: user add, acl grant, user list and
// user remove through --namesrv (without --broker-name) run on every group
// in turn, so a user added once can then produce through the name server
// to a topic spread over both groups, and is gone from both once removed.
func TestUsersOnEveryGroupThroughTheNameServer(t *testing.T) {
	procRequire(t)
	dir := t.TempDir()
	keyFile, adminFile, u1File := filepath.Join(dir, "auth.key"), filepath.Join(dir, "admin.secret"), filepath.Join(dir, "u1.secret")
	writeFiles(t, map[string]string{keyFile: strings.Repeat("0123456789abcdef", 4), adminFile: "root-secret\n", u1File: "u1-secret\n"})
	ns := startNamesrv(t)
	ga := enforcingGroup(t, ns.Addr(), "ga", keyFile, adminFile)
	enforcingGroup(t, ns.Addr(), "gb", keyFile, adminFile)
	env := []string{"RAFTMQ_CONFIG=" + filepath.Join(dir, "contexts.json")}
	root := []string{"--access-key", "root", "--secret-key-file", adminFile}
	u1 := []string{"--access-key", "u1", "--secret-key-file", u1File}
	must := func(args ...string) string { t.Helper(); return ga.mustCLIEnv(env, args...) }
	with := func(cred []string, args ...string) []string {
		return append(append(args, "--namesrv", ns.Addr()), cred...)
	}
	must("cluster", "health", "--namesrv", ns.Addr(), "--wait", "60s", "--groups", "2")
	must(with(root, "topic", "create", "orders", "--queues", "2")...)

	out := must(with(root, "user", "add", "u1", "--secret-file", u1File)...)
	if strings.Count(out, "user u1 added") != 2 || !strings.Contains(out, "group ga:") || !strings.Contains(out, "group gb:") {
		t.Fatalf("user add --namesrv: %q, want u1 added on ga and gb", out)
	}
	must(with(root, "acl", "grant", "u1", "topic:orders", "publish")...)
	var byGroup map[string][]struct {
		Name   string `json:"name"`
		Grants []struct {
			Resource string `json:"resource"`
		} `json:"grants"`
	}
	if err := json.Unmarshal([]byte(must(with(root, "user", "list", "--json")...)), &byGroup); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"ga", "gb"} {
		found := false
		for _, u := range byGroup[g] {
			found = found || u.Name == "u1" && len(u.Grants) == 1 && u.Grants[0].Resource == "topic:orders"
		}
		if !found {
			t.Errorf("user list --json --namesrv: group %s lacks u1 with its grant: %+v", g, byGroup)
		}
	}
	// u1 produces through the name server: one message lands on each group.
	out = must(with(u1, "produce", "-t", "orders", "--format", "json", "m1", "m2")...)
	if !strings.Contains(out, `"group":"ga"`) || !strings.Contains(out, `"group":"gb"`) {
		t.Fatalf("u1's produce --namesrv: %s, want an ack from each group", out)
	}

	must(with(root, "user", "remove", "u1")...)
	if _, errOut, err := ga.cliEnv(env, "", with(u1, "produce", "-t", "orders", "--timeout", "5s", "m3")...); err == nil {
		t.Fatalf("u1 produced after its removal from every group: %s", errOut)
	}
}

// writeFiles writes each file with its content, readable by its owner only.
func writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for f, s := range files {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// startNamesrv starts an in-process name server, closed when t ends.
func startNamesrv(t *testing.T) *namesrv.Server {
	t.Helper()
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// enforcingGroup starts a one-node group named name, with --auth enforcing
// and root as its first admin, registered with the name server at ns.
func enforcingGroup(t *testing.T, ns, name, keyFile, adminFile string) *procCluster {
	t.Helper()
	return procStartGroup(t, localgroup.Config{Nodes: 1, ServerArgs: []string{"--broker-name", name, "--cluster", "c1", "--namesrv", ns,
		"--register-period", "1s", "--auth", "enforcing", "--auth-key-file", keyFile, "--auth-admin-user", "root", "--auth-admin-secret-file", adminFile}})
}
