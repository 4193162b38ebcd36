package integration

// raftmq's own API with --auth enforcing, against a real 3-process group:
// the CLI with a user's credentials (flags, environment, or the current
// context) produces and consumes; without them or with a wrong secret it
// is refused; a user without admin cannot remove a member, transfer
// leadership or reset a group; a grant made through one node takes effect
// on every node; repeated bad signatures from one address are throttled
// and counted in /metrics.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// mustCLIEnv is cliEnv without stdin, failing the test when the command
// fails.
func (c *procCluster) mustCLIEnv(env []string, args ...string) string {
	c.t.Helper()
	out, errOut, err := c.cliEnv(env, "", args...)
	if err != nil {
		c.t.Fatalf("raftmq %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func TestAPIAuthProcessEnforcing(t *testing.T) {
	dir := t.TempDir()
	keyFile, adminFile, u1File, wrongFile := filepath.Join(dir, "auth.key"), filepath.Join(dir, "admin.secret"),
		filepath.Join(dir, "u1.secret"), filepath.Join(dir, "wrong.secret")
	for f, s := range map[string]string{keyFile: strings.Repeat("0123456789abcdef", 4), adminFile: "root-secret\n", u1File: "u1-secret\n", wrongFile: "not-it"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := procStartCluster(t, 3, "--auth", "enforcing", "--auth-key-file", keyFile, "--auth-admin-user", "root", "--auth-admin-secret-file", adminFile)
	s := c.addrs()
	cfgFile := filepath.Join(dir, "contexts.json")
	noContext := []string{"RAFTMQ_CONFIG=" + cfgFile}
	run := func(env []string, args ...string) (string, string, error) {
		return c.cliEnv(append(append([]string{}, noContext...), env...), "", args...)
	}
	must := func(env []string, args ...string) string {
		t.Helper()
		out, errOut, err := run(env, args...)
		if err != nil {
			t.Fatalf("raftmq %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	refused := func(what, want string, env []string, args ...string) {
		t.Helper()
		out, errOut, err := run(env, args...)
		if err == nil || !strings.Contains(errOut, want) {
			t.Errorf("%s: %v, stderr %q (stdout %q), want a refusal saying %q", what, err, errOut, procCut(out, 300), want)
		}
	}
	root := []string{"--access-key", "root", "--secret-key-file", adminFile}
	u1 := []string{"--access-key", "u1", "--secret-key-file", u1File}
	args := func(a []string, more ...string) []string { return append(append([]string{}, a...), more...) }

	must(nil, args([]string{"topic", "create", "orders", "--queues", "2", "-s", s}, root...)...)
	must(nil, args([]string{"user", "add", "u1", "--secret-file", u1File, "-s", s}, root...)...)

	// Each node checks a call where it arrives, against its own copy of
	// the users: a produce sent straight to a node (no leader discovery,
	// which the CLI does first) shows that node's view.
	u1Creds := client.Credentials{AccessKey: "u1", SecretKey: []byte("u1-secret")}
	rawProduce := func(nd *procNode, body string) error {
		cc, err := api.Dial(nd.Client, grpc.WithPerRPCCredentials(u1Creds.PerRPCCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = api.NewBrokerClient(cc).Produce(ctx, &api.ProduceRequest{Topic: "orders", Messages: []*api.ProduceMessage{{Body: []byte(body)}}})
		return err
	}
	// Before any grant u1 is refused on every node, saying what.
	for _, nd := range c.all() {
		procWaitFor(t, 20*time.Second, nd.ID+" knows u1", func() (bool, string) {
			err := rawProduce(nd, "x")
			return status.Code(err) == codes.PermissionDenied && strings.Contains(err.Error(), "user u1 may not publish to topic orders"), fmt.Sprint(err)
		})
	}
	_, errOut, err := run(nil, args([]string{"produce", "-t", "orders", "-s", s, "x"}, u1...)...)
	if err == nil || !strings.Contains(errOut, "user u1 may not publish to topic orders") {
		t.Fatalf("CLI produce before the grant: %v %s", err, errOut)
	}
	// A grant made through one node takes effect on every node.
	must(nil, args([]string{"acl", "grant", "u1", "topic:orders", "publish,subscribe", "-s", c.all()[0].Client}, root...)...)
	must(nil, args([]string{"acl", "grant", "u1", "group:cg", "subscribe", "-s", c.all()[0].Client}, root...)...)
	for _, nd := range c.all() {
		procWaitFor(t, 20*time.Second, nd.ID+" applies the grant", func() (bool, string) {
			err := rawProduce(nd, "raw-"+nd.ID)
			return err == nil, fmt.Sprint(err)
		})
		must(nil, args([]string{"produce", "-t", "orders", "-s", nd.Client, "from-" + nd.ID}, u1...)...)
	}
	// Credentials from the environment: the secret itself, or its file.
	must([]string{"RAFTMQ_ACCESS_KEY=u1", "RAFTMQ_SECRET_KEY=u1-secret"}, "produce", "-t", "orders", "-s", s, "env-secret")
	must([]string{"RAFTMQ_ACCESS_KEY=u1", "RAFTMQ_SECRET_KEY_FILE=" + u1File}, "produce", "-t", "orders", "-s", s, "env-file")
	// And from the current context.
	must(nil, "context", "add", "g", "-s", s, "--access-key", "u1", "--secret-key-file", u1File, "--use")
	must(nil, "produce", "-t", "orders", "context")
	out := must(nil, "consume", "-t", "orders", "-g", "cg", "-n", "9", "--timeout", "20s")
	for _, b := range []string{"raw-n1", "raw-n2", "raw-n3", "from-n1", "from-n2", "from-n3", "env-secret", "env-file", "context"} {
		if !strings.Contains(out, b) {
			t.Errorf("consume with the context's credentials: %q missing from\n%s", b, out)
		}
	}
	must(nil, "context", "remove", "g")
	// A revoke made through another node applies on every node too.
	must(nil, args([]string{"acl", "revoke", "u1", "topic:orders", "publish", "-s", c.all()[2].Client}, root...)...)
	for _, nd := range c.all() {
		procWaitFor(t, 20*time.Second, nd.ID+" applies the revoke", func() (bool, string) {
			err := rawProduce(nd, "after-revoke")
			return status.Code(err) == codes.PermissionDenied && strings.Contains(err.Error(), "user u1 may not publish to topic orders"), fmt.Sprint(err)
		})
	}

	refused("no credentials", "without credentials", nil, "produce", "-t", "orders", "-s", s, "anon")
	refused("wrong secret", "access key u1: unknown, or the signature does not verify", nil,
		"produce", "-t", "orders", "-s", s, "--access-key", "u1", "--secret-key-file", wrongFile, "bad")
	refused("a read without the grant", "user u1 may not subscribe to group other", nil,
		args([]string{"consume", "-t", "orders", "-g", "other", "-n", "1", "--timeout", "10s", "-s", s}, u1...)...)

	// Admin operations need admin.
	leader, _ := c.leaderNow()
	if leader == nil {
		t.Fatal("no leader")
	}
	var follower string
	for _, nd := range c.all() {
		if nd.ID != leader.ID {
			follower = nd.ID
		}
	}
	refused("member remove", "user u1 may not administer the cluster", nil, args([]string{"member", "remove", follower, "-s", s}, u1...)...)
	refused("leader transfer", "user u1 may not administer the cluster", nil, args([]string{"leader", "transfer", "-s", s}, u1...)...)
	refused("group reset", "user u1 may not administer group cg", nil, args([]string{"group", "reset", "cg", "-t", "orders", "--to", "earliest", "-s", s}, u1...)...)
	refused("user list", "user u1 may not administer the cluster", nil, args([]string{"user", "list", "-s", s}, u1...)...)
	if st, err := procStatusOf(leader.Client, 5*time.Second); err != nil || len(st.Nodes) != 3 {
		t.Fatalf("after refused admin calls: %v %v", st, err)
	}
	// An admin may (and nodes keep talking to each other: the new leader
	// is elected and reported by every node).
	must(nil, args([]string{"leader", "transfer", "--to", follower, "-s", s}, root...)...)
	c.waitLeader(leader.ID)

	// Repeated bad signatures from one address are throttled: after the
	// allowance the node answers without checking, and /metrics counts it.
	cfg := client.DefaultConfig()
	cfg.Servers = []string{c.addrs()}
	cfg.Credentials = &client.Credentials{AccessKey: "u1", SecretKey: []byte("guess")}
	guesser, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer guesser.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last error
	for i := range 15 {
		_, last = guesser.ListTopics(ctx)
		if status.Code(last) != codes.Unauthenticated {
			t.Fatalf("guess %d: %v", i, last)
		}
	}
	if !strings.Contains(status.Convert(last).Message(), "too many bad signatures from 127.0.0.1") {
		t.Errorf("15th guess: %v, want throttled", last)
	}
	// The client sends its calls to the leader: count over every node.
	sum := func(name string, parts ...string) float64 {
		var n float64
		for _, nd := range c.all() {
			n += rmqMetric(t, nd.HTTP, name, parts...)
		}
		return n
	}
	if n := sum("raftmq_auth_refusals_total", `reason="throttled"`, `mode="enforcing"`); n < 1 {
		t.Errorf("throttled refusals: %v", n)
	}
	if n := sum("raftmq_auth_throttled_addresses"); n != 1 {
		t.Errorf("throttled addresses: %v, want 1", n)
	}
	if n := sum("raftmq_auth_refusals_total", `reason="bad_signature"`, `mode="enforcing"`); n < 10 {
		t.Errorf("bad signatures: %v, want at least 10", n)
	}
}

// TestAPIAuthProcessRollingMove: a group moves from --auth disabled to
// permissive to enforcing, one node at a time, while SDK producers with
// credentials send: no send is refused or lost, nodes forward to each
// other in every mixture of modes, permissive serves and counts a call
// without credentials, and enforcing refuses it on every node.
func TestAPIAuthProcessRollingMove(t *testing.T) {
	dir := t.TempDir()
	keyFile, adminFile, u1File := filepath.Join(dir, "auth.key"), filepath.Join(dir, "admin.secret"), filepath.Join(dir, "u1.secret")
	for f, s := range map[string]string{keyFile: strings.Repeat("fedcba9876543210", 4), adminFile: "root-secret", u1File: "u1-secret"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := procStartCluster(t, 3, "--auth", "disabled", "--auth-key-file", keyFile, "--auth-admin-user", "root", "--auth-admin-secret-file", adminFile)
	s := c.addrs()
	root := []string{"--access-key", "root", "--secret-key-file", adminFile}
	const topic = "roll-api"
	c.mustCLI("", append([]string{"topic", "create", topic, "--queues", "4", "-s", s}, root...)...)
	c.mustCLI("", append([]string{"user", "add", "u1", "--secret-file", u1File, "-s", s}, root...)...)
	c.mustCLI("", append([]string{"acl", "grant", "u1", "topic:" + topic, "publish,subscribe", "-s", s}, root...)...)

	creds := &client.Credentials{AccessKey: "u1", SecretKey: []byte("u1-secret")}
	cfg := client.DefaultConfig()
	cfg.Servers = []string{s}
	cfg.Credentials = creds
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	load := procStartLoad(t, cl, topic, "m", 2, 20*time.Millisecond, 1_000_000)
	load.waitAcks(20, 30*time.Second)
	unsigned := func(nd *procNode) error {
		_, errOut, err := c.cli("", "produce", "-t", topic, "-s", nd.Client, "unsigned")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		return nil
	}
	for _, mode := range []string{"permissive", "enforcing"} {
		c.restartEachWith("--auth", mode, func(*procNode) { load.waitAcks(10, 30*time.Second) })
		for _, nd := range c.all() {
			err := unsigned(nd)
			switch mode {
			case "permissive":
				if err != nil {
					t.Fatalf("%s permissive: unsigned produce refused: %v", nd.ID, err)
				}
			case "enforcing":
				if err == nil || !strings.Contains(err.Error(), "without credentials") {
					t.Fatalf("%s enforcing: unsigned produce: %v", nd.ID, err)
				}
			}
		}
		if mode == "permissive" {
			var n float64
			for _, nd := range c.all() {
				n += rmqMetric(t, nd.HTTP, "raftmq_auth_refusals_total", `mode="permissive"`, `reason="no_credentials"`)
			}
			if n < 3 {
				t.Errorf("permissive nodes counted %v calls without credentials, want at least 3", n)
			}
		}
	}
	load.waitAcks(20, 30*time.Second)
	load.stop()
	load.checkNoFailures()
	c.dial = []grpc.DialOption{grpc.WithPerRPCCredentials(creds.PerRPCCredentials())}
	// The unsigned sends of the permissive phase are in the log too: they
	// are not the producers', so verify the producers' messages by body.
	n := len(load.acked())
	stored := map[string]bool{}
	for _, nd := range c.all() {
		ti, err := cl.DescribeTopic(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		end := map[int32]uint64{}
		for _, q := range ti.QueueInfo {
			end[q.Queue] = q.MaxOffset
		}
		log := procReadNode(t, nd, topic, end, c.dial...)
		for _, es := range log {
			for _, e := range es {
				stored[nd.ID+"/"+string(e.Body)] = true
			}
		}
	}
	var lost []string
	for _, a := range load.acked() {
		for _, nd := range c.all() {
			if !stored[nd.ID+"/"+a.Body] {
				lost = append(lost, nd.ID+"/"+a.Body)
			}
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d acknowledged messages missing from nodes' logs, e.g. %v", len(lost), lost[0])
	}
	t.Logf("%d acknowledged sends through the move, every one on every node", n)
}
