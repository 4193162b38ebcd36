package remoting

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// A group's members change when a client id joins, leaves by its
// connection's close, unregisters or stops heartbeating past the expiry;
// a heartbeat of a known member, or one on a new connection, changes
// nothing.
func TestMembershipChanges(t *testing.T) {
	var mu sync.Mutex
	var got []string
	c := newClients(50 * time.Millisecond)
	c.changed = func(g string) {
		mu.Lock()
		got = append(got, g)
		mu.Unlock()
	}
	take := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		slices.Sort(out)
		return out
	}
	c.heard("g", "a", 1, nil)
	c.heard("g", "b", 2, nil)
	c.heard("h", "a", 1, nil)
	if g := take(); !slices.Equal(g, []string{"g", "g", "h"}) {
		t.Fatalf("joins: %v", g)
	}
	c.heard("g", "a", 1, nil)
	c.heard("g", "b", 3, nil) // reconnected
	if g := take(); len(g) != 0 {
		t.Fatalf("known members: %v", g)
	}
	c.closed(1) // a's connection: a leaves g and h
	if g := take(); !slices.Equal(g, []string{"g", "h"}) {
		t.Fatalf("close: %v", g)
	}
	c.closed(2) // b moved to 3: no change
	if g := take(); len(g) != 0 {
		t.Fatalf("close of a connection b left: %v", g)
	}
	c.heard("g", "c", 4, nil)
	take()
	c.unregister("c")
	if g := take(); !slices.Equal(g, []string{"g"}) {
		t.Fatalf("unregister: %v", g)
	}
	time.Sleep(60 * time.Millisecond)
	c.expire() // b stopped heartbeating
	if g := take(); !slices.Equal(g, []string{"g"}) {
		t.Fatalf("expiry: %v", g)
	}
	if ids := c.list("g"); len(ids) != 0 {
		t.Fatalf("members after the expiry: %v", ids)
	}
}
