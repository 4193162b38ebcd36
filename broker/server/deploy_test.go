package server_test

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestDeployedQueriesUseExistingMetrics: every metric the shipped alert
// rules and dashboard query is exported by a running group that took
// writes, served a consumer group and committed its offsets (a renamed or
// removed metric would leave an alert that never fires).
func TestDeployedQueriesUseExistingMetrics(t *testing.T) {
	want := map[string][]string{}
	name := regexp.MustCompile(`raftmq_[a-z0-9_]+`)
	for _, f := range []string{"../../deploy/prometheus/raftmq-alerts.yml", "../../deploy/grafana/raftmq-dashboard.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllString(string(b), -1) {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				m = strings.TrimSuffix(m, suf)
			}
			want[m] = append(want[m], f)
		}
	}
	if len(want) < 10 {
		t.Fatalf("found only %d metric names in the deploy files: %v", len(want), want)
	}

	c := newCluster(t, 3, nil)
	c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "ops", 2, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()
	for i := 0; i < 20; i++ {
		if _, err := p.Send(ctx, "ops", client.Message{Body: []byte("m")}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := client.DefaultConsumerConfig("ops", "ops-group")
	cfg.Wait = 100 * time.Millisecond
	cfg.CommitInterval = 10 * time.Millisecond
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 10 {
		recs, err := cons.Poll(ctx)
		if err != nil && !client.Retryable(err) {
			t.Fatal(err)
		}
		got += len(recs)
	}
	if err := cons.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close(ctx)

	// Follower lag and the consumer lag come with the leader's next view
	// of its followers and the replicated commit.
	have := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for _, s := range c.Nodes() {
			mfs, err := s.Broker().Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				have[mf.GetName()] = true
			}
		}
		all := true
		for m := range want {
			all = all && have[m]
		}
		if all || time.Now().After(deadline) {
			break
		}
	}
	var missing []string
	for m, files := range want {
		if !have[m] {
			missing = append(missing, m+" ("+strings.Join(files, ", ")+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("queried but not exported: %v", missing)
	}
}
