package namesrv

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/remoting"
)

func start(t *testing.T, expiry time.Duration) (*Server, *remoting.Client) {
	t.Helper()
	s, err := Start(Config{Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0", Expiry: expiry})
	if err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient()
	t.Cleanup(func() { cl.Close(); s.Close() })
	return s, cl
}

func register(t *testing.T, cl *remoting.Client, addr string, reg Registration) *remoting.Command {
	t.Helper()
	req, err := RegisterRequest(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.Success {
		t.Fatalf("register: %d %s", resp.Code, resp.Remark)
	}
	return resp
}

func invoke(t *testing.T, cl *remoting.Client, addr string, req *remoting.Command) *remoting.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestRouteFollowsTheHighestTerm(t *testing.T) {
	s, cl := start(t, time.Minute)
	topics := map[string]int{"orders": 4}
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1001", BrokerID: 0, NodeID: "n1", Term: 5, Topics: topics})
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1002", BrokerID: 1, NodeID: "n2", Term: 5, Topics: topics})
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1003", BrokerID: 2, NodeID: "n3", Term: 5, Topics: topics})

	resp := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "orders"}, nil))
	if resp.Code != remoting.Success {
		t.Fatalf("route: %d %s", resp.Code, resp.Remark)
	}
	body := string(resp.Body)
	// Trap 3: compact JSON, the Go client splits brokerAddrs on "," and ":".
	if !strings.Contains(body, `"brokerAddrs":{"0":"127.0.0.1:1001","1":"127.0.0.1:1002","2":"127.0.0.1:1003"}`) || strings.Contains(body, " ") {
		t.Fatalf("route body %s", body)
	}
	if !strings.Contains(body, `"queueDatas":[{"brokerName":"g1","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}]`) {
		t.Fatalf("queue datas in %s", body)
	}

	// n1 is killed; n2 wins term 6 and registers at once as 0, n3 as 1.
	// The dead leader's registration still lives, but is shadowed.
	resp = register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1002", BrokerID: 0, NodeID: "n2", Term: 6, Topics: topics})
	if resp.Ext["masterAddr"] != "127.0.0.1:1002" {
		t.Fatalf("masterAddr %q", resp.Ext["masterAddr"])
	}
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1003", BrokerID: 1, NodeID: "n3", Term: 6, Topics: topics})
	rd, err := FetchRoute(context.Background(), cl, s.Addr(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if a := rd.BrokerDatas[0].BrokerAddrs; a[0] != "127.0.0.1:1002" || a[1] != "127.0.0.1:1003" || len(a) != 2 {
		t.Fatalf("after failover: %v", a)
	}

	// A read-only topic's permission reaches the route (producers skip it).
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1002", BrokerID: 0, NodeID: "n2", Term: 6,
		Topics: map[string]int{"orders": 4, "ro": 2}, Perms: map[string]int{"ro": 4}})
	if rd, err := FetchRoute(context.Background(), cl, s.Addr(), "ro"); err != nil || rd.QueueDatas[0].Perm != 4 {
		t.Fatalf("read-only topic: %+v %v", rd, err)
	}
	if rd, err := FetchRoute(context.Background(), cl, s.Addr(), "orders"); err != nil || rd.QueueDatas[0].Perm != PermReadWrite {
		t.Fatalf("read-write topic: %+v %v", rd, err)
	}

	// Missing topic: TOPIC_NOT_EXIST (the producer's auto-create path is off, trap 11).
	if resp := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "nope"}, nil)); resp.Code != remoting.TopicNotExist {
		t.Fatalf("missing topic: %d", resp.Code)
	}
	if resp := invoke(t, cl, s.Addr(), remoting.NewRequest(999, nil, nil)); resp.Code != remoting.RequestCodeNotSupported {
		t.Fatalf("unknown code: %d", resp.Code)
	}
	ci, err := FetchClusterInfo(context.Background(), cl, s.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := ci.RaftmqGroups["g1"]; g.Term != 6 || g.Nodes[0] != "n2" || g.Topics["orders"] != 4 || ci.ClusterAddrTable["c"][0] != "g1" {
		t.Fatalf("cluster info %+v", ci)
	}
}

func TestRegistrationsExpire(t *testing.T) {
	s, cl := start(t, 300*time.Millisecond)
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1001", NodeID: "n1", Term: 1, Topics: map[string]int{"t": 1}})
	if len(s.Groups()) != 1 {
		t.Fatal("no group after registering")
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(s.Groups()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("registration never expired")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "t"}, nil)); resp.Code != remoting.TopicNotExist {
		t.Fatalf("expired route: code %d", resp.Code)
	}
}

func TestBadRegistrations(t *testing.T) {
	s, cl := start(t, time.Minute)
	for name, ext := range map[string]map[string]string{
		"no name":  {"brokerAddr": "127.0.0.1:1"},
		"bad addr": {"brokerName": "g", "brokerAddr": "nohost"},
		"bad id":   {"brokerName": "g", "brokerAddr": "127.0.0.1:1", "brokerId": "x"},
		"negative": {"brokerName": "g", "brokerAddr": "127.0.0.1:1", "brokerId": "-1"},
	} {
		if resp := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.RegisterBroker, ext, nil)); resp.Code == remoting.Success {
			t.Errorf("%s: accepted", name)
		}
	}
	resp := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.RegisterBroker, map[string]string{"brokerName": "g", "brokerAddr": "127.0.0.1:1"}, []byte("{not json")))
	if resp.Code == remoting.Success {
		t.Error("bad body accepted")
	}
	if len(s.Groups()) != 0 {
		t.Fatalf("bad registrations left groups: %v", s.Groups())
	}
}

func registerResp(t *testing.T, cl *remoting.Client, addr string, reg Registration) *remoting.Command {
	t.Helper()
	req, err := RegisterRequest(reg)
	if err != nil {
		t.Fatal(err)
	}
	return invoke(t, cl, addr, req)
}

func TestConflictingRegistrationsRefused(t *testing.T) {
	var logs syncBuffer
	s, err := Start(Config{Listen: "127.0.0.1:0", Expiry: time.Minute, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	if err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient()
	t.Cleanup(func() { cl.Close(); s.Close() })

	// Both groups name their nodes n1..n3; their raft addresses differ.
	a := []string{"n1@127.0.0.1:7001", "n2@127.0.0.1:7002", "n3@127.0.0.1:7003"}
	b := []string{"n1@127.0.0.1:7101", "n2@127.0.0.1:7102", "n3@127.0.0.1:7103"}
	topics := map[string]int{"orders": 4}
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "broker-a", Addr: "127.0.0.1:1001", NodeID: "n1", Term: 2, Topics: topics,
		ClientAddr: "127.0.0.1:9001", Members: a})
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "broker-a", Addr: "127.0.0.1:1002", BrokerID: 1, NodeID: "n2", Term: 2, Topics: topics,
		ClientAddr: "127.0.0.1:9002", Members: a})

	// Group b misconfigured with group a's name: refused, with a reason.
	resp := registerResp(t, cl, s.Addr(), Registration{Cluster: "c", Group: "broker-a", Addr: "127.0.0.1:1101", NodeID: "n1", Term: 9, Topics: topics,
		ClientAddr: "127.0.0.1:9101", Members: b})
	if resp.Code == remoting.Success || !strings.HasPrefix(resp.Remark, ErrNameTaken.Error()) || !strings.Contains(resp.Remark, "another group") {
		t.Fatalf("same name, other members: %d %q", resp.Code, resp.Remark)
	}
	// The same name in another cluster: refused.
	resp = registerResp(t, cl, s.Addr(), Registration{Cluster: "other", Group: "broker-a", Addr: "127.0.0.1:1201", NodeID: "n1", Term: 1, Topics: topics,
		ClientAddr: "127.0.0.1:9201", Members: []string{"n1@127.0.0.1:7201"}})
	if resp.Code == remoting.Success || !strings.Contains(resp.Remark, `cluster "c"`) {
		t.Fatalf("same name, other cluster: %d %q", resp.Code, resp.Remark)
	}
	// No client is sent to the wrong group: the route is group a's alone,
	// its higher term notwithstanding.
	gr := s.Groups()["broker-a"]
	if gr == nil || gr.Term != 2 || len(gr.Addrs) != 2 || gr.ClientAddrs[0] != "127.0.0.1:9001" || gr.ClientAddrs[1] != "127.0.0.1:9002" {
		t.Fatalf("route after refusals: %+v", gr)
	}
	ci, err := FetchClusterInfo(context.Background(), cl, s.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if g := ci.RaftmqGroups["broker-a"]; g.ClientAddrs[0] != "127.0.0.1:9001" {
		t.Fatalf("cluster info client addresses: %+v", g)
	}
	// A refused node retries every second: the reason is logged once.
	registerResp(t, cl, s.Addr(), Registration{Cluster: "c", Group: "broker-a", Addr: "127.0.0.1:1101", NodeID: "n1", Term: 9, Members: b})
	if n := strings.Count(logs.String(), "registration refused"); n != 2 {
		t.Fatalf("%d refusals logged, want 2:\n%s", n, logs.String())
	}

	// A member change keeps the identity (the sets overlap): n4 replaces n3.
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "broker-a", Addr: "127.0.0.1:1004", BrokerID: 2, NodeID: "n4", Term: 2,
		Members: []string{"n1@127.0.0.1:7001", "n2@127.0.0.1:7002", "n4@127.0.0.1:7004"}})
	// Group b under its own name is fine; a RocketMQ broker (no members) is
	// not checked against members.
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "broker-b", Addr: "127.0.0.1:1101", NodeID: "n1", Term: 9, Members: b})
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "broker-a", Addr: "127.0.0.1:1301", BrokerID: 3})
	if !strings.Contains(logs.String(), "registration accepted after a refusal") {
		t.Fatalf("no acceptance logged:\n%s", logs.String())
	}
	if SplitMembers(" b@2, a@1 ,")[0] != "a@1" {
		t.Fatal("SplitMembers does not sort")
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Followers that take sends are routed as write-only pseudo-brokers: one
// brokerName each, the follower as its only address (id 0), write queues
// the topic's, no read queues, perm 2; a read-only topic and a retry topic
// get none; a shadowed registration (a dead leader's) is none; cluster
// info keeps them out of brokerAddrTable and lists them in raftmqGroups.
func TestRouteWritePaths(t *testing.T) {
	s, cl := start(t, time.Minute)
	topics := map[string]int{"orders": 4, "ro": 2, "%RETRY%cg": 1}
	perms := map[string]int{"ro": 4}
	reg := func(addr string, id int64, node string, term uint64, via bool) {
		register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: addr, BrokerID: id, NodeID: node, Term: term, Topics: topics, Perms: perms, WriteVia: via})
	}
	reg("127.0.0.1:1001", 0, "n1", 5, true) // the leader's flag makes no path
	reg("127.0.0.1:1002", 1, "n2", 5, true)
	reg("127.0.0.1:1003", 2, "n3", 5, true)
	resp := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "orders"}, nil))
	body := string(resp.Body)
	for _, want := range []string{
		`{"brokerName":"g1","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}`,
		`{"brokerName":"g1~n2","readQueueNums":0,"writeQueueNums":4,"perm":2,"topicSysFlag":0}`,
		`{"brokerName":"g1~n3","readQueueNums":0,"writeQueueNums":4,"perm":2,"topicSysFlag":0}`,
		`{"cluster":"c","brokerName":"g1~n2","brokerAddrs":{"0":"127.0.0.1:1002"}}`,
		`{"cluster":"c","brokerName":"g1~n3","brokerAddrs":{"0":"127.0.0.1:1003"}}`,
		`{"cluster":"c","brokerName":"g1","brokerAddrs":{"0":"127.0.0.1:1001","1":"127.0.0.1:1002","2":"127.0.0.1:1003"}}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("route lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "g1~n1") || strings.Contains(body, " ") {
		t.Errorf("route %s", body)
	}
	// What the RocketMQ clients make of it: producers write to 12 queues
	// (the group's 4 three times over, so a hash over them keeps a key on
	// one queue id), consumers read the group's 4.
	rd, err := FetchRoute(context.Background(), cl, s.Addr(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	writeQueues, readQueues := map[string]int{}, map[string]int{}
	for _, qd := range rd.QueueDatas {
		if qd.Perm&PermWrite != 0 {
			writeQueues[qd.BrokerName] += qd.WriteQueueNums
		}
		if qd.Perm&4 != 0 {
			readQueues[qd.BrokerName] += qd.ReadQueueNums
		}
	}
	if len(writeQueues) != 3 || writeQueues["g1~n2"] != 4 || len(readQueues) != 1 || readQueues["g1"] != 4 {
		t.Fatalf("write %v read %v", writeQueues, readQueues)
	}
	for _, topic := range []string{"ro", "%RETRY%cg"} {
		rd, err := FetchRoute(context.Background(), cl, s.Addr(), topic)
		if err != nil || len(rd.QueueDatas) != 1 || len(rd.BrokerDatas) != 1 {
			t.Errorf("%s: want the group only: %+v %v", topic, rd, err)
		}
	}
	ci, err := FetchClusterInfo(context.Background(), cl, s.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ci.BrokerAddrTable) != 1 || len(ci.ClusterAddrTable["c"]) != 1 {
		t.Errorf("pseudo-brokers in the cluster tables: %+v", ci)
	}
	if wp := ci.RaftmqGroups["g1"].WritePaths; len(wp) != 2 || wp["g1~n2"] != "127.0.0.1:1002" || wp["g1~n3"] != "127.0.0.1:1003" {
		t.Errorf("write paths in cluster info: %v", wp)
	}

	// n1 is killed; n2 wins term 6 and registers as 0: its path goes (it
	// leads), n3's stays; the dead n1's shadowed registration is no path.
	reg("127.0.0.1:1002", 0, "n2", 6, true)
	reg("127.0.0.1:1003", 1, "n3", 6, true)
	g := s.Groups()["g1"]
	if len(g.WritePaths) != 1 || g.WritePaths[0] != (WritePath{Name: "g1~n3", NodeID: "n3", Addr: "127.0.0.1:1003"}) {
		t.Errorf("after failover: %+v", g.WritePaths)
	}
	// The leader lists the followers it hears from: n3 is silent (dead,
	// hung): its registration lives on until the expiry, its path goes.
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1002", BrokerID: 0, NodeID: "n2", Term: 6, Topics: topics, Perms: perms,
		Live: []string{"n1"}, LiveKnown: true})
	if g := s.Groups()["g1"]; len(g.WritePaths) != 0 || g.Addrs[1] != "127.0.0.1:1003" {
		t.Errorf("silent follower: %+v", g)
	}
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "g1", Addr: "127.0.0.1:1002", BrokerID: 0, NodeID: "n2", Term: 6, Topics: topics, Perms: perms,
		Live: []string{"n1", "n3"}, LiveKnown: true})
	if g := s.Groups()["g1"]; len(g.WritePaths) != 1 {
		t.Errorf("follower heard again: %+v", g.WritePaths)
	}
	// A group may not be named like a write path.
	if resp := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.RegisterBroker, map[string]string{"brokerName": "g1~n9", "brokerAddr": "127.0.0.1:1009"}, nil)); resp.Code == remoting.Success ||
		!strings.Contains(resp.Remark, "reserved") {
		t.Errorf("a brokerName with ~: %d %s", resp.Code, resp.Remark)
	}
	// A follower without the flag is no path.
	reg("127.0.0.1:1003", 1, "n3", 6, false)
	if g := s.Groups()["g1"]; len(g.WritePaths) != 0 {
		t.Errorf("without the flag: %+v", g.WritePaths)
	}
	rd, err = FetchRoute(context.Background(), cl, s.Addr(), "orders")
	if err != nil || len(rd.QueueDatas) != 1 || rd.BrokerDatas[0].BrokerName != "g1" {
		t.Errorf("route without paths: %+v %v", rd, err)
	}
}
