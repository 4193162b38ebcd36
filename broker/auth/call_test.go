package auth

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

func callAuthorizer(t *testing.T, mode acl.Mode, th acl.ThrottleConfig) (*Authorizer, *acl.Sealer) {
	t.Helper()
	s, err := acl.NewSealer(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.Seal("u1", []byte("secret-1"))
	if err != nil {
		t.Fatal(err)
	}
	dir := users{"u1": {Name: "u1", Secret: sealed, Grants: []store.Grant{{Resource: "topic:orders", Actions: uint32(Publish)}}}}
	a, err := New(Config{Mode: mode, Users: dir, Sealer: s, Throttle: th})
	if err != nil {
		t.Fatal(err)
	}
	return a, s
}

const produceMethod = "/raftmq.v1.Broker/Produce"

func TestCheckCall(t *testing.T) {
	a, s := callAuthorizer(t, acl.Enforcing, acl.ThrottleConfig{Burst: 100, Every: time.Second})
	now := time.Now()
	pub := func(topic string) []Need { return []Need{{Publish, Topic(topic)}} }
	good := mq.SignCall("u1", []byte("secret-1"), produceMethod, now)
	if err := a.CheckCall(good, produceMethod, pub("orders"), false, "10.0.0.1:1"); err != nil {
		t.Fatalf("good call: %v", err)
	}
	node := mq.SignCall(mq.NodeAccessKey, s.NodeSecret(), "/raftmq.v1.Peer/NodeState", now)
	if err := a.CheckCall(node, "/raftmq.v1.Peer/NodeState", nil, true, "10.0.0.2:1"); err != nil {
		t.Fatalf("node call: %v", err)
	}
	// A node's forward of a client call needs no grant: the node checked it.
	if err := a.CheckCall(mq.SignCall(mq.NodeAccessKey, s.NodeSecret(), produceMethod, now), produceMethod, pub("payments"), false, "10.0.0.2:1"); err != nil {
		t.Fatalf("forwarded call: %v", err)
	}
	other, _ := acl.NewSealer(bytes.Repeat([]byte("o"), 32))
	for _, tc := range []struct {
		name, cred, method string
		needs              []Need
		node               bool
		reason, msg        string
	}{
		{"none", "", produceMethod, pub("orders"), false, ReasonNoCredentials, "without credentials"},
		{"malformed", "v1 u1 x", produceMethod, pub("orders"), false, ReasonBadSignature, "malformed"},
		{"unknown", mq.SignCall("u9", []byte("secret-1"), produceMethod, now), produceMethod, pub("orders"), false, ReasonUnknownUser, "access key u9"},
		{"wrong secret", mq.SignCall("u1", []byte("wrong"), produceMethod, now), produceMethod, pub("orders"), false, ReasonBadSignature, "does not verify"},
		{"other method", mq.SignCall("u1", []byte("secret-1"), "/raftmq.v1.Broker/Pull", now), produceMethod, pub("orders"), false, ReasonBadSignature, "does not verify"},
		{"stale", mq.SignCall("u1", []byte("secret-1"), produceMethod, now.Add(-6*time.Minute)), produceMethod, pub("orders"), false, ReasonStale, "check the caller's clock"},
		{"future", mq.SignCall("u1", []byte("secret-1"), produceMethod, now.Add(6*time.Minute)), produceMethod, pub("orders"), false, ReasonStale, "more than 5m0s"},
		{"no grant", good, produceMethod, pub("payments"), false, ReasonNoPermission, "user u1 may not publish to topic payments"},
		{"user on node call", mq.SignCall("u1", []byte("secret-1"), "/raftmq.v1.Peer/NodeState", now), "/raftmq.v1.Peer/NodeState", nil, true, ReasonNotNode, "node-to-node call"},
		{"other group's node", mq.SignCall(mq.NodeAccessKey, other.NodeSecret(), "/raftmq.v1.Peer/NodeState", now), "/raftmq.v1.Peer/NodeState", nil, true, ReasonBadSignature, "--auth-key-file differs"},
	} {
		err := a.CheckCall(tc.cred, tc.method, tc.needs, tc.node, "10.0.0.3:1")
		var d *Denied
		if !errors.As(err, &d) || d.Reason != tc.reason || !strings.Contains(d.Message, tc.msg) {
			t.Errorf("%s: %v, want %s %q", tc.name, err, tc.reason, tc.msg)
		}
		if err != nil && strings.Contains(err.Error(), "secret-1") {
			t.Errorf("%s: refusal names the secret: %v", tc.name, err)
		}
	}
	if got := counterValue(a.Refusals(acl.Enforcing, ReasonStale)); got != 2 {
		t.Errorf("stale refusals %v, want 2", got)
	}
	p, _ := callAuthorizer(t, acl.Permissive, acl.ThrottleConfig{})
	if err := p.CheckCall("", produceMethod, pub("orders"), false, "x"); err != nil || counterValue(p.Refusals(acl.Permissive, ReasonNoCredentials)) != 1 {
		t.Errorf("permissive: %v, count %v", err, counterValue(p.Refusals(acl.Permissive, ReasonNoCredentials)))
	}
}

// TestThrottle: bad signatures from one address use up its allowance; then
// even a good signature from it is refused unchecked until a token comes
// back, while other addresses are never slowed.
func TestThrottle(t *testing.T) {
	a, _ := callAuthorizer(t, acl.Enforcing, acl.ThrottleConfig{Burst: 3, Every: time.Minute})
	now := time.Unix(1_700_000_000, 0)
	a.now = func() time.Time { return now }
	pub := []Need{{Publish, Topic("orders")}}
	good := func() string { return mq.SignCall("u1", []byte("secret-1"), produceMethod, now) }
	bad := mq.SignCall("u1", []byte("guess"), produceMethod, now)
	reason := func(err error) string {
		var d *Denied
		if errors.As(err, &d) {
			return d.Reason
		}
		return ""
	}
	for i := range 3 {
		if r := reason(a.CheckCall(bad, produceMethod, pub, false, "10.0.0.9:100")); r != ReasonBadSignature {
			t.Fatalf("guess %d: %s", i, r)
		}
	}
	if r := reason(a.CheckCall(good(), produceMethod, pub, false, "10.0.0.9:200")); r != ReasonThrottled {
		t.Fatalf("after 3 bad signatures, another port of the same host: %s, want throttled", r)
	}
	// Remoting requests count against the same address.
	ext := map[string]string{"topic": "orders"}
	acl.SignRequest(ext, nil, "u1", []byte("secret-1"))
	if r := reason(a.Check(ext, nil, pub, "send", "10.0.0.9:300")); r != ReasonThrottled {
		t.Fatalf("remoting from the throttled host: %s", r)
	}
	if err := a.CheckCall(good(), produceMethod, pub, false, "10.0.0.10:1"); err != nil {
		t.Fatalf("another host slowed: %v", err)
	}
	if n := a.throttle.EmptyCount(now); n != 1 {
		t.Fatalf("throttled addresses %d, want 1", n)
	}
	now = now.Add(time.Minute)
	if err := a.CheckCall(good(), produceMethod, pub, false, "10.0.0.9:100"); err != nil {
		t.Fatalf("after a refill: %v", err)
	}
	now = now.Add(3 * time.Minute)
	if n := a.throttle.EmptyCount(now); n != 0 || a.throttle.Remembered() != 0 {
		t.Fatalf("refilled bucket kept: %d empty, %d kept", n, a.throttle.Remembered())
	}
	if got := counterValue(a.Refusals(acl.Enforcing, ReasonThrottled)); got != 2 {
		t.Errorf("throttled refusals %v, want 2", got)
	}
}

// BenchmarkCheckCall is a node's cost of one signed call: parse, look up
// the user, HMAC-SHA256, check the grants.
func BenchmarkCheckCall(b *testing.B) {
	s, _ := acl.NewSealer(bytes.Repeat([]byte("k"), 32))
	sealed, _ := s.Seal("u1", []byte("secret-1"))
	a, _ := New(Config{Mode: acl.Enforcing, Sealer: s, Users: users{"u1": {Name: "u1", Secret: sealed, Grants: []store.Grant{{Resource: "topic:orders", Actions: uint32(Publish)}}}}})
	cred := mq.SignCall("u1", []byte("secret-1"), produceMethod, time.Now())
	needs := []Need{{Publish, Topic("orders")}}
	b.ReportAllocs()
	for b.Loop() {
		if err := a.CheckCall(cred, produceMethod, needs, false, "10.0.0.1:1"); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzCheckCall: whatever a caller puts in the credential, the node never
// panics and never lets a call through that the secret did not sign for
// that method and time; a real credential of another method is refused.
func FuzzCheckCall(f *testing.F) {
	s, _ := acl.NewSealer(bytes.Repeat([]byte("k"), 32))
	sealed, _ := s.Seal("u1", []byte("secret-1"))
	a, _ := New(Config{Mode: acl.Enforcing, Sealer: s, Throttle: acl.ThrottleConfig{Burst: 1 << 30, Every: time.Nanosecond},
		Users: users{"u1": {Name: "u1", Secret: sealed, Grants: []store.Grant{{Resource: ClusterResource, Actions: uint32(Admin)}}}}})
	now := time.Now()
	f.Add(mq.SignCall("u1", []byte("secret-1"), "/raftmq.v1.Broker/Pull", now), false)
	f.Add(mq.SignCall(mq.NodeAccessKey, s.NodeSecret(), "/raftmq.v1.Broker/Pull", now), true)
	f.Add("v1 u1 0 00 AAAA", false)
	f.Add("", true)
	f.Fuzz(func(t *testing.T, cred string, node bool) {
		if err := a.CheckCall(cred, produceMethod, nil, node, "10.0.0.1:1"); err == nil {
			t.Fatalf("%q (node-only %v) accepted for %s", cred, node, produceMethod)
		}
	})
}
