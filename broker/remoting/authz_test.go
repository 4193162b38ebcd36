package remoting_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker/auth"
	brokerremoting "github.com/raftmq/raftmq/broker/remoting"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/internal/servertest"
	rmq "github.com/raftmq/raftmq/remoting"
)

func newAuthFixture(t *testing.T, mode acl.Mode) *fixture {
	c := servertest.New(t, 3, servertest.InMemory(), servertest.Configure(func(i int, cfg *server.Config) {
		cfg.Remoting = "127.0.0.1:0"
		cfg.RemotingConfig.MaxPullWait = 300 * time.Millisecond
		cfg.Auth = server.AuthConfig{Mode: mode, Key: bytes.Repeat([]byte("k"), 32), AdminUser: "root", AdminSecret: []byte("root-secret")}
	}))
	cl := rmq.NewClient()
	t.Cleanup(func() { cl.Close() })
	return &fixture{t: t, c: c, cl: cl}
}

// signed signs a copy of ext as a RocketMQ client with credentials does.
func signed(ext map[string]string, body []byte, ak, secret string) map[string]string {
	out := make(map[string]string, len(ext)+2)
	for k, v := range ext {
		out[k] = v
	}
	acl.SignRequest(out, body, ak, []byte(secret))
	return out
}

// waitUsers waits until every node holds the users named.
func (f *fixture) waitUsers(check func(i int) bool) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < f.c.Size(); i++ {
		for !check(i) {
			if time.Now().After(deadline) {
				f.t.Fatalf("node %d never held the users", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestAuthEnforcingRemoting: with auth enforcing, the first admin comes
// from the configuration; a request is served only with a valid signature
// of a known user who holds what its code needs, on any node (a follower
// forwards what it accepted), and every refusal is NO_PERMISSION naming
// what was refused, counted by reason.
func TestAuthEnforcingRemoting(t *testing.T) {
	f := newAuthFixture(t, acl.Enforcing)
	f.waitUsers(func(i int) bool { _, ok := f.c.Node(i).Store().User("root"); return ok })
	l, fo := f.c.Leader(), f.follower()

	create := map[string]string{"topic": "orders", "writeQueueNums": "2", "readQueueNums": "2"}
	if r := f.invoke(f.addr(fo), rmq.UpdateAndCreateTopic, create, nil); r.Code != rmq.NoPermission || !strings.Contains(r.Remark, "without credentials") {
		t.Fatalf("unsigned create: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(fo), rmq.UpdateAndCreateTopic, signed(create, nil, "root", "root-secret"), nil); r.Code != rmq.Success {
		t.Fatalf("admin create: %d %s", r.Code, r.Remark)
	}

	// u1 may publish to orders* and read orders as group cg.
	ln := f.c.Node(l)
	sealed, err := ln.Sealer().Seal("u1", []byte("u1-secret"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ln.Store().AddUser(ctx, "u1", sealed); err != nil {
		t.Fatal(err)
	}
	if err := ln.Store().GrantUser(ctx, "u1", "topic:orders*", uint32(auth.Publish)); err != nil {
		t.Fatal(err)
	}
	f.waitUsers(func(i int) bool { u, _ := f.c.Node(i).Store().User("u1"); return len(u.Grants) == 1 })

	create2 := map[string]string{"topic": "orders2", "writeQueueNums": "2", "readQueueNums": "2"}
	if r := f.invoke(f.addr(l), rmq.UpdateAndCreateTopic, signed(create2, nil, "u1", "u1-secret"), nil); r.Code != rmq.NoPermission || r.Remark != "user u1 may not administer the cluster" {
		t.Fatalf("create by a user without admin: %d %q", r.Code, r.Remark)
	}
	send := sendExt("orders", 1, map[string]string{"UNIQ_KEY": "A1"})
	body := []byte("hello")
	if r := f.invoke(f.addr(fo), rmq.SendMessage, signed(send, body, "u1", "u1-secret"), body); r.Code != rmq.Success {
		t.Fatalf("granted send via follower: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(l), rmq.SendMessage, signed(send, body, "u1", "wrong"), body); r.Code != rmq.NoPermission || !strings.Contains(r.Remark, "does not verify") {
		t.Fatalf("wrong secret: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(l), rmq.SendMessage, signed(send, body, "u1", "u1-secret"), []byte("hellO")); r.Code != rmq.NoPermission {
		t.Fatalf("body changed after signing: %d %s", r.Code, r.Remark)
	}
	other := sendExt("payments", 0, nil)
	if r := f.invoke(f.addr(l), rmq.SendMessage, signed(other, body, "u1", "u1-secret"), body); r.Code != rmq.NoPermission || r.Remark != "user u1 may not publish to topic payments" {
		t.Fatalf("ungranted topic: %d %q", r.Code, r.Remark)
	}
	pull := map[string]string{"consumerGroup": "cg", "topic": "orders", "queueId": "1", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
	r := f.invoke(f.addr(fo), rmq.PullMessage, signed(pull, nil, "u1", "u1-secret"), nil)
	if r.Code != rmq.NoPermission || !strings.Contains(r.Remark, "may not subscribe to group cg, nor subscribe to topic orders") {
		t.Fatalf("pull without subscribe: %d %q", r.Code, r.Remark)
	}
	// A grant applies on every node without a restart.
	if err := ln.Store().GrantUser(ctx, "u1", "group:cg", uint32(auth.Subscribe)); err != nil {
		t.Fatal(err)
	}
	if err := ln.Store().GrantUser(ctx, "u1", "topic:orders", uint32(auth.Subscribe)); err != nil {
		t.Fatal(err)
	}
	f.waitUsers(func(i int) bool { u, _ := f.c.Node(i).Store().User("u1"); return len(u.Grants) == 3 })
	for i := 0; i < f.c.Size(); i++ {
		if r := f.invoke(f.addr(i), rmq.PullMessage, signed(pull, nil, "u1", "u1-secret"), nil); r.Code != rmq.Success {
			t.Fatalf("node %d: granted pull: %d %s", i, r.Code, r.Remark)
		}
	}
	if got := metricValue(t, f, l, "raftmq_auth_refusals_total", "reason", auth.ReasonBadSignature); got != 2 {
		t.Errorf("leader's bad signature refusals %v, want 2", got)
	}
	if got := metricValue(t, f, fo, "raftmq_auth_refusals_total", "reason", auth.ReasonNoPermission); got != 1 {
		t.Errorf("follower's no permission refusals %v, want 1", got)
	}
}

// TestAuthPermissiveServesAndCounts: permissive serves what enforcing
// would refuse and counts it.
func TestAuthPermissiveServesAndCounts(t *testing.T) {
	f := newAuthFixture(t, acl.Permissive)
	l := f.c.Leader()
	create := map[string]string{"topic": "orders", "writeQueueNums": "2", "readQueueNums": "2"}
	if r := f.invoke(f.addr(l), rmq.UpdateAndCreateTopic, create, nil); r.Code != rmq.Success {
		t.Fatalf("unsigned create (permissive): %d %s", r.Code, r.Remark)
	}
	if got := metricValue(t, f, l, "raftmq_auth_refusals_total", "reason", auth.ReasonNoCredentials); got != 1 {
		t.Errorf("permissive no-credentials count %v, want 1", got)
	}
}

// TestAuthNeedsByRequestCode: the request code decides the resource.
func TestAuthNeedsByRequestCode(t *testing.T) {
	hb := []byte(`{"clientID":"c","consumerDataSet":[{"groupName":"cg","subscriptionDataSet":[{"topic":"orders"},{"topic":"%RETRY%cg"}]}],"producerDataSet":[{"groupName":"pg"}]}`)
	lock := []byte(`{"consumerGroup":"og","clientId":"c","mqSet":[{"topic":"t1","queueId":0},{"topic":"t1","queueId":1}]}`)
	for _, tc := range []struct {
		code int32
		ext  map[string]string
		body []byte
		want string
	}{
		{rmq.SendMessage, map[string]string{"topic": "orders"}, nil, "publish topic:orders"},
		{rmq.SendMessageV2, map[string]string{"b": "orders"}, nil, "publish topic:orders"},
		{rmq.SendMessageV2, map[string]string{"b": "%RETRY%cg"}, nil, "subscribe group:cg"},
		{rmq.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "%RETRY%cg"}, nil, "subscribe group:cg"},
		{rmq.PullMessage, map[string]string{"consumerGroup": "cg", "topic": "orders"}, nil, "subscribe group:cg;subscribe topic:orders"},
		{rmq.UpdateConsumerOffset, map[string]string{"consumerGroup": "cg", "topic": "orders"}, nil, "subscribe group:cg;subscribe topic:orders"},
		{rmq.ConsumerSendMsgBack, map[string]string{"group": "cg"}, nil, "subscribe group:cg"},
		{rmq.UnregisterClient, map[string]string{"clientID": "c", "consumerGroup": "cg"}, nil, "subscribe group:cg"},
		{rmq.UnregisterClient, map[string]string{"clientID": "c", "producerGroup": "pg"}, nil, ""},
		{rmq.GetMaxOffset, map[string]string{"topic": "orders"}, nil, "subscribe topic:orders"},
		{rmq.HeartBeat, nil, hb, "subscribe group:cg;subscribe topic:orders"},
		{rmq.HeartBeat, nil, []byte("{"), ""},
		{rmq.LockBatchMQ, nil, lock, "subscribe group:og;subscribe topic:t1"},
		{rmq.UpdateAndCreateTopic, map[string]string{"topic": "x"}, nil, "admin cluster"},
		{rmq.GetRouteInfoByTopic, map[string]string{"topic": "x"}, nil, ""},
		{rmq.DeleteTopicInBroker, map[string]string{"topic": "x"}, nil, "admin topic:x"},
		{rmq.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"cg","retryMaxTimes":3}`), "admin group:cg"},
		{rmq.UpdateAndCreateSubscriptionGroup, nil, []byte(`{`), "admin cluster"},
		{rmq.DeleteSubscriptionGroup, map[string]string{"groupName": "cg"}, nil, "admin group:cg"},
		{rmq.GetAllSubscriptionGroupConfig, nil, nil, ""},
		{rmq.GetConsumeStats, map[string]string{"consumerGroup": "cg", "topic": "orders"}, nil, "subscribe group:cg;subscribe topic:orders"},
		{rmq.GetConsumeStats, map[string]string{"consumerGroup": "cg"}, nil, "subscribe group:cg"},
		{rmq.GetConsumerConnectionList, map[string]string{"consumerGroup": "cg"}, nil, "subscribe group:cg"},
		{rmq.GetTopicStatsInfo, map[string]string{"topic": "orders"}, nil, "subscribe topic:orders"},
		{rmq.QueryTopicConsumeByWho, map[string]string{"topic": "orders"}, nil, "subscribe topic:orders"},
		{rmq.GetBrokerRuntimeInfo, nil, nil, ""},
		{rmq.GetAllTopicConfig, nil, nil, ""},
		{rmq.InvokeBrokerToResetOffset, map[string]string{"group": "cg", "topic": "orders"}, nil, "admin group:cg"},
		{rmq.GetConsumerRunningInfo, map[string]string{"consumerGroup": "cg", "clientId": "c"}, nil, "admin cluster"},
		{rmq.GetBrokerConfig, nil, nil, "admin cluster"},
		{rmq.UpdateBrokerConfig, nil, []byte("a=1"), "admin cluster"},
	} {
		var got []string
		for _, n := range brokerremoting.AuthNeedsOf(tc.code, tc.ext, tc.body) {
			got = append(got, n.Action.String()+" "+n.Resource)
		}
		if s := strings.Join(got, ";"); s != tc.want {
			t.Errorf("code %d %v: %q, want %q", tc.code, tc.ext, s, tc.want)
		}
	}
}
