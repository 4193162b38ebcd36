package groups

import (
	"fmt"
	"testing"
	"time"
)

// TestLockTable: one holder per queue; renewals keep it; it lapses after the
// lease or on unlock; a new term grants nothing for half a lease.
func TestLockTable(t *testing.T) {
	var lt Locks
	const lease = 60 * time.Second
	t0 := time.Unix(1000, 0)
	q1, q2 := QueueRef{"t", 1}, QueueRef{"t", 2}
	got := func(r []QueueRef) string { return fmt.Sprint(r) }
	// A term after one whose leader granted locks waits half a lease.
	if r := lt.Lock(1, true, t0, lease, "g", "a", []QueueRef{q1}); len(r) != 0 {
		t.Fatalf("granted during the new leader's grace: %v", r)
	}
	t1 := t0.Add(lease / 2)
	if r := lt.Lock(1, true, t1, lease, "g", "a", []QueueRef{q1, q2}); got(r) != got([]QueueRef{q1, q2}) {
		t.Fatalf("a after grace: %v", r)
	}
	if r := lt.Lock(1, true, t1.Add(time.Second), lease, "g", "b", []QueueRef{q1, q2}); len(r) != 0 {
		t.Fatalf("b took a's locks: %v", r)
	}
	if r := lt.Lock(1, true, t1.Add(time.Second), lease, "other", "b", []QueueRef{q1}); len(r) != 1 {
		t.Fatalf("another group's lock: %v", r)
	}
	if r := lt.Lock(1, true, t1.Add(50*time.Second), lease, "g", "a", []QueueRef{q1}); len(r) != 1 {
		t.Fatalf("a's renewal: %v", r)
	}
	lt.Unlock(1, t1.Add(51*time.Second), "g", "b", []QueueRef{q1}) // not b's: ignored
	if r := lt.Lock(1, true, t1.Add(61*time.Second), lease, "g", "b", []QueueRef{q1, q2}); got(r) != got([]QueueRef{q2}) {
		t.Fatalf("b after a's q2 lapsed (q1 renewed): %v", r)
	}
	lt.Unlock(1, t1.Add(62*time.Second), "g", "a", []QueueRef{q1})
	if r := lt.Lock(1, true, t1.Add(62*time.Second), lease, "g", "b", []QueueRef{q1}); len(r) != 1 {
		t.Fatalf("b after a unlocked q1: %v", r)
	}
	// A leader change: the table is gone, and nothing is granted for half a
	// lease, not even to the holder.
	t2 := t1.Add(63 * time.Second)
	if r := lt.Lock(2, true, t2, lease, "g", "b", []QueueRef{q1}); len(r) != 0 {
		t.Fatalf("granted right after a leader change: %v", r)
	}
	if r := lt.Lock(2, true, t2.Add(lease/2), lease, "g", "a", []QueueRef{q1}); len(r) != 1 {
		t.Fatalf("after the grace: %v", r)
	}
	// A term whose predecessors never granted a lock grants at once.
	var fresh Locks
	if r := fresh.Lock(1, false, t0, lease, "g", "a", []QueueRef{q1}); len(r) != 1 {
		t.Fatalf("a new group's first leader: %v", r)
	}
}
