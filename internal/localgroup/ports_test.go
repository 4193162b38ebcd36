package localgroup

import "testing"

func TestPortBaseGivesFixedPorts(t *testing.T) {
	g, err := New(Config{Nodes: 2, PortBase: 23000, Remoting: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	want := map[string][4]string{
		"n1": {"127.0.0.1:23000", "127.0.0.1:23001", "127.0.0.1:23002", "127.0.0.1:23003"},
		"n2": {"127.0.0.1:23010", "127.0.0.1:23011", "127.0.0.1:23012", "127.0.0.1:23013"},
	}
	for id, w := range want {
		n := g.Node(id)
		if n == nil {
			t.Fatalf("no node %s", id)
		}
		if got := [4]string{n.Raft, n.Client, n.HTTP, n.Remoting}; got != w {
			t.Errorf("%s: %v, want %v", id, got, w)
		}
	}
}
