package namesrv

import (
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
