package cluster

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// A group whose client has just found no leader or no node
// (client.Client.Trouble) gets no unpinned message while another group
// takes writes, for SlowSend; when it is the only group left it still
// does.
func TestPickLeavesOutATroubledGroup(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing answers there any more

	c, err := New(Config{NameServers: []string{dead}, SlowSend: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ga, err := client.New(client.Config{Servers: []string{dead}, RequestTimeout: 200 * time.Millisecond, RetryTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.clients["ga"] = ga // closed by c.Close
	c.mu.Unlock()

	r := &Route{Topic: "t", Groups: map[string]int{"ga": 2, "gb": 2},
		Queues: []Queue{{Group: "ga", Queue: 0}, {Group: "ga", Queue: 1}, {Group: "gb", Queue: 0}, {Group: "gb", Queue: 1}}}
	p := c.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	count := func(r *Route) map[string]int {
		n := map[string]int{}
		for i := 0; i < 8; i++ {
			q, ok := p.pick(r, nil)
			if !ok {
				t.Fatal("no queue picked")
			}
			n[q.Group]++
		}
		return n
	}
	if n := count(r); n["ga"] != 4 || n["gb"] != 4 {
		t.Fatalf("before any trouble: %v, want 4 each", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := ga.CreateTopic(ctx, "t", 1, true); err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	if ga.Trouble().IsZero() {
		t.Fatal("the failed call left no trouble")
	}
	if n := count(r); n["ga"] != 0 || n["gb"] != 8 {
		t.Fatalf("ga troubled: %v, want all on gb", n)
	}
	only := &Route{Topic: "t", Groups: map[string]int{"ga": 2}, Queues: r.Queues[:2]}
	if n := count(only); n["ga"] != 8 {
		t.Fatalf("ga troubled and alone: %v, want all on ga", n)
	}
}

// When every group is avoided, a group that was only slow gets the
// message before one that is down (a failed send or probe), whichever
// penalty ends first; among groups alike, the one whose penalty ends
// first.
func TestPickPrefersASlowGroupToADownOne(t *testing.T) {
	c, err := New(Config{NameServers: []string{"127.0.0.1:1"}, FaultPenalty: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := &Route{Topic: "t", Groups: map[string]int{"ga": 1, "gb": 1}, Queues: []Queue{{Group: "ga", Queue: 0}, {Group: "gb", Queue: 0}}}
	p := c.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	p.markFaulty("ga", true)
	p.markFaulty("gb", false) // later: its penalty ends last
	if q, _ := p.pick(r, nil); q.Group != "gb" {
		t.Fatalf("picked %s with ga down and gb slow, want gb", q.Group)
	}
	p.markFaulty("gb", false) // a slow send does not clear down
	p.markFaulty("ga", false)
	if q, _ := p.pick(r, nil); q.Group != "gb" {
		t.Fatalf("picked %s: ga stays down after a slow mark, want gb", q.Group)
	}
	p.clearFault("ga")
	p.markFaulty("ga", false)
	p.markFaulty("gb", false)
	if q, _ := p.pick(r, nil); q.Group != "ga" {
		t.Fatalf("picked %s with both slow, want ga (its penalty ends first)", q.Group)
	}
}
