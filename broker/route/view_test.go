package route

import (
	"testing"
	"time"
)

func TestPeerCaughtUp(t *testing.T) {
	now := time.Now()
	fresh := time.Second
	cases := []struct {
		name            string
		applied, poller uint64
		age             time.Duration
		want            bool
	}{
		{"had everything the asker had", 5000, 5000, 0, true},
		// The asker has applied thousands more since it asked; that must not
		// keep a caught-up node from promotion.
		{"16 behind the asker when asked", 4984, 5000, 100 * time.Millisecond, true},
		{"17 behind", 4983, 5000, 0, false},
		{"far behind", 100, 5000, 0, false},
		{"answer too old", 5000, 5000, 2 * time.Second, false},
	}
	for _, c := range cases {
		p := Peer{State: NodeState{Applied: c.applied, PollerApplied: c.poller}, LastOK: now.Add(-c.age)}
		if got := p.CaughtUp(now, now.Add(-time.Hour), fresh); got != c.want {
			t.Errorf("%s: CaughtUp = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMemberAddIgnoresStateOfEarlierIncarnation: a node removed, wiped and
// added again under the same id leaves its earlier state (caught up, a
// moment ago) in the view, which must not promote the empty node. Only an
// answer heard after the add counts.
func TestMemberAddIgnoresStateOfEarlierIncarnation(t *testing.T) {
	now := time.Now()
	p := Peer{State: NodeState{Applied: 1390, PollerApplied: 1390}, LastOK: now.Add(-100 * time.Millisecond)}
	added := now.Add(-10 * time.Millisecond)
	if p.CaughtUp(now, added, time.Second) {
		t.Fatal("a state heard before the add counted as caught up")
	}
	p.LastOK = now
	if !p.CaughtUp(now, added, time.Second) {
		t.Fatal("a caught-up state heard after the add did not count")
	}
}
