package namesrv

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// A name server with an external listener answers each listener with the
// addresses of its kind: the internal one with what nodes registered as
// brokerAddr and raftmqClientAddr (the nodes' network), the external one
// with their external addresses (published ports), write paths included;
// a node that registered no external address is handed out as it is on
// both.
func TestExternalListenerHandsOutExternalAddresses(t *testing.T) {
	s, err := Start(Config{Listen: "127.0.0.1:0", ListenExternal: "127.0.0.1:0", Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient()
	defer func() { cl.Close(); s.Close() }()
	if s.ExternalAddr() == "" || s.ExternalAddr() == s.Addr() {
		t.Fatalf("external listener %q beside %q", s.ExternalAddr(), s.Addr())
	}
	topics := map[string]int{"orders": 2}
	members := []string{"n1@n1:7000", "n2@n2:7000", "n3@n3:7000"}
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "ga", Addr: "n1:10911", ExternalAddr: "127.0.0.1:11011",
		ClientAddr: "n1:9000", ExternalClientAddr: "127.0.0.1:9101", BrokerID: 0, NodeID: "n1", Term: 2, Topics: topics, Members: members,
		LiveKnown: true, Live: []string{"n2", "n3"}})
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "ga", Addr: "n2:10911", ExternalAddr: "127.0.0.1:11021",
		ClientAddr: "n2:9000", ExternalClientAddr: "127.0.0.1:9102", BrokerID: 1, NodeID: "n2", Term: 2, Topics: topics, Members: members, WriteVia: true})
	// An older node: internal addresses only.
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "ga", Addr: "n3:10911", ClientAddr: "n3:9000",
		BrokerID: 2, NodeID: "n3", Term: 2, Topics: topics, Members: members, WriteVia: true})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, addr       string
		brokers, clients map[int64]string
		writePaths       map[string]string
	}{
		{"internal", s.Addr(),
			map[int64]string{0: "n1:10911", 1: "n2:10911", 2: "n3:10911"},
			map[int64]string{0: "n1:9000", 1: "n2:9000", 2: "n3:9000"},
			map[string]string{"ga~n2": "n2:10911", "ga~n3": "n3:10911"}},
		{"external", s.ExternalAddr(),
			map[int64]string{0: "127.0.0.1:11011", 1: "127.0.0.1:11021", 2: "n3:10911"},
			map[int64]string{0: "127.0.0.1:9101", 1: "127.0.0.1:9102", 2: "n3:9000"},
			map[string]string{"ga~n2": "127.0.0.1:11021", "ga~n3": "n3:10911"}},
	} {
		ci, err := FetchClusterInfo(ctx, cl, tc.addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		gi := ci.RaftmqGroups["ga"]
		if !sameMap(ci.BrokerAddrTable["ga"].BrokerAddrs, tc.brokers) || !sameMap(gi.ClientAddrs, tc.clients) || !sameMap(gi.WritePaths, tc.writePaths) {
			t.Errorf("%s listener: cluster info brokers %v clients %v write paths %v; want %v %v %v", tc.name,
				ci.BrokerAddrTable["ga"].BrokerAddrs, gi.ClientAddrs, gi.WritePaths, tc.brokers, tc.clients, tc.writePaths)
		}
		rd, err := FetchRoute(ctx, cl, tc.addr, "orders")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, bd := range rd.BrokerDatas {
			got[bd.BrokerName] = bd.BrokerAddrs[0]
		}
		want := map[string]string{"ga": tc.brokers[0], "ga~n2": tc.writePaths["ga~n2"], "ga~n3": tc.writePaths["ga~n3"]}
		if !sameMap(got, want) {
			t.Errorf("%s listener: route of orders %v, want %v", tc.name, got, want)
		}
	}
	// A registration keeps its place by its internal address: registering
	// again does not add a node.
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "ga", Addr: "n2:10911", ExternalAddr: "127.0.0.1:11021",
		ClientAddr: "n2:9000", ExternalClientAddr: "127.0.0.1:9102", BrokerID: 1, NodeID: "n2", Term: 2, Topics: topics, Members: members, WriteVia: true})
	if n := s.reg.count(); n != 3 {
		t.Errorf("%d registrations after a renewal, want 3", n)
	}
	req, _ := RegisterRequest(Registration{Cluster: "c", Group: "gb", Addr: "b1:10911", ExternalAddr: "no-port", BrokerID: 0, NodeID: "b1"})
	if resp := invoke(t, cl, s.Addr(), req); resp.Code == remoting.Success {
		t.Errorf("a registration with external address %q was taken", "no-port")
	}
}

func sameMap[K comparable](a, b map[K]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A group whose nodes serve no remoting port is in raftmq's cluster info
// (its client addresses, its cluster) and in no RocketMQ table or route.
func TestGroupWithoutRemotingIsOnlyInRaftmqRoutes(t *testing.T) {
	s, cl := start(t, time.Minute)
	topics := map[string]int{"orders": 2}
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "ga", Addr: "127.0.0.1:10911", ClientAddr: "127.0.0.1:9001",
		BrokerID: 0, NodeID: "a1", Term: 1, Topics: topics})
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "gb", Addr: "127.0.0.1:9101", ClientAddr: "127.0.0.1:9101", NoRemoting: true,
		BrokerID: 0, NodeID: "b1", Term: 1, Topics: topics})
	register(t, cl, s.Addr(), Registration{Cluster: "c", Group: "gb", Addr: "127.0.0.1:9102", ClientAddr: "127.0.0.1:9102", NoRemoting: true,
		WriteVia: true, BrokerID: 1, NodeID: "b2", Term: 1, Topics: topics})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ci, err := FetchClusterInfo(ctx, cl, s.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ci.BrokerAddrTable["gb"]; ok || len(ci.ClusterAddrTable["c"]) != 1 {
		t.Errorf("RocketMQ tables name gb: %+v %+v", ci.BrokerAddrTable, ci.ClusterAddrTable)
	}
	gb := ci.RaftmqGroups["gb"]
	if gb.Cluster != "c" || !sameMap(gb.ClientAddrs, map[int64]string{0: "127.0.0.1:9101", 1: "127.0.0.1:9102"}) || gb.WritePaths != nil {
		t.Errorf("raftmq's view of gb: %+v", gb)
	}
	rd, err := FetchRoute(ctx, cl, s.Addr(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(rd.BrokerDatas) != 1 || rd.BrokerDatas[0].BrokerName != "ga" || len(rd.QueueDatas) != 1 {
		t.Errorf("RocketMQ route of orders: %+v, want ga only", rd)
	}
	req, _ := RegisterRequest(Registration{Cluster: "c", Group: "gc", Addr: "127.0.0.1:9201", NoRemoting: true, NodeID: "c1"})
	if resp := invoke(t, cl, s.Addr(), req); resp.Code == remoting.Success {
		t.Error("a registration without remoting and without a client address was taken")
	}
}
