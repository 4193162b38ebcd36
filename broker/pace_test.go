package broker

import (
	"testing"
	"time"
)

func TestPaceSlowsAtRestAndSpeedsUpOnChangeOrRequest(t *testing.T) {
	const period = 200 * time.Millisecond
	p := newPace()
	rest := []digest{digestOf(NodeState{ID: "n1", Role: "leader", Applied: 7}, true), digestOf(NodeState{ID: "n2", Applied: 7}, true)}
	for i := 0; i < quietRounds; i++ {
		if got := p.next(rest, period); got != period {
			t.Fatalf("round %d at rest: waits %s, want %s until %d quiet rounds", i, got, period, quietRounds)
		}
	}
	if got := p.next(rest, period); got != idleRounds*period {
		t.Fatalf("after %d quiet rounds: waits %s, want %s", quietRounds, got, idleRounds*period)
	}

	p.busy() // a pull arrives during the slow wait: the loop is woken
	select {
	case <-p.wake:
	default:
		t.Fatal("a request during a slow wait did not wake the state loop")
	}
	if got := p.next(rest, period); got != period {
		t.Fatalf("after a request: waits %s, want %s", got, period)
	}

	for i := 0; i <= quietRounds; i++ {
		p.next(rest, period)
	}
	moved := []digest{rest[0], digestOf(NodeState{ID: "n2", Applied: 8}, true)}
	if got := p.next(moved, period); got != period {
		t.Fatalf("after a peer's applied index moved: waits %s, want %s", got, period)
	}
	for i := 0; i <= quietRounds; i++ {
		p.next(moved, period)
	}
	gone := []digest{moved[0], digestOf(moved[1].state, false)}
	if got := p.next(gone, period); got != period {
		t.Fatalf("after a peer stopped answering: waits %s, want %s", got, period)
	}
}

func TestPaceIgnoresLoadBelowThreshold(t *testing.T) {
	a := digestOf(NodeState{ID: "n1", Load: 0.02, ReceivedAt: time.Now(), PollerApplied: 3}, true)
	b := digestOf(NodeState{ID: "n1", Load: 0.09, ReceivedAt: time.Now().Add(time.Second), PollerApplied: 4}, true)
	if a != b {
		t.Fatalf("load below the threshold, arrival time or poller's index changed the digest: %+v != %+v", a, b)
	}
	c := digestOf(NodeState{ID: "n1", Load: 0.5, Loaded: true}, true)
	d := digestOf(NodeState{ID: "n1", Load: 0.7, Loaded: true}, true)
	if c == d {
		t.Fatal("a loaded node's load moving by 0.2 did not change the digest")
	}
}

func TestFreshAllowsForTheSlowPace(t *testing.T) {
	b := &Broker{pace: newPace()}
	b.cfg.StatePeriod = 200 * time.Millisecond
	if got := b.fresh(); got != time.Second {
		t.Fatalf("fresh at StatePeriod: %s, want 1s", got)
	}
	rest := []digest{digestOf(NodeState{ID: "n1"}, true)}
	for i := 0; i <= quietRounds; i++ {
		b.pace.next(rest, b.cfg.StatePeriod)
	}
	if got, want := b.fresh(), time.Second+(idleRounds-1)*b.cfg.StatePeriod; got != want {
		t.Fatalf("fresh at the slow pace: %s, want %s", got, want)
	}
}
