package broker

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// The state exchange's pace.
//
// While anything moves, the state loop polls the other nodes every
// StatePeriod. After quietRounds rounds in which nothing it sees changed
// (this node's and every peer's role, term, leader, indexes, load, damage,
// and whether the peer answered), it polls every idleRounds StatePeriods
// instead: at rest the exchange is most of what a group does besides raft's
// heartbeats. Any change a round sees, or a produce or pull arriving at this
// node, brings back StatePeriod at once; a request that arrives during a
// slow wait wakes the loop, which polls right away, so routing decides on a
// view one round trip old.
//
// A peer counts as fresh (fresh) for 5 StatePeriods beyond the gap this node
// leaves between its polls: a slower exchange does not make a healthy peer
// look unhealthy, and a peer that stops answering is judged as before once
// the exchange is back at StatePeriod (a failed poll is a change).
const (
	quietRounds = 10 // rounds without change before slowing: 2 s at 200 ms
	idleRounds  = 5  // the slow pace, in StatePeriods: 1 s at 200 ms
)

// pace is the state loop's pace. The loop owns quiet and last; busy may be
// called from any goroutine.
type pace struct {
	slow    atomic.Bool  // the loop waits idleRounds StatePeriods
	touched atomic.Bool  // a produce or pull came since the loop's last round
	until   atomic.Int64 // unix nanos: fresh allows for a slow poll until then
	wake    chan struct{}
	quiet   int
	last    []digest
}

func newPace() *pace { return &pace{wake: make(chan struct{}, 1)} }

// digest is the part of a node's state whose change keeps the exchange at
// StatePeriod.
type digest struct {
	state  NodeState // ReceivedAt, PollerApplied and Load cleared
	load   int       // Load in steps of 0.1 while Loaded, else 0
	answer bool      // a peer: its last poll succeeded
}

func digestOf(st NodeState, answered bool) digest {
	load := st.Load
	st.ReceivedAt, st.PollerApplied, st.Load = time.Time{}, 0, 0
	d := digest{state: st, answer: answered}
	if st.Loaded { // below its threshold a node's load steers no reader
		d.load = int(math.Round(load * 10))
	}
	return d
}

// busy tells the state loop that a client is producing or pulling here. It
// costs an atomic load while the loop already runs at StatePeriod.
func (p *pace) busy() {
	if p.touched.Load() {
		return
	}
	p.touched.Store(true)
	if p.slow.Load() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// next returns how long the loop waits before its next round, given what
// the round just ended saw.
func (p *pace) next(seen []digest, period time.Duration) time.Duration {
	if p.touched.Swap(false) || !slices.Equal(seen, p.last) {
		p.quiet = 0
	} else {
		p.quiet++
	}
	p.last = seen
	if p.quiet < quietRounds {
		p.slow.Store(false)
		return period
	}
	idle := idleRounds * period
	p.until.Store(time.Now().Add(idle + 5*period).UnixNano())
	p.slow.Store(true)
	if p.touched.Load() { // came between the Swap and slow: busy sent no wake
		p.slow.Store(false)
		return period
	}
	return idle
}

// fresh is how recent a peer's state must be to count as healthy: 5
// StatePeriods, plus the slow pace's longer gap while it may show.
func (b *Broker) fresh() time.Duration {
	f := 5 * b.cfg.StatePeriod
	if time.Now().UnixNano() < b.pace.until.Load() {
		f += (idleRounds - 1) * b.cfg.StatePeriod
	}
	return f
}
