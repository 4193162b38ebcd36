package server_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/internal/tlsconf/tlstest"
	"github.com/raftmq/raftmq/store"
)

// TestAPIAuthEnforcing: a group with --auth enforcing serves SDK calls
// signed by a user within the user's grants, on any node (a follower
// forwards with the node credential); it refuses calls without
// credentials, with a wrong secret, and beyond the grants, saying what was
// refused; node-to-node calls keep every node healthy.
func TestAPIAuthEnforcing(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.Auth = server.AuthConfig{Mode: acl.Enforcing, Key: key, AdminUser: "root", AdminSecret: []byte("root-secret")}
	})
	l := c.Leader()
	fo := (l + 1) % 3
	ctx := ctxT(t, 60*time.Second)
	as := func(ak, secret string, node int) *client.Client {
		return signedClient(t, c.Config(node).Listen, nil, ak, secret)
	}
	root := as("root", "root-secret", fo)
	waitFor(t, 10*time.Second, "the first admin", func() bool { _, ok := c.Node(fo).Store().User("root"); return ok })
	for _, call := range []api.UsersCall{
		{Op: api.UsersAdd, User: "u1", Secret: "u1-secret"},
		{Op: api.UsersGrant, User: "u1", Resource: "topic:orders", Actions: "publish,subscribe"},
	} {
		if _, err := root.Users(ctx, call); err != nil {
			t.Fatalf("admin %+v on a follower: %v", call, err)
		}
	}
	if _, err := root.CreateTopic(ctx, "orders", 2, false); err != nil {
		t.Fatalf("admin creates a topic: %v", err)
	}
	if _, err := root.CreateTopic(ctx, "payments", 2, false); err != nil {
		t.Fatalf("admin creates a topic: %v", err)
	}
	u1 := as("u1", "u1-secret", fo)
	waitFor(t, 10*time.Second, "u1 on the follower", func() bool { _, ok := c.Node(fo).Store().User("u1"); return ok })
	if _, err := u1.NewProducer().Send(ctx, "orders", client.Message{Body: []byte("hi")}); err != nil {
		t.Fatalf("u1 produces to orders through a follower: %v", err)
	}
	refused := func(what string, err error, code codes.Code, msg string) {
		t.Helper()
		if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
			t.Errorf("%s: %v, want %s %q", what, err, code, msg)
		}
	}
	_, err := u1.NewProducer().Send(ctx, "payments", client.Message{Body: []byte("hi")})
	refused("u1 produces to payments", err, codes.PermissionDenied, "user u1 may not publish to topic payments")
	refused("u1 removes a member", u1.RemoveMember(ctx, c.Config(l).Raft.ID, false), codes.PermissionDenied, "user u1 may not administer the cluster")
	_, err = u1.TransferLeader(ctx, "")
	refused("u1 transfers leadership", err, codes.PermissionDenied, "administer the cluster")
	_, err = u1.ResetGroup(ctx, &api.ResetGroupRequest{Group: "cg", Topic: "orders", To: "earliest"})
	refused("u1 resets a group", err, codes.PermissionDenied, "user u1 may not administer group cg")
	_, err = u1.Users(ctx, api.UsersCall{Op: api.UsersList})
	refused("u1 lists users", err, codes.PermissionDenied, "administer the cluster")
	_, err = as("", "", fo).ListTopics(ctx)
	refused("no credentials", err, codes.Unauthenticated, "without credentials")
	_, err = as("u1", "wrong", l).ListTopics(ctx)
	refused("wrong secret", err, codes.Unauthenticated, "access key u1: unknown, or the signature does not verify")
	// Node-to-node calls (state polling) pass: every node sees every other
	// as healthy.
	waitFor(t, 10*time.Second, "every node healthy", func() bool {
		st, err := root.StatusOf(ctx, c.Config(fo).Listen)
		if err != nil || len(st.Nodes) != 3 {
			return false
		}
		for _, n := range st.Nodes {
			if !n.Healthy {
				return false
			}
		}
		return true
	})
	if got := testutilCount(c.Node(l).Authorizer().Refusals(acl.Enforcing, auth.ReasonNotNode)); got != 0 {
		t.Errorf("node-to-node calls refused on the leader: %v", got)
	}
}

func testutilCount(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestAPIAuthWithTLS: with --tls-mode enforcing and --auth enforcing, an
// admin manages users with its credential and no client certificate, a
// user without admin is refused, and calls through a follower (forwarded
// over node-to-node TLS, signed with the node credential) work.
func TestAPIAuthWithTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	key := bytes.Repeat([]byte("k"), 32)
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		p := ca.Issue(t, cfg.Raft.ID)
		cfg.TLS = tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: ca.CAFile}
		cfg.Auth = server.AuthConfig{Mode: acl.Enforcing, Key: key, AdminUser: "root", AdminSecret: []byte("root-secret")}
	})
	l := c.Leader()
	fo := (l + 1) % 3
	trust, err := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 60*time.Second)
	as := func(ak, secret string) *client.Client { return signedClient(t, c.Config(fo).Listen, trust, ak, secret) }
	root := as("root", "root-secret")
	waitFor(t, 10*time.Second, "the first admin", func() bool { _, ok := c.Node(fo).Store().User("root"); return ok })
	if _, err := root.Users(ctx, api.UsersCall{Op: api.UsersAdd, User: "u1", Secret: "u1-secret"}); err != nil {
		t.Fatalf("admin without a client certificate adds a user: %v", err)
	}
	if _, err := root.Users(ctx, api.UsersCall{Op: api.UsersGrant, User: "u1", Resource: "topic:*", Actions: "publish"}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.CreateTopic(ctx, "secure", 2, false); err != nil {
		t.Fatal(err)
	}
	u1 := as("u1", "u1-secret")
	waitFor(t, 10*time.Second, "u1 on the follower", func() bool { _, ok := c.Node(fo).Store().User("u1"); return ok })
	if _, err := u1.NewProducer().Send(ctx, "secure", client.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("u1 produces through a follower over TLS: %v", err)
	}
	if _, err := u1.Users(ctx, api.UsersCall{Op: api.UsersList}); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "user u1 may not administer the cluster") {
		t.Fatalf("u1 lists users: %v", err)
	}
}

// TestAPIAuthPermissive: permissive serves calls without credentials and
// counts what enforcing would refuse; a node's forwarded calls are not
// among them.
func TestAPIAuthPermissive(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.Auth = server.AuthConfig{Mode: acl.Permissive, Key: key}
	})
	l := c.Leader()
	fo := (l + 1) % 3
	cl, err := client.New(client.Config{Servers: []string{c.Config(fo).Listen}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 30*time.Second)
	if _, err := cl.CreateTopic(ctx, "open", 2, false); err != nil {
		t.Fatalf("permissive refused: %v", err)
	}
	if _, err := cl.NewProducer().Send(ctx, "open", client.Message{Body: []byte("x")}); err != nil {
		t.Fatalf("permissive refused: %v", err)
	}
	// The client calls the leader directly once it knows it, or the
	// follower forwards: either way only the node the client reached
	// counts, and the leader never counts a forwarded call.
	var counted float64
	for _, n := range c.Nodes() {
		counted += testutilCount(n.Authorizer().Refusals(acl.Permissive, auth.ReasonNoCredentials))
	}
	if counted < 2 {
		t.Errorf("permissive counted %v calls without credentials, want at least 2", counted)
	}
	for _, n := range c.Nodes() {
		if got := testutilCount(n.Authorizer().Refusals(acl.Permissive, auth.ReasonNotNode)) + testutilCount(n.Authorizer().Refusals(acl.Permissive, auth.ReasonBadSignature)); got != 0 {
			t.Errorf("node-to-node calls counted as refusals: %v", got)
		}
	}
}

// TestUsersNeedACertificateUnlessAuthEnforcing: with --tls-mode enforcing
// and authentication not enforced, user management still needs a client
// certificate of the cluster CA, even with an admin's credential (a
// permissive node serves every call, so the credential decides nothing).
func TestUsersNeedACertificateUnlessAuthEnforcing(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster")
	c := newCluster(t, 1, func(i int, cfg *server.Config) {
		p := ca.Issue(t, cfg.Raft.ID)
		cfg.TLS = tlsconf.Config{Mode: tlsconf.Enforcing, CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: ca.CAFile}
		cfg.Auth = server.AuthConfig{Mode: acl.Permissive, Key: bytes.Repeat([]byte("k"), 32), AdminUser: "root", AdminSecret: []byte("root-secret")}
	})
	c.Leader()
	trust, err := tlsconf.ClientFiles(ca.CAFile, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Config{Servers: c.Addrs(), TLS: trust, RetryTimeout: 10 * time.Second,
		Credentials: &client.Credentials{AccessKey: "root", SecretKey: []byte("root-secret")}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.Users(ctxT(t, 20*time.Second), api.UsersCall{Op: api.UsersList})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "needs a client certificate signed by the cluster CA") {
		t.Fatalf("users without a certificate, auth permissive: %v", err)
	}
}

// TestAPIAuthProduceStreamFollowsTheUser: a producer's stream, opened with
// the user's credential, is checked call by call against the user as it
// is now: a revoked grant refuses the next send on the same stream, a new
// secret refuses it as Unauthenticated (and a client with the old secret
// cannot open another), and a client with the new secret sends again.
func TestAPIAuthProduceStreamFollowsTheUser(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.Auth = server.AuthConfig{Mode: acl.Enforcing, Key: key, AdminUser: "root", AdminSecret: []byte("root-secret")}
	})
	fo := (c.Leader() + 1) % 3
	ctx := ctxT(t, 60*time.Second)
	// Through the follower, which checks each call, then forwards it.
	as := func(ak, secret string) *client.Client { return signedClient(t, c.Config(fo).Listen, nil, ak, secret) }
	root := as("root", "root-secret")
	waitFor(t, 10*time.Second, "the first admin", func() bool { _, ok := c.Node(fo).Store().User("root"); return ok })
	admin := func(call api.UsersCall, applied func(u store.User, ok bool) bool) {
		t.Helper()
		if _, err := root.Users(ctx, call); err != nil {
			t.Fatalf("admin %+v: %v", call, err)
		}
		waitFor(t, 10*time.Second, fmt.Sprintf("%s of u1 on the follower", call.Op), func() bool { return applied(c.Node(fo).Store().User("u1")) })
	}
	canPublish := func(u store.User) bool {
		return auth.Allowed(u.Grants, auth.Need{Action: auth.Publish, Resource: auth.Topic("orders")})
	}
	admin(api.UsersCall{Op: api.UsersAdd, User: "u1", Secret: "first-secret"}, func(_ store.User, ok bool) bool { return ok })
	admin(api.UsersCall{Op: api.UsersGrant, User: "u1", Resource: "topic:orders", Actions: "publish"}, func(u store.User, _ bool) bool { return canPublish(u) })
	if _, err := root.CreateTopic(ctx, "orders", 2, false); err != nil {
		t.Fatal(err)
	}
	p := as("u1", "first-secret").NewProducer()
	send := func() error {
		_, err := p.Send(ctx, "orders", client.Message{Body: []byte("m")})
		return err
	}
	if err := send(); err != nil {
		t.Fatalf("u1 sends with its grant: %v", err)
	}
	admin(api.UsersCall{Op: api.UsersRevoke, User: "u1", Resource: "topic:orders", Actions: "publish"}, func(u store.User, _ bool) bool { return !canPublish(u) })
	if err := send(); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "user u1 may not publish to topic orders") {
		t.Fatalf("send after the grant was revoked: %v, want PermissionDenied", err)
	}
	admin(api.UsersCall{Op: api.UsersGrant, User: "u1", Resource: "topic:orders", Actions: "publish"}, func(u store.User, _ bool) bool { return canPublish(u) })
	if err := send(); err != nil {
		t.Fatalf("send after the grant was given back: %v", err)
	}
	before, _ := c.Node(fo).Store().User("u1")
	admin(api.UsersCall{Op: api.UsersPasswd, User: "u1", Secret: "second-secret"}, func(u store.User, _ bool) bool { return !bytes.Equal(u.Secret, before.Secret) })
	if err := send(); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "given a new secret after this stream opened") {
		t.Fatalf("send on the stream after the secret changed: %v, want Unauthenticated", err)
	}
	if err := send(); status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "signature does not verify") {
		t.Fatalf("send with the old secret: %v, want Unauthenticated", err)
	}
	if _, err := as("u1", "second-secret").NewProducer().Send(ctx, "orders", client.Message{Body: []byte("m")}); err != nil {
		t.Fatalf("send with the new secret: %v", err)
	}
}

// signedClient is a client of the node at addr that signs its calls as ak
// (unsigned when ak is empty), over TLS when trust is set, retrying for
// 10 s; it is closed when t ends.
func signedClient(t *testing.T, addr string, trust *tls.Config, ak, secret string) *client.Client {
	t.Helper()
	cfg := client.Config{Servers: []string{addr}, TLS: trust, RetryTimeout: 10 * time.Second}
	if ak != "" {
		cfg.Credentials = &client.Credentials{AccessKey: ak, SecretKey: []byte(secret)}
	}
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
