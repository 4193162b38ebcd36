package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// fakeBroker holds topics in memory; notLeader makes its changes answer
// as a follower does.
type fakeBroker struct {
	topics    map[string]int32
	perms     map[string]uint32
	notLeader bool
	resets    []broker.ResetRequest
}

func (f *fakeBroker) Topics() []store.TopicInfo {
	var out []store.TopicInfo
	for name, n := range f.topics {
		ti := store.TopicInfo{Name: name, Perm: f.perms[name], Queues: make([]store.QueueRange, n)}
		for i := range ti.Queues {
			ti.Queues[i] = store.QueueRange{Min: 1, Max: 5}
		}
		out = append(out, ti)
	}
	return out
}

func (f *fakeBroker) ClientCreateTopic(_ context.Context, name string, queues int32, _ bool) (store.TopicInfo, error) {
	if f.notLeader {
		return store.TopicInfo{}, fmt.Errorf("%w: %w", broker.ErrNotLeader, &broker.NotLeaderError{LeaderID: "n1"})
	}
	if _, ok := f.topics[name]; ok {
		return store.TopicInfo{}, fmt.Errorf("%w: topic %q", broker.ErrAlreadyExists, name)
	}
	if queues == 0 {
		queues = 4
	}
	f.topics[name] = queues
	return store.TopicInfo{Name: name, Queues: make([]store.QueueRange, queues)}, nil
}

func (f *fakeBroker) DeleteTopic(_ context.Context, name string, _ bool) error {
	if _, ok := f.topics[name]; !ok {
		return fmt.Errorf("%w: topic %q", broker.ErrNotFound, name)
	}
	delete(f.topics, name)
	return nil
}

func (f *fakeBroker) UpdateTopic(_ context.Context, name string, perm *uint32) (store.TopicInfo, error) {
	if _, ok := f.topics[name]; !ok {
		return store.TopicInfo{}, fmt.Errorf("%w: topic %q", broker.ErrNotFound, name)
	}
	if f.perms == nil {
		f.perms = map[string]uint32{}
	}
	f.perms[name] = *perm
	return store.TopicInfo{Name: name, Perm: *perm}, nil
}

func TestDecodeUpdateTopic(t *testing.T) {
	for _, tc := range []struct {
		body, err string
		want      UpdateTopic
	}{
		{body: `{"name":"orders","perm":6}`, want: UpdateTopic{Name: "orders", Perm: 6}},
		{body: `{"name":"orders","perm":4}`, want: UpdateTopic{Name: "orders", Perm: 4}},
		{body: `{"name":"orders","perm":2}`, want: UpdateTopic{Name: "orders", Perm: 2}},
		{body: `{"name":"orders"}`, err: "perm 0: want 2 (write only), 4 (read only) or 6 (read and write)"},
		{body: `{"name":"orders","perm":7}`, err: "perm 7"},
		{body: `{"name":"orders","perm":-1}`, err: "request body"},
		{body: `{"name":"orders","perm":"6"}`, err: "request body"},
		{body: `{"name":"bad name!","perm":6}`, err: "topic"},
		{body: `{"name":"orders","perm":6,"force":true}`, err: "unknown field"},
		{body: `{"name":"orders","perm":6} 1`, err: "data after"},
		{body: `{"name":"` + strings.Repeat("a", 5000) + `","perm":6}`, err: "over 4096 bytes"},
	} {
		got, err := DecodeUpdateTopic(strings.NewReader(tc.body))
		checkDecoded(t, tc.body, got, err, tc.want, tc.err)
	}
}

func FuzzDecodeUpdateTopic(f *testing.F) {
	for _, s := range []string{`{"name":"orders","perm":6}`, `{"name":"a","perm":2}`, `{"perm":1e99}`, `[]`, `{"name":"x","perm":4}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeUpdateTopic(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, broker.ErrInvalidArgument) {
				t.Fatalf("error %v is no invalid argument", err)
			}
			return
		}
		if store.ValidateName("topic", req.Name) != nil || (req.Perm != 2 && req.Perm != 4 && req.Perm != 6) {
			t.Fatalf("accepted %+v", req)
		}
	})
}

func TestDecodeCreateTopic(t *testing.T) {
	for _, tc := range []struct {
		body, err string
		want      CreateTopic
	}{
		{body: `{"name":"orders","queues":3}`, want: CreateTopic{Name: "orders", Queues: 3}},
		{body: `{"name":"orders"}`, want: CreateTopic{Name: "orders"}},
		{body: `{"name":"orders","queues":1024}`, want: CreateTopic{Name: "orders", Queues: 1024}},
		{body: `{"name":"orders","queues":1025}`, err: "1025 queues: want 1..1024"},
		{body: `{"name":"orders","queues":-1}`, err: "-1 queues"},
		{body: `{"name":"orders","queues":1e30}`, err: "request body"},
		{body: `{"name":"orders","queues":"3"}`, err: "request body"},
		{body: `{"name":"bad name!"}`, err: "topic"},
		{body: `{"name":""}`, err: "topic"},
		{body: `{"name":"orders","extra":1}`, err: "unknown field"},
		{body: `{"name":"orders"} {}`, err: "data after"},
		{body: `not json`, err: "request body"},
		{body: ``, err: "request body"},
		{body: `{"name":"` + strings.Repeat("a", 5000) + `"}`, err: "over 4096 bytes"},
	} {
		got, err := DecodeCreateTopic(strings.NewReader(tc.body))
		checkDecoded(t, tc.body, got, err, tc.want, tc.err)
	}
}

// checkDecoded checks one case of a decoder's table: the value wanted, or
// an invalid-argument error that says wantErr.
func checkDecoded[T comparable](t *testing.T, body string, got T, err error, want T, wantErr string) {
	t.Helper()
	if wantErr == "" {
		if err != nil || got != want {
			t.Errorf("%.60s: got %+v, %v; want %+v", body, got, err, want)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) || !errors.Is(err, broker.ErrInvalidArgument) {
		t.Errorf("%.60s: error %v, want one with %q", body, err, wantErr)
	}
}

func FuzzDecodeCreateTopic(f *testing.F) {
	for _, s := range []string{`{"name":"orders","queues":3}`, `{"name":"a"}`, `{"queues":1e99}`, `[]`, `{"name":"x"}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeCreateTopic(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, broker.ErrInvalidArgument) {
				t.Fatalf("error %v is no invalid argument", err)
			}
			return
		}
		if store.ValidateName("topic", req.Name) != nil || req.Queues < 0 || req.Queues > store.MaxQueues {
			t.Fatalf("accepted %+v", req)
		}
	})
}

func doRaw(t *testing.T, h http.Handler, method, url, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, url, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

func do(t *testing.T, h http.Handler, method, url, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, url, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 && strings.HasPrefix(rec.Body.String(), "{") {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, url, rec.Body.String(), err)
		}
	}
	return rec.Code, out
}

// The topics API without authentication: changes, their errors, and the
// refusal of pages of other sites.
func TestTopicsAPI(t *testing.T) {
	fb := &fakeBroker{topics: map[string]int32{"orders": 2}}
	h := New(Config{Status: fakeStatus, Broker: fb}).Handler()
	for _, tc := range []struct {
		method, url, body string
		hdr               map[string]string
		code              int
		err               string
	}{
		{"POST", "/console/api/topics", `{"name":"t1","queues":3}`, nil, 201, ""},
		{"POST", "/console/api/topics", `{"name":"t1"}`, nil, 409, "already exists"},
		{"POST", "/console/api/topics", `{"name":"t2","queues":99999999999}`, nil, 400, "queues: want 1..1024"},
		{"POST", "/console/api/topics", `{"name":"../x"}`, nil, 400, "topic"},
		{"POST", "/console/api/topics", `{`, nil, 400, "request body"},
		{"POST", "/console/api/topics", `{"name":"t3"}`, map[string]string{"Origin": "http://evil.example"}, 403, "another site"},
		{"POST", "/console/api/topics", `{"name":"t3"}`, map[string]string{"Origin": "http://127.0.0.1:2"}, 201, ""}, // another node of the group
		{"PATCH", "/console/api/topics", `{"name":"t1","perm":4}`, nil, 200, ""},
		{"PATCH", "/console/api/topics", `{"name":"t1","perm":5}`, nil, 400, "perm 5"},
		{"PATCH", "/console/api/topics", `{"name":"nope","perm":6}`, nil, 404, "not found"},
		{"PATCH", "/console/api/topics", `{"name":"t1","perm":6}`, map[string]string{"Origin": "http://evil.example"}, 403, "another site"},
		{"DELETE", "/console/api/topics?name=nope", "", nil, 404, "not found"},
		{"DELETE", "/console/api/topics?name=t1&force=maybe", "", nil, 400, "force"},
		{"DELETE", "/console/api/topics?name=", "", nil, 400, "topic"},
		{"DELETE", "/console/api/topics?name=t1", "", nil, 200, ""},
		{"PUT", "/console/api/topics", "", nil, 405, "not allowed"},
		{"OPTIONS", "/console/api/topics", "", map[string]string{"Origin": "http://127.0.0.1:1"}, 204, ""},
		{"GET", "/console/events?view=nope", "", nil, 400, "unknown view"},
	} {
		code, out := do(t, h, tc.method, tc.url, tc.body, tc.hdr)
		msg, _ := out["error"].(string)
		if code != tc.code || !strings.Contains(msg, tc.err) || (tc.err == "" && msg != "") {
			t.Errorf("%s %s %s: %d %q, want %d with %q", tc.method, tc.url, tc.body, code, msg, tc.code, tc.err)
		}
	}
	if _, ok := fb.topics["t1"]; ok {
		t.Error("t1 not deleted")
	}
	if fb.perms["t1"] != store.PermRead {
		t.Errorf("t1's perm %d, want the 4 the PATCH set (and nothing else)", fb.perms["t1"])
	}
	fb.notLeader = true
	code, out := do(t, h, "POST", "/console/api/topics", `{"name":"t4"}`, nil)
	if code != http.StatusServiceUnavailable || out["leaderHttp"] != "127.0.0.1:1" {
		t.Errorf("on a follower: %d %v, want 503 naming the leader's HTTP address", code, out)
	}
}

// With authentication enforced, the topics need a valid credential, and
// changes admin on the topic, as the same calls on the gRPC API.
func TestTopicsAPIAuth(t *testing.T) {
	sealer, err := acl.NewSealer(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed := func(u string) []byte { b, _ := sealer.Seal(u, []byte("s-"+u)); return b }
	dir := dirOf{
		"admin":  {Name: "admin", Secret: sealed("admin"), Grants: []store.Grant{{Resource: auth.ClusterResource, Actions: uint32(auth.Admin)}}},
		"reader": {Name: "reader", Secret: sealed("reader"), Grants: []store.Grant{{Resource: "topic:orders", Actions: uint32(auth.Subscribe)}}},
	}
	a, err := auth.New(auth.Config{Mode: acl.Enforcing, Users: dir, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBroker{topics: map[string]int32{"orders": 2}}
	h := New(Config{Status: fakeStatus, Broker: fb, Auth: a}).Handler()
	cred := func(u, method string) map[string]string {
		return map[string]string{CredentialHeader: mq.SignCall(u, []byte("s-"+u), method, time.Now())}
	}
	for _, tc := range []struct {
		method, url, body string
		hdr               map[string]string
		code              int
		want              string
	}{
		{"GET", "/console/api/session", "", nil, 401, "asks credentials"},
		{"GET", "/console/api/session", "", cred("reader", methodRead), 200, `"admin":false`},
		{"GET", "/console/api/session", "", cred("admin", methodRead), 200, `"admin":true`},
		{"GET", "/console/api/session", "", map[string]string{CredentialHeader: mq.SignCall("admin", []byte("wrong"), methodRead, time.Now())}, 401, "does not verify"},
		{"GET", "/console/api/topics", "", nil, 401, "without credentials"},
		{"GET", "/console/api/topics", "", cred("reader", methodRead), 200, "orders"},
		{"GET", "/console/events?view=topics", "", nil, 401, "without credentials"},
		{"POST", "/console/api/topics", `{"name":"t1"}`, cred("reader", methodCreateTopic), 403, "may not"},
		{"POST", "/console/api/topics", `{"name":"t1"}`, cred("admin", methodDeleteTopic), 401, "does not verify"}, // signed for another call
		{"POST", "/console/api/topics", `{"name":"t1"}`, cred("admin", methodCreateTopic), 201, "t1"},
		{"PATCH", "/console/api/topics", `{"name":"t1","perm":4}`, cred("reader", methodUpdateTopic), 403, "may not"},
		{"PATCH", "/console/api/topics", `{"name":"t1","perm":4}`, cred("admin", methodDeleteTopic), 401, "does not verify"},
		{"PATCH", "/console/api/topics", `{"name":"t1","perm":4}`, cred("admin", methodUpdateTopic), 200, `"perm":4`},
		{"DELETE", "/console/api/topics?name=t1", "", cred("reader", methodDeleteTopic), 403, "may not"},
		{"DELETE", "/console/api/topics?name=t1", "", cred("admin", methodDeleteTopic), 200, "t1"},
	} {
		req := httptest.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s %s as %v: %d %s, want %d with %q", tc.method, tc.url, tc.hdr, rec.Code, rec.Body.String(), tc.code, tc.want)
		}
	}
}

type dirOf map[string]store.User

func (d dirOf) User(name string) (store.User, bool) { u, ok := d[name]; return u, ok }

// The topics view carries each topic's queues, messages held and rate,
// system topics last.
func TestTopicsView(t *testing.T) {
	fb := &fakeBroker{topics: map[string]int32{"orders": 2, mq.RetryTopic("g"): 1, "a": 1}}
	c := New(Config{Status: fakeStatus, Broker: fb})
	ts := c.topics(time.Now())
	if len(ts) != 3 || ts[0].Name != "a" || ts[1].Name != "orders" || !ts[2].System {
		t.Fatalf("order %+v", ts)
	}
	if o := ts[1]; len(o.Queues) != 2 || o.Messages != 8 || o.Perm != store.PermReadWrite || !o.Writable {
		t.Fatalf("orders %+v", o)
	}
}
