package namesrv

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/remoting"
)

func sealer(t testing.TB, b byte) *acl.Sealer {
	t.Helper()
	s, err := acl.NewSealer(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startAuth(t *testing.T, mode acl.Mode, s *acl.Sealer) (*Server, *remoting.Client) {
	t.Helper()
	srv, err := Start(Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Expiry: time.Minute, Auth: mode, Sealer: s,
		Throttle: acl.ThrottleConfig{Burst: 3, Every: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient()
	t.Cleanup(func() { cl.Close(); srv.Close() })
	return srv, cl
}

// metrics is the name server's /metrics text.
func metrics(t *testing.T, srv *Server) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(srv.promReg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

func regRequest(t *testing.T, reg Registration) *remoting.Command {
	t.Helper()
	req, err := RegisterRequest(reg)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func routeRequest(topic string) *remoting.Command {
	return remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
}

// TestRegistrationNeedsTheNodeCredential: an enforcing name server refuses
// a registration without the node credential, with another key file's,
// with a user's or with a stale one (NO_PERMISSION), and never routes it;
// the node's own is taken, with the users it carries.
func TestRegistrationNeedsTheNodeCredential(t *testing.T) {
	key := sealer(t, 'k')
	srv, cl := startAuth(t, acl.Enforcing, key)
	sealed, err := key.Seal("u1", []byte("secret-1"))
	if err != nil {
		t.Fatal(err)
	}
	reg := Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1001", NodeID: "n1", Term: 1, Topics: map[string]int{"orders": 4},
		Users: []User{{Name: "u1", Sealed: sealed}}}

	unsigned := regRequest(t, reg)
	forged := regRequest(t, reg)
	SignNodeRequest(forged, sealer(t, 'x').NodeSecret(), time.Now())
	byUser := regRequest(t, reg)
	byUser.Ext[ExtSignedAt] = "1"
	acl.SignRequest(byUser.Ext, byUser.Body, "u1", []byte("secret-1"))
	stale := regRequest(t, reg)
	SignNodeRequest(stale, key.NodeSecret(), time.Now().Add(-mq.CallWindow-time.Minute))
	changed := regRequest(t, reg)
	SignNodeRequest(changed, key.NodeSecret(), time.Now())
	changed.Body = bytes.Replace(changed.Body, []byte(`"orders"`), []byte(`"ordersX"`), 1)
	for name, req := range map[string]*remoting.Command{"unsigned": unsigned, "forged": forged, "user": byUser, "stale": stale, "body changed": changed} {
		resp := invoke(t, cl, srv.Addr(), req)
		if resp.Code != remoting.NoPermission {
			t.Fatalf("%s registration: code %d %s, want NO_PERMISSION", name, resp.Code, resp.Remark)
		}
		if strings.Contains(resp.Remark, "secret-1") {
			t.Fatalf("refusal names a secret: %s", resp.Remark)
		}
	}
	if len(srv.Groups()) != 0 {
		t.Fatalf("refused registrations routed: %v", srv.Groups())
	}
	node := func(req *remoting.Command) *remoting.Command {
		SignNodeRequest(req, key.NodeSecret(), time.Now())
		return req
	}
	// Not even the routes answer a node-signed request before a
	// registration: the group is unknown.
	if resp := invoke(t, cl, srv.Addr(), node(routeRequest("orders"))); resp.Code != remoting.TopicNotExist {
		t.Fatalf("route before the registration: %d %s", resp.Code, resp.Remark)
	}
	if resp := invoke(t, cl, srv.Addr(), node(regRequest(t, reg))); resp.Code != remoting.Success {
		t.Fatalf("node-signed registration: %d %s", resp.Code, resp.Remark)
	}
	if g := srv.Groups()["g1"]; g == nil || g.Addrs[0] != "127.0.0.1:1001" {
		t.Fatalf("routes after the registration: %v", srv.Groups())
	}
	m := metrics(t, srv)
	for _, want := range []string{
		`raftmq_namesrv_auth_refusals_total{mode="enforcing",reason="no_credentials"} 1`,
		`raftmq_namesrv_auth_refusals_total{mode="enforcing",reason="bad_signature"} 2`,
		`raftmq_namesrv_auth_refusals_total{mode="enforcing",reason="not_node"} 1`,
		`raftmq_namesrv_auth_refusals_total{mode="enforcing",reason="stale"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// A user the registration carries signs routes with its secret.
	signed := func(ak, secret string) *remoting.Command {
		req := routeRequest("orders")
		acl.SignRequest(req.Ext, req.Body, ak, []byte(secret))
		return req
	}
	if resp := invoke(t, cl, srv.Addr(), signed("u1", "secret-1")); resp.Code != remoting.Success {
		t.Fatalf("route signed by u1: %d %s", resp.Code, resp.Remark)
	}
	for name, req := range map[string]*remoting.Command{"unsigned": routeRequest("orders"), "wrong secret": signed("u1", "guess"), "unknown user": signed("u2", "secret-1")} {
		resp := invoke(t, cl, srv.Addr(), req)
		if resp.Code != remoting.NoPermission {
			t.Fatalf("%s route: %d %s, want NO_PERMISSION", name, resp.Code, resp.Remark)
		}
		if name == "unsigned" && !strings.Contains(resp.Remark, "--access-key") {
			t.Errorf("unsigned route: %q does not say how raftmq's CLI signs", resp.Remark)
		}
	}
	// A wrong secret and an unknown user took two of the allowance
	// (Burst 3), one more the rest: even u1's good signature from this
	// host is refused unchecked now, but the node credential is always
	// verified.
	invoke(t, cl, srv.Addr(), signed("u1", "guess2"))
	if resp := invoke(t, cl, srv.Addr(), signed("u1", "secret-1")); resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, "too many bad signatures") {
		t.Fatalf("after 3 bad signatures: %d %s, want throttled", resp.Code, resp.Remark)
	}
	if resp := invoke(t, cl, srv.Addr(), node(regRequest(t, reg))); resp.Code != remoting.Success {
		t.Fatalf("node-signed registration from a throttled host: %d %s", resp.Code, resp.Remark)
	}

	// A registration without the user drops it; an unregistration needs
	// the node credential too.
	if resp := invoke(t, cl, srv.Addr(), remoting.NewRequest(remoting.UnregisterBroker, map[string]string{"brokerAddr": reg.Addr}, nil)); resp.Code != remoting.NoPermission {
		t.Fatalf("unsigned unregistration: %d %s", resp.Code, resp.Remark)
	}
	if len(srv.Groups()) != 1 {
		t.Fatal("an unsigned unregistration removed the group")
	}
	reg.Users = nil
	if resp := invoke(t, cl, srv.Addr(), node(regRequest(t, reg))); resp.Code != remoting.Success {
		t.Fatalf("registration without users: %d %s", resp.Code, resp.Remark)
	}
	if got := srv.reg.sealed("u1"); len(got) != 0 {
		t.Fatalf("u1 kept after a registration without it: %d secrets", len(got))
	}
}

// TestPermissiveServesAndCounts: a permissive name server serves unsigned
// requests and counts them, but takes users only from registrations signed
// with the node credential.
func TestPermissiveServesAndCounts(t *testing.T) {
	key := sealer(t, 'k')
	srv, cl := startAuth(t, acl.Permissive, key)
	sealed, _ := key.Seal("u1", []byte("secret-1"))
	reg := Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1001", NodeID: "n1", Term: 1, Topics: map[string]int{"orders": 4},
		Users: []User{{Name: "u1", Sealed: sealed}}}
	if resp := invoke(t, cl, srv.Addr(), regRequest(t, reg)); resp.Code != remoting.Success {
		t.Fatalf("unsigned registration, permissive: %d %s", resp.Code, resp.Remark)
	}
	if got := srv.reg.sealed("u1"); len(got) != 0 {
		t.Fatal("users taken from an unsigned registration")
	}
	if resp := invoke(t, cl, srv.Addr(), routeRequest("orders")); resp.Code != remoting.Success {
		t.Fatalf("unsigned route, permissive: %d %s", resp.Code, resp.Remark)
	}
	m := metrics(t, srv)
	if !strings.Contains(m, `raftmq_namesrv_auth_refusals_total{mode="permissive",reason="no_credentials"} 2`) {
		t.Errorf("permissive refusals not counted:\n%s", m)
	}
}

func TestAuthNeedsAKey(t *testing.T) {
	_, err := Start(Config{Listen: "127.0.0.1:0", Expiry: time.Minute, Auth: acl.Enforcing})
	if err == nil || !strings.Contains(err.Error(), "auth key") {
		t.Fatalf("enforcing without a key: %v", err)
	}
}

// FuzzHandle: whatever ext fields and body a request carries, the name
// server answers it without panicking, in every mode.
func FuzzHandle(f *testing.F) {
	key := sealer(f, 'k')
	sealed, _ := key.Seal("u1", []byte("secret-1"))
	good, _ := RegisterRequest(Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1001", NodeID: "n1", Term: 1, Topics: map[string]int{"orders": 4},
		Users: []User{{Name: "u1", Sealed: sealed}}})
	SignNodeRequest(good, key.NodeSecret(), time.Now())
	ext, _ := json.Marshal(good.Ext)
	f.Add(int32(remoting.RegisterBroker), ext, good.Body, uint8(2))
	f.Add(int32(remoting.GetRouteInfoByTopic), []byte(`{"topic":"orders","AccessKey":"u1","Signature":"x"}`), []byte(nil), uint8(1))
	f.Add(int32(remoting.RegisterBroker), []byte(`{"brokerName":"g","brokerAddr":"1.2.3.4:5","AccessKey":"@node","Signature":"x","raftmqSignedAt":"-9223372036854775808"}`),
		[]byte(`{"raftmqUsers":[{"name":"u1","sealed":"AAAA"}]}`), uint8(2))
	servers := map[acl.Mode]*Server{}
	for _, m := range []acl.Mode{acl.Disabled, acl.Permissive, acl.Enforcing} {
		s := &Server{cfg: Config{Expiry: time.Minute}, reg: newRegistry(time.Minute), refused: map[string]string{}}
		s.log = hclog.NewNullLogger()
		s.guard = newGuard(Config{Auth: m, Sealer: key}, s.log)
		s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "r"}, []string{"code"})
		servers[m] = s
	}
	f.Fuzz(func(t *testing.T, code int32, extJSON, body []byte, mode uint8) {
		var ext map[string]string
		if json.Unmarshal(extJSON, &ext) != nil {
			return
		}
		s := servers[acl.Mode(mode%3)]
		req := remoting.NewRequest(code, ext, body)
		if resp := s.handle(context.Background(), mode&4 != 0, "10.0.0.1:1", req); resp == nil {
			t.Fatal("no answer")
		}
	})
}
