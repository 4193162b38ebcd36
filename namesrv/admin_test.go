package namesrv

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// TestDeleteTopicInNamesrv: DELETE_TOPIC_IN_NAMESRV drops the topic from
// the routes of every group (of clusterName, when given) until a node
// registers it again, as RocketMQ's RouteInfoManager.deleteTopic; the
// topic list drops it too; a request without a topic is refused by name.
func TestDeleteTopicInNamesrv(t *testing.T) {
	s, cl := start(t, time.Minute)
	reg := func(group, addr, cluster string) Registration {
		return Registration{Cluster: cluster, Group: group, Addr: addr, BrokerID: 0, NodeID: "n-" + group, Term: 1,
			Topics: map[string]int{"orders": 4, "audit": 2}, Perms: map[string]int{"orders": 4}}
	}
	register(t, cl, s.Addr(), reg("g1", "127.0.0.1:1001", "c1"))
	register(t, cl, s.Addr(), reg("g2", "127.0.0.1:1002", "c2"))
	route := func(topic string) int32 {
		return invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)).Code
	}
	del := func(ext map[string]string) *remoting.Command {
		return invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.DeleteTopicInNamesrv, ext, nil))
	}
	if r := del(map[string]string{}); r.Code != remoting.SystemError || r.Remark != "delete topic: field topic: empty" {
		t.Fatalf("no topic: %d %q", r.Code, r.Remark)
	}
	if r := del(map[string]string{"topic": "orders", "clusterName": "c1"}); r.Code != remoting.Success {
		t.Fatalf("delete in c1: %d %s", r.Code, r.Remark)
	}
	if g := s.Groups(); g["g1"].Topics["orders"] != 0 || g["g2"].Topics["orders"] != 4 || g["g1"].Topics["audit"] != 2 {
		t.Fatalf("after delete in c1: g1 %v, g2 %v", g["g1"].Topics, g["g2"].Topics)
	}
	if r := del(map[string]string{"topic": "orders"}); r.Code != remoting.Success {
		t.Fatalf("delete: %d %s", r.Code, r.Remark)
	}
	if c := route("orders"); c != remoting.TopicNotExist {
		t.Fatalf("route of a deleted topic: code %d", c)
	}
	if c := route("audit"); c != remoting.Success {
		t.Fatalf("route of another topic: code %d", c)
	}
	list := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetAllTopicListFromNS, nil, nil))
	if string(list.Body) != `{"topicList":["audit"]}` {
		t.Fatalf("topic list: %s", list.Body)
	}
	register(t, cl, s.Addr(), reg("g1", "127.0.0.1:1001", "c1"))
	if c := route("orders"); c != remoting.Success {
		t.Fatalf("route after the group registered the topic again: code %d", c)
	}
}

// TestTopicListsForAdminTools: GET_TOPICS_BY_CLUSTER lists one cluster's
// topics, GET_SYSTEM_TOPIC_LIST_FROM_NS the cluster and group names and
// the broker's own topics, each in RocketMQ's TopicList shape; the
// cluster info has the tables mqadmin clusterList reads.
func TestTopicListsForAdminTools(t *testing.T) {
	s, cl := start(t, time.Minute)
	register(t, cl, s.Addr(), Registration{Cluster: "c1", Group: "g1", Addr: "127.0.0.1:1001", BrokerID: 0, NodeID: "a", Term: 1,
		Topics: map[string]int{"orders": 4, "%RETRY%cg": 1, "SCHEDULE_TOPIC_XXXX": 18}})
	register(t, cl, s.Addr(), Registration{Cluster: "c1", Group: "g1", Addr: "127.0.0.1:1002", BrokerID: 1, NodeID: "b", Term: 1,
		Topics: map[string]int{"orders": 4}})
	register(t, cl, s.Addr(), Registration{Cluster: "c2", Group: "g2", Addr: "127.0.0.1:2001", BrokerID: 0, NodeID: "c", Term: 1,
		Topics: map[string]int{"audit": 1}})
	type topicList struct {
		TopicList  []string `json:"topicList"`
		BrokerAddr string   `json:"brokerAddr"`
	}
	decode := func(r *remoting.Command) topicList {
		t.Helper()
		if r.Code != remoting.Success {
			t.Fatalf("code %d: %s", r.Code, r.Remark)
		}
		var l topicList
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatalf("%v: %s", err, r.Body)
		}
		return l
	}
	l := decode(invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetTopicsByCluster, map[string]string{"cluster": "c1"}, nil)))
	if fmt.Sprint(l.TopicList) != "[%RETRY%cg SCHEDULE_TOPIC_XXXX orders]" {
		t.Fatalf("topics of c1: %v", l.TopicList)
	}
	if l := decode(invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetTopicsByCluster, map[string]string{"cluster": "none"}, nil))); len(l.TopicList) != 0 {
		t.Fatalf("topics of an unknown cluster: %v", l.TopicList)
	}
	l = decode(invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetSystemTopicListFromNS, nil, nil)))
	if fmt.Sprint(l.TopicList) != "[SCHEDULE_TOPIC_XXXX c1 c2 g1 g2]" || l.BrokerAddr != "127.0.0.1:1001" {
		t.Fatalf("system topics: %+v", l)
	}
	// RocketMQ's ClusterInfo (remoting/.../protocol/route/ClusterInfo.java)
	// as clusterList reads it.
	var ci struct {
		BrokerAddrTable map[string]struct {
			Cluster     string           `json:"cluster"`
			BrokerName  string           `json:"brokerName"`
			BrokerAddrs map[int64]string `json:"brokerAddrs"`
		} `json:"brokerAddrTable"`
		ClusterAddrTable map[string][]string `json:"clusterAddrTable"`
	}
	r := invoke(t, cl, s.Addr(), remoting.NewRequest(remoting.GetBrokerClusterInfo, nil, nil))
	if err := json.Unmarshal(r.Body, &ci); err != nil {
		t.Fatal(err)
	}
	if b := ci.BrokerAddrTable["g1"]; b.Cluster != "c1" || b.BrokerName != "g1" || b.BrokerAddrs[0] != "127.0.0.1:1001" || b.BrokerAddrs[1] != "127.0.0.1:1002" ||
		fmt.Sprint(ci.ClusterAddrTable) != "map[c1:[g1] c2:[g2]]" {
		t.Fatalf("cluster info: %s", r.Body)
	}
}

// TestKVAndConfigCodes: GET_KV_CONFIG is QUERY_NOT_FOUND (no key held),
// PUT/DELETE_KV_CONFIG and UPDATE_NAMESRV_CONFIG are refused naming why,
// GET_NAMESRV_CONFIG answers Properties text.
func TestKVAndConfigCodes(t *testing.T) {
	s, cl := start(t, time.Minute)
	req := func(code int32, ext map[string]string, body []byte) *remoting.Command {
		return invoke(t, cl, s.Addr(), remoting.NewRequest(code, ext, body))
	}
	if r := req(remoting.GetKVConfig, map[string]string{"namespace": "ORDER_TOPIC_CONFIG", "key": "t"}, nil); r.Code != remoting.QueryNotFound ||
		r.Remark != "No config item, Namespace: ORDER_TOPIC_CONFIG Key: t" {
		t.Fatalf("get kv: %d %q", r.Code, r.Remark)
	}
	for _, code := range []int32{remoting.PutKVConfig, remoting.DeleteKVConfig} {
		if r := req(code, map[string]string{"namespace": "n", "key": "k", "value": "v"}, nil); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "keeps no KV config") {
			t.Fatalf("code %d: %d %q", code, r.Code, r.Remark)
		}
	}
	if r := req(remoting.UpdateNamesrvConfig, nil, []byte("listenPort=1\n")); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "changes no setting at run time") {
		t.Fatalf("update config: %d %q", r.Code, r.Remark)
	}
	r := req(remoting.GetNamesrvConfig, nil, nil)
	if r.Code != remoting.Success || !strings.Contains(string(r.Body), "raftmqAuth=disabled\n") || !strings.Contains(string(r.Body), "listenPort=0\n") {
		t.Fatalf("get config: %d %q %s", r.Code, r.Remark, r.Body)
	}
}

// The table of every RocketMQ request code in docs/rocketmq.md says what
// the name server answers: a code marked served (or refused by name) is
// not answered 3, a code marked 3 is.
func TestDocumentedNameServerCodesMatch(t *testing.T) {
	doc, err := os.ReadFile("../docs/rocketmq.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "### Every RocketMQ request code")
	if !ok {
		t.Fatal("docs/rocketmq.md has no table of every request code")
	}
	s, cl := start(t, time.Minute)
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 6 {
			continue
		}
		code, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			continue
		}
		cell := strings.TrimSpace(cells[4])
		if code == int(remoting.RegisterBroker) || code == int(remoting.UnregisterBroker) || cell == "—" {
			continue // registrations have their own tests; broker-to-client codes are never sent here
		}
		rows++
		served := strings.HasPrefix(cell, "served") || strings.HasPrefix(cell, "refused")
		r := invoke(t, cl, s.Addr(), remoting.NewRequest(int32(code), map[string]string{}, nil))
		if served == (r.Code == remoting.RequestCodeNotSupported) {
			t.Errorf("code %d documented as %q, answered %d: %q", code, cell, r.Code, r.Remark)
		}
	}
	if rows < 120 {
		t.Fatalf("%d rows in the table", rows)
	}
}
