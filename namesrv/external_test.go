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
		ci, err := FetchClusterInfo(ctx, cl, tc.addr)
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
