package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/console"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/internal/headless"
	"github.com/raftmq/raftmq/namesrv"
)

// TestConsoleClusterView starts two one-node groups registered with one
// name server: the overview of either node lists both groups with their
// leaders, in its snapshot and on the page in headless Chromium, linking
// to the other group's console; when the other group's node dies, the
// page shows that group's leader unknown while its own stays.
func TestConsoleClusterView(t *testing.T) {
	bin, err := headless.Find()
	if err != nil {
		t.Fatalf("the console's browser test needs Chromium: %v", err)
	}
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	group := func(name string) *cluster {
		return newCluster(t, 1, func(i int, cfg *server.Config) {
			cfg.HTTP = freeAddr(t)
			cfg.Broker.HTTPAddr = cfg.HTTP
			cfg.Broker.Group = name
			cfg.RemotingConfig.NameServers = []string{ns.Addr()}
			cfg.RemotingConfig.RegisterPeriod = time.Second
		})
	}
	ga, gb := group("ga"), group("gb")
	ga.Leader()
	gb.Leader()

	snapshot := func() console.Snapshot {
		t.Helper()
		resp, err := http.Get("http://" + ga.Config(0).HTTP + "/console/snapshot")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s console.Snapshot
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	var snap console.Snapshot
	waitFor(t, 30*time.Second, "both groups with their leaders in ga's cluster view", func() bool {
		snap = snapshot()
		return len(snap.Cluster) == 2 && snap.Cluster[0].Leader != "" && snap.Cluster[1].Leader != ""
	})
	if a, b := snap.Cluster[0], snap.Cluster[1]; a.Name != "ga" || b.Name != "gb" || len(b.Nodes) != 1 || b.Nodes[0].HTTPAddr != gb.Config(0).HTTP {
		t.Fatalf("cluster view: %+v", snap.Cluster)
	}

	br, err := headless.Start(bin, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	page, err := br.Open(ctx, "http://"+ga.Config(0).HTTP+"/", 1280, 800)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Leader string `json:"leader"`
		Link   string `json:"link"`
	}
	rows := func() map[string]row {
		out := map[string]row{}
		page.Eval(ctx, `(() => {
  const out = {};
  document.querySelectorAll("#cluster tbody tr").forEach(tr => {
    const a = tr.querySelector("a");
    out[tr.id.replace(/^group-/, "")] = {leader: tr.cells[2].textContent, link: a ? a.textContent : ""};
  });
  return out;
})()`, &out)
		return out
	}
	var got map[string]row
	waitFor(t, 20*time.Second, "both groups on ga's page", func() bool {
		got = rows()
		return len(got) == 2 && got["ga"].Leader == ga.Config(0).Raft.ID && got["gb"].Leader == gb.Config(0).Raft.ID
	})
	if got["gb"].Link != gb.Config(0).HTTP || got["ga"].Link != "" {
		t.Fatalf("links on the page: %+v (gb's console is at %s)", got, gb.Config(0).HTTP)
	}
	screenshot(ctx, t, page, "cluster.png")

	// A dead group's registration lapses when its connection to the name
	// server closes (then it leaves the list), or later by expiry (until
	// then no node of it answers).
	gb.Kill(0)
	waitFor(t, 20*time.Second, "gb's leader unknown or gb gone on ga's page", func() bool {
		got = rows()
		b, listed := got["gb"]
		return (!listed || b.Leader == "unknown") && got["ga"].Leader == ga.Config(0).Raft.ID
	})
	t.Logf("after gb's node died, ga's page shows %+v", got)
}
