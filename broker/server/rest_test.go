package server_test

import (
	"testing"
	"time"
)

// At rest the nodes exchange their state more slowly (broker/pace.go):
// the leader must go on seeing its followers healthy, and still stop
// seeing one that died.
func TestFollowersStayHealthyAtRest(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	healthy := func() (int, map[string]bool) {
		st, err := c.Node(l).Broker().Status()
		if err != nil {
			return 0, nil
		}
		n, by := 0, map[string]bool{}
		for _, node := range st.Nodes {
			by[node.ID] = node.Healthy
			if node.Healthy {
				n++
			}
		}
		return n, by
	}
	waitFor(t, 10*time.Second, "three healthy nodes", func() bool { n, _ := healthy(); return n == 3 })
	// The harness's StatePeriod is 50 ms: the slow pace starts after 0.5 s
	// and polls every 250 ms.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if n, by := healthy(); n != 3 {
			t.Fatalf("a node looked unhealthy at rest: %v", by)
		}
	}
	f := (l + 1) % 3
	id := c.Node(f).Node().ID()
	c.Kill(f)
	killed := time.Now()
	waitFor(t, 5*time.Second, "the killed follower seen unhealthy", func() bool { _, by := healthy(); return !by[id] })
	t.Logf("killed follower seen unhealthy after %s", time.Since(killed).Round(time.Millisecond))
}
