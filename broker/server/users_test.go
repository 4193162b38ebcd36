package server_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
)

// TestUsersThroughTheAPI: the Users service, called on a follower, changes
// the replicated table on every node; secrets are stored sealed (they open
// with the group's key, and the plain secret appears nowhere in the
// table); errors map to their gRPC codes; list never carries secrets.
func TestUsersThroughTheAPI(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	c := newCluster(t, 3, func(i int, cfg *server.Config) { cfg.Auth = server.AuthConfig{Key: key} })
	l := c.Leader()
	fo := (l + 1) % 3
	cl, err := client.New(client.Config{Servers: []string{c.Config(fo).Listen}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 60*time.Second)
	must := func(call api.UsersCall) api.UsersReply {
		t.Helper()
		r, err := cl.Users(ctx, call)
		if err != nil {
			t.Fatalf("%+v: %v", call, err)
		}
		return r
	}
	must(api.UsersCall{Op: api.UsersAdd, User: "u1", Secret: "first-secret"})
	must(api.UsersCall{Op: api.UsersGrant, User: "u1", Resource: "topic:orders*", Actions: "publish,subscribe"})
	must(api.UsersCall{Op: api.UsersGrant, User: "u1", Resource: "group:cg", Actions: "sub"})
	for _, tc := range []struct {
		call api.UsersCall
		code codes.Code
	}{
		{api.UsersCall{Op: api.UsersAdd, User: "u1", Secret: "x"}, codes.AlreadyExists},
		{api.UsersCall{Op: api.UsersAdd, User: "u2"}, codes.InvalidArgument},
		{api.UsersCall{Op: api.UsersAdd, User: "bad name", Secret: "x"}, codes.InvalidArgument},
		{api.UsersCall{Op: api.UsersGrant, User: "u1", Resource: "queue:x", Actions: "publish"}, codes.InvalidArgument},
		{api.UsersCall{Op: api.UsersGrant, User: "u1", Resource: "topic:x", Actions: "write"}, codes.InvalidArgument},
		{api.UsersCall{Op: api.UsersGrant, User: "nobody", Resource: "topic:x", Actions: "publish"}, codes.NotFound},
		{api.UsersCall{Op: api.UsersRemove, User: "nobody"}, codes.NotFound},
		{api.UsersCall{Op: "chmod"}, codes.InvalidArgument},
	} {
		if _, err := cl.Users(ctx, tc.call); status.Code(err) != tc.code {
			t.Errorf("%+v: %v, want %s", tc.call, err, tc.code)
		}
	}
	r := must(api.UsersCall{Op: api.UsersList})
	if len(r.Users) != 1 || r.Users[0].Name != "u1" || len(r.Users[0].Grants) != 2 ||
		r.Users[0].Grants[1] != (api.GrantInfo{Resource: "topic:orders*", Actions: "publish,subscribe"}) {
		t.Fatalf("list: %+v", r.Users)
	}
	sealer, _ := acl.NewSealer(key)
	opens := func(i int, want string) bool {
		u, ok := c.Node(i).Store().User("u1")
		if !ok || bytes.Contains(u.Secret, []byte(want)) {
			return false
		}
		got, err := sealer.Open("u1", u.Secret)
		return err == nil && string(got) == want
	}
	for i := range c.Nodes() {
		waitFor(t, 10*time.Second, "the user on every node", func() bool { return opens(i, "first-secret") })
	}
	must(api.UsersCall{Op: api.UsersPasswd, User: "u1", Secret: "second-secret"})
	must(api.UsersCall{Op: api.UsersRevoke, User: "u1", Resource: "group:cg", Actions: "subscribe"})
	for i := range c.Nodes() {
		waitFor(t, 10*time.Second, "the new secret on every node", func() bool { return opens(i, "second-secret") })
	}
	if r := must(api.UsersCall{Op: api.UsersList}); len(r.Users) != 1 || len(r.Users[0].Grants) != 1 {
		t.Fatalf("list after revoke: %+v", r.Users)
	}
	must(api.UsersCall{Op: api.UsersRemove, User: "u1"})
	if r := must(api.UsersCall{Op: api.UsersList}); len(r.Users) != 0 {
		t.Fatalf("list after remove: %+v", r.Users)
	}
}

// TestUsersNeedAnAuthKey: a node without --auth-key-file cannot seal a
// secret and refuses to add a user, saying why.
func TestUsersNeedAnAuthKey(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.Leader()
	cl := c.Client(t)
	_, err := cl.Users(ctxT(t, 30*time.Second), api.UsersCall{Op: api.UsersAdd, User: "u1", Secret: "s"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--auth-key-file") {
		t.Fatalf("add without a key: %v", err)
	}
}

// TestAuthConfigValidate: the flags that must go together are refused
// apart, naming the flag.
func TestAuthConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  server.AuthConfig
		want string
	}{
		{server.AuthConfig{Mode: acl.Enforcing}, "--auth-key-file"},
		{server.AuthConfig{Mode: acl.Permissive}, "--auth-key-file"},
		{server.AuthConfig{KeyFile: "k", AdminUser: "root"}, "--auth-admin-secret-file"},
		{server.AuthConfig{AdminUser: "root", AdminSecret: []byte("s")}, "--auth-key-file"},
		{server.AuthConfig{KeyFile: "k", AdminUser: "a b", AdminSecret: []byte("s")}, "--auth-admin-user"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
	ok := server.AuthConfig{Mode: acl.Enforcing, KeyFile: "k", AdminUser: "root", AdminSecretFile: "f"}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	if err := (&server.AuthConfig{}).Validate(); err != nil {
		t.Errorf("disabled: %v", err)
	}
}

// TestFirstAdminFromConfiguration: a group of one writes the configured
// first admin, sealed,
// with admin on the cluster; after a restart with another admin configured
// the table, which has a user, is left as it is.
func TestFirstAdminFromConfiguration(t *testing.T) {
	key := bytes.Repeat([]byte("k"), 32)
	c := newCluster(t, 1, func(i int, cfg *server.Config) {
		cfg.Auth = server.AuthConfig{Mode: acl.Enforcing, Key: key, AdminUser: "root", AdminSecret: []byte("root-secret")}
	})
	c.Leader()
	sealer, _ := acl.NewSealer(key)
	waitFor(t, 10*time.Second, "the first admin", func() bool {
		u, ok := c.Node(0).Store().User("root")
		if !ok {
			return false
		}
		got, err := sealer.Open("root", u.Secret)
		return err == nil && string(got) == "root-secret" && len(u.Grants) == 1 &&
			u.Grants[0].Resource == auth.ClusterResource && u.Grants[0].Actions == uint32(auth.Admin)
	})
	c.Stop(0)
	c.Reconfigure(0, func(cfg *server.Config) { cfg.Auth.AdminUser, cfg.Auth.AdminSecret = "other", []byte("other-secret") })
	c.Restart(0)
	c.Leader()
	waitFor(t, 10*time.Second, "root after the restart", func() bool { _, ok := c.Node(0).Store().User("root"); return ok })
	time.Sleep(300 * time.Millisecond) // a bootstrap, were there one, is one local commit
	if us := c.Node(0).Store().Users(); len(us) != 1 || us[0].Name != "root" {
		t.Fatalf("users after a restart with another admin configured: %+v", us)
	}
}
