package auth

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/store"
)

func TestResources(t *testing.T) {
	for in, want := range map[string]string{
		Topic("orders"):    "topic:orders",
		Topic("%RETRY%cg"): "group:cg",
		Group("cg"):        "group:cg",
		Group("%RETRY%cg"): "group:cg",
		Topic("%DLQ%cg"):   "topic:%DLQ%cg",
		Need{Publish, Topic("orders")}.describe(): "publish to topic orders",
		Need{Admin, ClusterResource}.describe():   "administer the cluster",
	} {
		if in != want {
			t.Errorf("got %q, want %q", in, want)
		}
	}
	for _, ok := range []string{"topic:orders", "topic:orders*", "topic:*", "group:g-1", "group:*", "cluster"} {
		if _, err := ParseResource(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "orders", "topic:", "topic:a b", "queue:x", "topic:**", "cluster*"} {
		if _, err := ParseResource(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if a, err := ParseActions("pub, subscribe"); err != nil || a != Publish|Subscribe || a.String() != "publish,subscribe" {
		t.Fatalf("ParseActions: %v %v", a, err)
	}
	if _, err := ParseActions("write"); err == nil {
		t.Fatal("unknown action accepted")
	}
}

func TestAllowed(t *testing.T) {
	grants := []store.Grant{
		{Resource: "topic:orders*", Actions: uint32(Publish)},
		{Resource: "topic:audit", Actions: uint32(Subscribe)},
		{Resource: "group:cg", Actions: uint32(Subscribe)},
	}
	for _, tc := range []struct {
		need Need
		want bool
	}{
		{Need{Publish, "topic:orders"}, true},
		{Need{Publish, "topic:orders-eu"}, true},
		{Need{Publish, "topic:order"}, false},
		{Need{Subscribe, "topic:orders"}, false},
		{Need{Subscribe, "topic:audit"}, true},
		{Need{Publish, "topic:audit"}, false},
		{Need{Subscribe, "topic:audit2"}, false},
		{Need{Subscribe, "group:cg"}, true},
		{Need{Subscribe, Group("%RETRY%cg")}, true},
		{Need{Subscribe, "group:cg2"}, false},
		{Need{Admin, ClusterResource}, false},
		{Need{Publish | Subscribe, "topic:orders"}, false},
	} {
		if got := Allowed(grants, tc.need); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.need, got, tc.want)
		}
	}
	if Allowed(nil, Need{Subscribe, "topic:x"}) {
		t.Error("no grants allowed something")
	}
	// "topic:*" covers topics, not groups; cluster admin covers all.
	if !Allowed([]store.Grant{{Resource: "topic:*", Actions: 3}}, Need{Subscribe, "topic:x"}) || Allowed([]store.Grant{{Resource: "topic:*", Actions: 3}}, Need{Subscribe, "group:x"}) {
		t.Error("topic:* wildcard")
	}
	if !Allowed([]store.Grant{{Resource: ClusterResource, Actions: uint32(Admin)}}, Need{Publish, "topic:x"}) {
		t.Error("cluster admin may not publish")
	}
}

type users map[string]store.User

func (u users) User(name string) (store.User, bool) { x, ok := u[name]; return x, ok }

func TestAuthorizer(t *testing.T) {
	s, err := acl.NewSealer(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal("u1", []byte("secret-1"))
	if err != nil {
		t.Fatal(err)
	}
	dir := users{"u1": {Name: "u1", Secret: sealed, Grants: []store.Grant{{Resource: "topic:orders", Actions: uint32(Publish)}}}}
	reg := prometheus.NewRegistry()
	a, err := New(Config{Mode: acl.Enforcing, Users: dir, Sealer: s, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	signed := func(ak, secret, topic string) map[string]string {
		ext := map[string]string{"topic": topic}
		acl.SignRequest(ext, []byte("body"), ak, []byte(secret))
		return ext
	}
	pub := func(topic string) []Need { return []Need{{Publish, Topic(topic)}} }
	if err := a.Check(signed("u1", "secret-1", "orders"), []byte("body"), pub("orders"), "send", "test"); err != nil {
		t.Fatalf("granted request: %v", err)
	}
	for _, tc := range []struct {
		ext    map[string]string
		body   string
		topic  string
		reason string
		msg    string
	}{
		{map[string]string{"topic": "orders"}, "body", "orders", ReasonNoCredentials, "without credentials"},
		{signed("u9", "secret-1", "orders"), "body", "orders", ReasonUnknownUser, "access key u9"},
		{signed("u1", "wrong", "orders"), "body", "orders", ReasonBadSignature, "access key u1"},
		{signed("u1", "secret-1", "orders"), "changed", "orders", ReasonBadSignature, "does not verify"},
		{signed("u1", "secret-1", "payments"), "body", "payments", ReasonNoPermission, "user u1 may not publish to topic payments"},
	} {
		err := a.Check(tc.ext, []byte(tc.body), pub(tc.topic), "send", "test")
		var d *Denied
		if !errors.As(err, &d) || d.Reason != tc.reason || !strings.Contains(d.Message, tc.msg) {
			t.Errorf("%s: %v, want %s %q", tc.reason, err, tc.reason, tc.msg)
		}
		if err != nil && strings.Contains(err.Error(), "secret-1") {
			t.Errorf("refusal names the secret: %v", err)
		}
	}
	if got := counterValue(a.Refusals(acl.Enforcing, ReasonBadSignature)); got != 2 {
		t.Errorf("bad signature refusals %v, want 2", got)
	}
	// acl.Permissive serves everything, counts and logs what it would refuse,
	// and the log names the user and the refusal, never the secret.
	var logBuf bytes.Buffer
	p, _ := New(Config{Mode: acl.Permissive, Users: dir, Sealer: s, Logger: hclog.New(&hclog.LoggerOptions{Output: &logBuf, Level: hclog.Trace})})
	if err := p.Check(map[string]string{}, nil, pub("x"), "send", "test"); err != nil {
		t.Fatalf("permissive refused: %v", err)
	}
	if err := p.Check(signed("u1", "secret-1", "payments"), []byte("body"), pub("payments"), "send", "10.0.0.1:5"); err != nil {
		t.Fatalf("permissive refused: %v", err)
	}
	if got := counterValue(p.Refusals(acl.Permissive, ReasonNoCredentials)); got != 1 {
		t.Errorf("permissive count %v, want 1", got)
	}
	if got := counterValue(p.Refusals(acl.Permissive, ReasonNoPermission)); got != 1 {
		t.Errorf("permissive no-permission count %v, want 1", got)
	}
	logged := logBuf.String()
	if !strings.Contains(logged, "user u1 may not publish to topic payments") || !strings.Contains(logged, "10.0.0.1:5") || strings.Contains(logged, "secret-1") {
		t.Errorf("permissive log %q: want the refusal and the address, never the secret", logged)
	}
	// Another node's key: the secret does not open.
	other, _ := acl.NewSealer(bytes.Repeat([]byte("o"), 32))
	o, _ := New(Config{Mode: acl.Enforcing, Users: dir, Sealer: other})
	var d *Denied
	if err := o.Check(signed("u1", "secret-1", "orders"), []byte("body"), pub("orders"), "send", "test"); !errors.As(err, &d) || d.Reason != ReasonSecretUnreadable {
		t.Errorf("other key: %v", err)
	}
	// A node catching up since its start: an unknown user may be one it
	// has not applied yet, so the refusal is retryable; a known user is
	// checked as ever.
	var caughtUp bool
	cu, _ := New(Config{Mode: acl.Enforcing, Users: dir, Sealer: s, CaughtUp: func() bool { return caughtUp }})
	if err := cu.Check(signed("u9", "secret-1", "orders"), []byte("body"), pub("orders"), "send", "test"); !errors.As(err, &d) || d.Reason != ReasonCatchingUp || !d.Retryable() {
		t.Errorf("unknown user on a node catching up: %v", err)
	}
	if err := cu.Check(signed("u1", "secret-1", "orders"), []byte("body"), pub("orders"), "send", "test"); err != nil {
		t.Errorf("known user on a node catching up: %v", err)
	}
	caughtUp = true
	if err := cu.Check(signed("u9", "secret-1", "orders"), []byte("body"), pub("orders"), "send", "test"); !errors.As(err, &d) || d.Reason != ReasonUnknownUser || d.Retryable() {
		t.Errorf("unknown user on a caught-up node: %v", err)
	}
	if _, err := New(Config{Mode: acl.Enforcing}); err == nil {
		t.Error("enforcing without users and key accepted")
	}
	var nilA *Authorizer
	if nilA.Check(nil, nil, pub("x"), "", "") != nil || nilA.Mode() != acl.Disabled {
		t.Error("a nil authorizer refuses")
	}
}

func TestSealer(t *testing.T) {
	if _, err := acl.NewSealer([]byte("short")); err == nil {
		t.Fatal("short key accepted")
	}
	s, _ := acl.NewSealer(bytes.Repeat([]byte("k"), 40))
	a, _ := s.Seal("u1", []byte("pw"))
	b, _ := s.Seal("u1", []byte("pw"))
	if bytes.Equal(a, b) || bytes.Contains(a, []byte("pw")) {
		t.Fatal("sealing is deterministic or holds the secret")
	}
	if got, err := s.Open("u1", a); err != nil || string(got) != "pw" {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := s.Open("u2", a); !errors.Is(err, acl.ErrSealedSecret) {
		t.Fatalf("opened as another user: %v", err)
	}
	a[len(a)-1] ^= 1
	if _, err := s.Open("u1", a); !errors.Is(err, acl.ErrSealedSecret) {
		t.Fatalf("opened damaged: %v", err)
	}
	if _, err := s.Open("u1", nil); !errors.Is(err, acl.ErrSealedSecret) {
		t.Fatal("opened nothing")
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
