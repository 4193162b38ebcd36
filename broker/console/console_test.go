package console

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/broker"
)

func fakeStatus() (broker.Status, error) {
	return broker.Status{Group: "g1", GroupID: "5c0e9d2a41f3b87e", Term: 4, LeaderID: "n1", AnsweredBy: "n2", Nodes: []broker.NodeStatus{
		{ID: "n1", Role: "leader", Healthy: true, Term: 4, Applied: 10, Commit: 10, Last: 10, HTTPAddr: "127.0.0.1:1"},
		{ID: "n2", Role: "follower", Healthy: true, Term: 4, Applied: 7, Commit: 10, Last: 10, Lag: 3, HTTPAddr: "127.0.0.1:2"},
	}}, nil
}

func TestConsoleTimeline(t *testing.T) {
	c := New(Config{Status: fakeStatus, Keep: 3})
	c.LeaderChanged("", 1) // no leader before any: nothing to show
	c.LeaderChanged("n1", 2)
	c.LeaderChanged("n1", 2) // the ready event of the same leader
	c.LeaderChanged("", 2)
	c.LeaderChanged("n2", 3)
	c.LeaderChanged("n3", 4)
	var got []string
	for _, ch := range c.Timeline() {
		got = append(got, ch.Leader)
	}
	if strings.Join(got, ",") != ",n2,n3" {
		t.Fatalf("timeline %q, want the last 3 changes: no leader, n2, n3", got)
	}
	if tl := c.Timeline(); tl[2].Term != 4 || tl[1].Time.After(tl[2].Time) {
		t.Fatalf("timeline %+v: want term 4 last, in time order", tl)
	}
}

// readEvent reads one SSE data line.
func readEvent(t *testing.T, r *bufio.Reader) Snapshot {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read event: %v", err)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var s Snapshot
			if err := json.Unmarshal([]byte(d), &s); err != nil {
				t.Fatalf("event %q: %v", d, err)
			}
			return s
		}
	}
}

func TestConsoleEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := New(Config{Status: fakeStatus, Metrics: reg, Every: time.Hour}) // only the first event and leader changes
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/console/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	if o := resp.Header.Get("Access-Control-Allow-Origin"); o != "*" {
		t.Fatalf("Access-Control-Allow-Origin %q: a page from another node of the group could not read the stream", o)
	}
	r := bufio.NewReader(resp.Body)
	s := readEvent(t, r)
	if s.Group != "g1" || s.GroupID != "5c0e9d2a41f3b87e" || s.Leader != "n1" || s.AnsweredBy != "n2" || len(s.Nodes) != 2 || s.Nodes[1].Lag != 3 || s.Nodes[0].HTTPAddr != "127.0.0.1:1" {
		t.Fatalf("first snapshot %+v", s)
	}
	waitStreams(t, c, 1)
	at := time.Now()
	c.LeaderChanged("n2", 5)
	s = readEvent(t, r)
	if len(s.Timeline) != 1 || s.Timeline[0].Leader != "n2" || s.Timeline[0].Term != 5 {
		t.Fatalf("snapshot after a leader change: timeline %+v", s.Timeline)
	}
	if d := time.Since(at); d > 5*time.Second {
		t.Fatalf("the leader change was pushed after %s, not at once", d)
	}
	mfs, _ := reg.Gather()
	if len(mfs) != 1 || mfs[0].GetName() != "raftmq_console_streams" || mfs[0].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("metrics %v, want raftmq_console_streams 1", mfs)
	}
	c.Close()
	if _, err := io.ReadAll(r); err != nil {
		t.Fatalf("stream after Close: %v", err)
	}
	waitStreams(t, c, 0)
}

func waitStreams(t *testing.T, c *Console, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); c.Streams() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d open streams, want %d", c.Streams(), n)
		}
	}
}

func TestConsoleRates(t *testing.T) {
	var m rateMeter
	t0 := time.Unix(100, 0)
	if p, c := m.add(t0, 50, 10); p != 0 || c != 0 {
		t.Fatalf("first sample: %v %v", p, c)
	}
	m.add(t0.Add(100*time.Millisecond), 1000, 1000) // too soon: the rate is kept
	if p, c := m.add(t0.Add(2*time.Second), 250, 30); p != 100 || c != 10 {
		t.Fatalf("rates %v %v, want 100 and 10 a second", p, c)
	}
}

// TestConsoleAssets checks the page stays light and self-contained: under
// 200 KB with every asset and a snapshot, and nothing loaded from another
// host.
func TestConsoleAssets(t *testing.T) {
	c := New(Config{Status: fakeStatus})
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	total := 0
	for _, p := range []string{"/", "/console.css", "/console.js", "/console/snapshot"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", p, resp.Status)
		}
		total += len(b)
	}
	t.Logf("the page, its assets and one snapshot: %d bytes", total)
	if total >= 200<<10 {
		t.Fatalf("the overview is %d bytes, over 200 KB", total)
	}
	remote := regexp.MustCompile(`(src|href)=["']?(https?:)?//|url\(\s*["']?(https?:)?//|import\s|fetch\(\s*["']https?:`)
	fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := assets.ReadFile(p)
		if m := remote.Find(b); m != nil {
			t.Errorf("%s loads from another host: %q", p, m)
		}
		return nil
	})
}

// The overview's reads come from the broker's pull counters: messages
// served by role, and suggestions by target and reason, most given first.
func TestReadsFromCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	served := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_pull_messages_total"}, []string{"role"})
	sugg := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_pull_suggestions_total"}, []string{"target", "reason"})
	reg.MustRegister(served, sugg)
	served.WithLabelValues("leader").Add(25)
	served.WithLabelValues("follower").Add(75)
	sugg.WithLabelValues("follower", "leader_loaded").Add(9)
	sugg.WithLabelValues("self", "caught_up").Add(3)
	_, consumed, r := counters(reg)
	if consumed != 100 || r.AsLeader != 25 || r.AsFollower != 75 || r.FollowerShare != 0.75 {
		t.Fatalf("consumed %v, reads %+v", consumed, r)
	}
	if len(r.Suggestions) != 2 || r.Suggestions[0].Reason != "leader_loaded" || r.Suggestions[0].Target != "follower" || r.Suggestions[0].Count != 9 {
		t.Fatalf("suggestions %+v", r.Suggestions)
	}
}

// The cluster view is asked once for every stream within clusterEvery; a
// group that did not answer is shown with its error, the others as they
// answered, and the question's own failure is the snapshot's.
func TestConsoleClusterViewShared(t *testing.T) {
	asked := 0
	var fail error
	c := New(Config{Status: fakeStatus, Cluster: func(ctx context.Context) ([]GroupStatus, error) {
		asked++
		if fail != nil {
			return nil, fail
		}
		st, _ := fakeStatus()
		return []GroupStatus{{Name: "g1", Cluster: "c", Status: st}, {Name: "g2", Cluster: "c", Err: errors.New("no node answered")}}, nil
	}})
	defer c.Close()
	s := c.Snapshot()
	if len(s.Cluster) != 2 || s.Cluster[0].Leader != "n1" || len(s.Cluster[0].Nodes) != 2 || s.Cluster[1].Error != "no node answered" || s.ClusterError != "" {
		t.Fatalf("cluster view %+v (error %q)", s.Cluster, s.ClusterError)
	}
	c.Snapshot()
	if asked != 1 {
		t.Fatalf("asked %d times within %s, want once", asked, clusterEvery)
	}
	c.clusterAt = time.Time{} // as if clusterEvery had passed
	fail = errors.New("no name server answered")
	if s := c.Snapshot(); s.ClusterError != "no name server answered" || len(s.Cluster) != 0 {
		t.Fatalf("failed question: cluster %+v, error %q", s.Cluster, s.ClusterError)
	}
	if s := New(Config{Status: fakeStatus}).Snapshot(); s.Cluster != nil || s.ClusterError != "" {
		t.Fatalf("a node without name servers shows a cluster: %+v %q", s.Cluster, s.ClusterError)
	}
}
