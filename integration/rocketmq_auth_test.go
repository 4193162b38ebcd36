package integration

// RocketMQ's ACL against a real 3-process group with --auth enforcing: the
// unmodified RocketMQ Go client with primitive.Credentials of a granted
// user produces and consumes; without credentials, with a wrong secret and
// as a user without the grant it is refused; users and grants made with
// the raftmq CLI apply on every node without a restart and survive a
// leader kill.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/remoting"
)

func rmqAuthProducer(t *testing.T, ns, group string, cred *primitive.Credentials) interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
	Shutdown() error
} {
	t.Helper()
	// Its own instance: the Go client shares one remoting client, with the
	// credentials of the first, among producers of one instance name.
	opts := []producer.Option{producer.WithNameServer([]string{ns}), producer.WithGroupName(group), producer.WithInstanceName(group), producer.WithRetry(1),
		producer.WithSendMsgTimeout(5 * time.Second)}
	if cred != nil {
		opts = append(opts, producer.WithCredentials(*cred))
	}
	p, err := producer.NewDefaultProducer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// rmqAuthProbe asks node addr for a topic's max offset (subscribe on the
// topic) signed as ak, straight over the remoting protocol.
func rmqAuthProbe(t *testing.T, cl *remoting.Client, addr, topic, ak, secret string) *remoting.Command {
	t.Helper()
	ext := map[string]string{"topic": topic, "queueId": "0"}
	acl.SignRequest(ext, nil, ak, []byte(secret))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cl.Invoke(ctx, addr, remoting.NewRequest(remoting.GetMaxOffset, ext, nil))
	if err != nil {
		t.Fatalf("probe %s: %v", addr, err)
	}
	return r
}

func TestRocketMQAuthEnforcing(t *testing.T) {
	dir := t.TempDir()
	keyFile, adminFile, u1File, u2File := filepath.Join(dir, "auth.key"), filepath.Join(dir, "admin.secret"),
		filepath.Join(dir, "u1.secret"), filepath.Join(dir, "u2.secret")
	for f, s := range map[string]string{keyFile: strings.Repeat("0123456789abcdef", 4), adminFile: "root-secret\n", u1File: "u1-secret\n", u2File: "u2-secret"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, ns := rmqStartGroup(t, "--auth", "enforcing", "--auth-key-file", keyFile, "--auth-admin-user", "root", "--auth-admin-secret-file", adminFile)
	s := c.addrs()
	// The CLI signs as the first admin.
	root := []string{"--access-key", "root", "--secret-key-file", adminFile}
	cli := func(stdin string, args ...string) string { return c.mustCLI(stdin, append(args, root...)...) }
	const topic = "auth-orders"
	cli("", "topic", "create", topic, "--queues", "4", "-s", s)
	cli("", "user", "add", "u1", "--secret-file", u1File, "-s", s)
	cli("u2-secret\n", "user", "add", "u2", "--secret-file", "-", "-s", s)
	cli("", "acl", "grant", "u1", "topic:auth-*", "publish", "-s", s)
	if out := cli("", "acl", "list", "u1", "-s", s); !strings.Contains(out, "u1\ttopic:auth-*\tpublish") {
		t.Fatalf("acl list u1:\n%s", out)
	}
	out := cli("", "user", "list", "-s", s)
	if !strings.Contains(out, "root\tcluster\tadmin") || !strings.Contains(out, "u2\t(no grants)") || strings.Contains(out, "secret") {
		t.Fatalf("user list:\n%s", out)
	}
	if _, errOut, err := c.cli("", append([]string{"user", "add", "u1", "--secret-file", u1File, "-s", s}, root...)...); err == nil || !strings.Contains(errOut, "user exists") {
		t.Fatalf("second add of u1: %v %s", err, errOut)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u1 := primitive.Credentials{AccessKey: "u1", SecretKey: "u1-secret"}
	// Routes come from the name server; wait until the topic is there.
	good := rmqAuthProducer(t, ns.Addr(), "auth-pg", &u1)
	var sent []string
	procWaitFor(t, 30*time.Second, "a granted send", func() (bool, string) {
		b := fmt.Sprintf("auth-%d", len(sent))
		_, err := good.SendSync(ctx, primitive.NewMessage(topic, []byte(b)))
		if err != nil {
			return false, err.Error()
		}
		sent = append(sent, b)
		return true, ""
	})
	for i := 0; i < 20; i++ {
		b := fmt.Sprintf("auth-%d", len(sent))
		if _, err := good.SendSync(ctx, primitive.NewMessage(topic, []byte(b))); err != nil {
			t.Fatalf("granted send %d: %v", i, err)
		}
		sent = append(sent, b)
	}

	for name, tc := range map[string]struct {
		cred *primitive.Credentials
		want string
	}{
		"no credentials": {nil, "without credentials"},
		"wrong secret":   {&primitive.Credentials{AccessKey: "u1", SecretKey: "nope"}, "does not verify"},
		"no grant":       {&primitive.Credentials{AccessKey: "u2", SecretKey: "u2-secret"}, "user u2 may not publish to topic " + topic},
	} {
		p := rmqAuthProducer(t, ns.Addr(), "auth-pg-"+strings.ReplaceAll(name, " ", "-"), tc.cred)
		_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("refused-"+name)))
		if err == nil || !strings.Contains(err.Error(), "CODE: 16") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: send %v, want NO_PERMISSION (16) saying %q", name, err, tc.want)
		}
		p.Shutdown()
	}

	// RocketMQ's Go admin API does not sign CreateTopic (it never calls
	// RegisterACL there) and ignores the response code: against an
	// enforcing node the topic is refused as unsigned.
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns.Addr()})),
		admin.WithCredentials(primitive.Credentials{AccessKey: "root", SecretKey: "root-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	unsignedBefore := rmqMetric(t, c.all()[0].HTTP, "raftmq_auth_refusals_total", `reason="no_credentials"`)
	_ = adm.CreateTopic(ctx, admin.WithTopicCreate("auth-by-admin"), admin.WithBrokerAddrCreate(c.all()[0].Remoting), admin.WithWriteQueueNums(2), admin.WithReadQueueNums(2))
	adm.Close()
	if after := rmqMetric(t, c.all()[0].HTTP, "raftmq_auth_refusals_total", `reason="no_credentials"`); after != unsignedBefore+1 {
		t.Errorf("the Go admin's unsigned CreateTopic: no_credentials %v -> %v, want one more", unsignedBefore, after)
	}
	if out := cli("", "topic", "list", "-s", s); strings.Contains(out, "auth-by-admin") {
		t.Errorf("an unsigned CreateTopic created the topic:\n%s", out)
	}

	// u1 may not read yet, on any node.
	rc := remoting.NewClient()
	defer rc.Close()
	for _, nd := range c.all() {
		if r := rmqAuthProbe(t, rc, nd.Remoting, topic, "u1", "u1-secret"); r.Code != remoting.NoPermission {
			t.Fatalf("%s: read before the grant: %d %s", nd.ID, r.Code, r.Remark)
		}
	}
	noPermission := func() float64 {
		var n float64
		for _, nd := range c.all() {
			n += rmqMetric(t, nd.HTTP, "raftmq_auth_refusals_total", `reason="no_permission"`)
		}
		return n
	}
	before := noPermission()
	// A push consumer of u1 starts before the grant and gets everything
	// once the CLI grants it subscribe on its group and the topic.
	got := newRMQReceived()
	pc, err := consumer.NewPushConsumer(consumer.WithNameServer([]string{ns.Addr()}), consumer.WithGroupName("auth-cg"), consumer.WithInstance("auth-cg"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithCredentials(u1))
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add("c1", m)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(); err != nil {
		t.Fatal(err)
	}
	defer pc.Shutdown()
	// Its heartbeats and pulls are refused until then.
	procWaitFor(t, 30*time.Second, "the consumer's requests refused", func() (bool, string) {
		n := noPermission()
		return n > before, fmt.Sprintf("%v no_permission refusals, %v before the consumer started", n, before)
	})
	if n := len(got.missing(sent)); n != len(sent) {
		t.Fatalf("%d messages delivered before the grant", len(sent)-n)
	}
	cli("", "acl", "grant", "u1", "group:auth-cg", "subscribe", "-s", s)
	cli("", "acl", "grant", "u1", "topic:"+topic, "sub", "-s", s)
	for _, nd := range c.all() {
		procWaitFor(t, 20*time.Second, nd.ID+" applies the grant", func() (bool, string) {
			r := rmqAuthProbe(t, rc, nd.Remoting, topic, "u1", "u1-secret")
			return r.Code == remoting.Success, fmt.Sprintf("%d %s", r.Code, r.Remark)
		})
	}
	rmqWaitAll(t, got, sent, 90*time.Second)

	// The grants survive a leader kill; a revoke made through the new
	// leader applies on every running node.
	old, _ := c.leaderNow()
	if old == nil {
		t.Fatal("no leader")
	}
	c.kill(old.ID)
	c.waitLeader(old.ID)
	for _, nd := range c.runningNodes() {
		if r := rmqAuthProbe(t, rc, nd.Remoting, topic, "u1", "u1-secret"); r.Code != remoting.Success {
			t.Fatalf("%s after the leader kill: %d %s", nd.ID, r.Code, r.Remark)
		}
	}
	var running []string
	for _, nd := range c.runningNodes() {
		running = append(running, nd.ID)
	}
	cli("", "acl", "revoke", "u1", "topic:"+topic, "subscribe", "-s", c.addrs(running...))
	for _, nd := range c.runningNodes() {
		procWaitFor(t, 20*time.Second, nd.ID+" applies the revoke", func() (bool, string) {
			r := rmqAuthProbe(t, rc, nd.Remoting, topic, "u1", "u1-secret")
			return r.Code == remoting.NoPermission, fmt.Sprintf("%d %s", r.Code, r.Remark)
		})
	}
	var refused float64
	for _, nd := range c.runningNodes() {
		refused += rmqMetric(t, nd.HTTP, "raftmq_auth_refusals_total", `reason="bad_signature"`, `mode="enforcing"`)
	}
	if refused < 1 {
		t.Errorf("bad signature refusals on the nodes: %v, want at least 1", refused)
	}
}
