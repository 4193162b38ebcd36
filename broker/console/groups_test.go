package console

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

func (f *fakeBroker) ListGroups(context.Context) ([]string, error) {
	if f.notLeader {
		return nil, fmt.Errorf("%w: %w", broker.ErrNotLeader, &broker.NotLeaderError{LeaderID: "n1"})
	}
	return []string{"billing", "audit"}, nil
}

func (f *fakeBroker) DescribeGroup(_ context.Context, g string) (broker.GroupInfo, error) {
	if g == "audit" {
		return broker.GroupInfo{Group: g, Queues: []broker.GroupQueue{{Topic: "orders", Queue: 0, Committed: 2, MaxOffset: 5, Lag: 3}}}, nil
	}
	return broker.GroupInfo{Group: g, Generation: 3, Members: []broker.GroupMember{{ID: "m1", Assignments: []broker.Assignment{{Topic: "orders", Queues: []int32{0, 1}}}}},
		Queues: []broker.GroupQueue{{Topic: "orders", Queue: 0, Committed: -1, MaxOffset: 5, Lag: 4, Member: "m1"}, {Topic: "orders", Queue: 1, Committed: 5, MaxOffset: 5, Member: "m1"}}}, nil
}

func (f *fakeBroker) ResetGroup(_ context.Context, req broker.ResetRequest) ([]store.OffsetEntry, error) {
	if req.Group == "billing" {
		return nil, fmt.Errorf("%w: group %q has 1 live member(s); stop them first", broker.ErrFailedPrecondition, req.Group)
	}
	if _, ok := f.topics[req.Topic]; !ok {
		return nil, fmt.Errorf("%w: unknown topic %q", broker.ErrNotFound, req.Topic)
	}
	f.resets = append(f.resets, req)
	return []store.OffsetEntry{{Topic: req.Topic, Queue: 0, Offset: 1}}, nil
}

func (f *fakeBroker) ResendDeadLetter(_ context.Context, group, id string) (broker.ResendResult, error) {
	return broker.ResendResult{Topic: "orders", Ack: store.Ack{Queue: 1, Offset: 9, Index: 5, Ordinal: 2}}, nil
}

func (f *fakeBroker) Pull(_ context.Context, req broker.PullRequest) (broker.PullResult, error) {
	if req.Offset >= 5 {
		return broker.PullResult{Status: broker.PullNoNew, NextOffset: req.Offset}, nil
	}
	var ms []broker.Message
	for o := req.Offset; o < 5; o++ {
		ms = append(ms, broker.Message{Topic: req.Topic, Queue: req.Queue, Offset: o, ID: fmt.Sprintf("id%d", o), Body: []byte{0xff, byte(o)},
			Properties: map[string]string{mq.PropRetryTopic: "orders", mq.PropReconsumeTime: "16", mq.PropDeadLetterReason: "max reconsume times"}})
	}
	return broker.PullResult{Status: broker.PullFound, Messages: ms, NextOffset: 5}, nil
}

func TestDecodeResetGroup(t *testing.T) {
	for _, tc := range []struct{ body, err string }{
		{`{"group":"g","topic":"t","to":"earliest"}`, ""},
		{`{"group":"g","topic":"t","to":"latest","dryRun":true}`, ""},
		{`{"group":"g","topic":"t","to":"42","queues":[0,3]}`, ""},
		{`{"group":"g","topic":"t","to":"@1700000000000"}`, ""},
		{`{"group":"g","topic":"t","to":"18446744073709551616"}`, "want earliest, latest"},
		{`{"group":"g","topic":"t","to":"-1"}`, "want earliest, latest"},
		{`{"group":"g","topic":"t","to":"@-5"}`, "want earliest, latest"},
		{`{"group":"g","topic":"t","to":"@soon"}`, "want earliest, latest"},
		{`{"group":"g","topic":"t","to":""}`, "want earliest, latest"},
		{`{"group":"g","topic":"t","to":"earliest","queues":[1024]}`, "queue 1024"},
		{`{"group":"g","topic":"t","to":"earliest","queues":[-1]}`, "queue -1"},
		{`{"group":"g","topic":"t","to":"earliest","queues":[99999999999]}`, "request body"},
		{`{"group":"","topic":"t","to":"earliest"}`, "group"},
		{`{"group":"g","topic":"a b","to":"earliest"}`, "topic"},
		{`{"group":"g","topic":"t","to":"earliest","extra":1}`, "unknown field"},
	} {
		_, err := DecodeResetGroup(strings.NewReader(tc.body))
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.err)
		}
	}
}

func FuzzDecodeResetGroup(f *testing.F) {
	f.Add([]byte(`{"group":"g","topic":"t","to":"@1700000000000","queues":[0,1],"dryRun":true}`))
	f.Add([]byte(`{"group":"g","topic":"t","to":"9"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeResetGroup(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		if checkResetTo(req.To) != nil || store.ValidateName("group", req.Group) != nil || len(req.Queues) > store.MaxQueues {
			t.Fatalf("accepted %+v", req)
		}
	})
}

func TestDecodeResend(t *testing.T) {
	id := raftlog.MessageID(7, 0)
	for _, tc := range []struct{ body, err string }{
		{`{"group":"g","id":"` + id + `"}`, ""},
		{`{"group":"g","id":"nope"}`, "message id"},
		{`{"group":"g","id":"` + strings.Repeat("f", 300) + `"}`, "message id"},
		{`{"group":"a b","id":"` + id + `"}`, "group"},
	} {
		_, err := DecodeResend(strings.NewReader(tc.body))
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.err)
		}
	}
}

func TestGroupsAPI(t *testing.T) {
	fb := &fakeBroker{topics: map[string]int32{"orders": 2, mq.DeadLetterTopic("audit"): 1}}
	c := New(Config{Status: fakeStatus, Broker: fb})
	g := c.groups(context.Background(), "", "127.0.0.1:1")
	if g.Error != "" || len(g.Groups) != 2 || g.Groups[0].Name != "billing" || g.Groups[0].Lag != 4 || g.Groups[1].DeadLetters != 4 ||
		len(g.Groups[0].Members) != 1 || len(g.Groups[0].Members[0].Queues["orders"]) != 2 {
		t.Fatalf("groups %+v", g)
	}
	h := c.Handler()
	for _, tc := range []struct {
		method, url, body string
		code              int
		want              string
	}{
		{"POST", "/console/api/groups/reset", `{"group":"audit","topic":"orders","to":"earliest","dryRun":true}`, 200, `"dryRun":true`},
		{"POST", "/console/api/groups/reset", `{"group":"billing","topic":"orders","to":"earliest"}`, 409, "live member"},
		{"POST", "/console/api/groups/reset", `{"group":"audit","topic":"nope","to":"earliest"}`, 404, "unknown topic"},
		{"POST", "/console/api/groups/reset", `{"group":"audit","topic":"orders","to":"1e9"}`, 400, "want earliest"},
		{"GET", "/console/api/groups/reset", ``, 405, "POST"},
		{"GET", "/console/api/deadletters?group=audit", ``, 200, `"reason":"max reconsume times"`},
		{"GET", "/console/api/deadletters?group=audit&max=0", ``, 400, "max"},
		{"GET", "/console/api/deadletters?group=audit&max=100000000000000000000", ``, 400, "max"},
		{"GET", "/console/api/deadletters?group=", ``, 400, "group"},
		{"GET", "/console/api/deadletters?group=billing", ``, 200, `[]`},
		{"POST", "/console/api/deadletters", `{"group":"audit","id":"` + raftlog.MessageID(3, 0) + `"}`, 200, `"topic":"orders"`},
		{"POST", "/console/api/deadletters", `{"group":"audit","id":"zz"}`, 400, "message id"},
	} {
		code, body := doRaw(t, h, tc.method, tc.url, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s %s: %d %s, want %d with %q", tc.method, tc.url, tc.body, code, body, tc.code, tc.want)
		}
	}
	if len(fb.resets) != 1 || !fb.resets[0].DryRun {
		t.Errorf("resets %+v, want the dry run", fb.resets)
	}
	fb.notLeader = true
	if g := c.groups(context.Background(), "", "127.0.0.1:1"); g.LeaderHTTP != "127.0.0.1:1" || g.Error == "" {
		t.Errorf("on a follower: %+v, want the leader's HTTP address", g)
	}
}

func (f *fakeBroker) ID() string { return "n2" }

func (f *fakeBroker) LookupMessage(_ context.Context, id string) (broker.LookupResult, error) {
	if f.notLeader {
		return broker.LookupResult{}, fmt.Errorf("%w: %w", broker.ErrNotLeader, &broker.NotLeaderError{LeaderID: "n1"})
	}
	if id != raftlog.MessageID(7, 0) {
		return broker.LookupResult{}, fmt.Errorf("%w: message %s", broker.ErrNotFound, id)
	}
	return broker.LookupResult{Message: broker.Message{ID: id, Topic: "orders", Body: []byte("hello")}, ServedBy: "n2"}, nil
}

func (f *fakeBroker) FindMessages(req broker.FindRequest) ([]broker.Message, error) {
	if req.Key == "" {
		return nil, fmt.Errorf("%w: find messages: the key must be one non-empty word", broker.ErrInvalidArgument)
	}
	if _, ok := f.topics[req.Topic]; !ok {
		return nil, fmt.Errorf("%w: unknown topic %q", broker.ErrNotFound, req.Topic)
	}
	return []broker.Message{{ID: "a", Topic: req.Topic, Key: req.Key, Body: []byte{0, 1, 0xfe}}}, nil
}

func TestMessagesAPI(t *testing.T) {
	fb := &fakeBroker{topics: map[string]int32{"orders": 2}}
	h := New(Config{Status: fakeStatus, Broker: fb}).Handler()
	for _, tc := range []struct {
		url  string
		code int
		want string
	}{
		{"/console/api/messages?id=" + raftlog.MessageID(7, 0), 200, `"body":"hello"`},
		{"/console/api/messages?id=" + raftlog.MessageID(7, 0), 200, `"servedBy":"n2"`},
		{"/console/api/messages?id=" + raftlog.MessageID(8, 0), 404, "not found"},
		{"/console/api/messages?id=xyz", 400, "message id"},
		{"/console/api/messages?topic=orders&key=k1", 200, `"bodyHex":"0001fe"`},
		{"/console/api/messages?topic=orders&key=k1", 200, `"text":false`},
		{"/console/api/messages?topic=orders&key=", 400, "non-empty word"},
		{"/console/api/messages?topic=nope&key=k1", 404, "unknown topic"},
		{"/console/api/messages?topic=orders&key=k1&max=65", 400, "max"},
		{"/console/api/messages?topic=orders&key=k1&max=-1", 400, "max"},
		{"/console/api/messages", 400, "give id=, or topic= and key="},
	} {
		code, body := doRaw(t, h, "GET", tc.url, "")
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d with %q", tc.url, code, body, tc.code, tc.want)
		}
	}
	fb.notLeader = true
	if code, body := doRaw(t, h, "GET", "/console/api/messages?id="+raftlog.MessageID(7, 0), ""); code != 503 || !strings.Contains(body, `"leaderHttp":"127.0.0.1:1"`) {
		t.Errorf("on a follower without the message: %d %s, want the leader named", code, body)
	}
}
