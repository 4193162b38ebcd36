package acl

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ThrottleConfig bounds the bad signatures one client address may send: a
// token bucket of Burst tokens that refills one token every Every. A bad
// signature, an unknown access key or a stale credential takes a token;
// while an address has none, its requests are refused without being
// verified (reason throttled), so guessing a secret goes no faster than one
// try every Every. Requests with good signatures take nothing: a client
// that never fails to verify never meets the throttle.
type ThrottleConfig struct {
	Burst int
	Every time.Duration
}

// DefaultThrottle: 10 bad signatures in a row, then one a second.
var DefaultThrottle = ThrottleConfig{Burst: 10, Every: time.Second}

// maxThrottled bounds the addresses remembered; beyond it the ones whose
// bucket has refilled are forgotten, and if none has, all are.
const maxThrottled = 1 << 16

type bucket struct {
	tokens float64
	at     time.Time
}

// Throttle is a token bucket per client host (ThrottleConfig). It is safe
// for concurrent use.
type Throttle struct {
	burst float64
	every time.Duration

	mu sync.Mutex
	m  map[string]*bucket
	n  atomic.Int64 // len(m): a request takes no lock while no address owes anything
}

// NewThrottle returns a Throttle; a zero c is DefaultThrottle.
func NewThrottle(c ThrottleConfig) *Throttle {
	if c.Burst <= 0 || c.Every <= 0 {
		c = DefaultThrottle
	}
	return &Throttle{burst: float64(c.Burst), every: c.Every, m: map[string]*bucket{}}
}

// level returns b's tokens at now.
func (t *Throttle) level(b *bucket, now time.Time) float64 {
	return min(t.burst, b.tokens+float64(now.Sub(b.at))/float64(t.every))
}

// Slowed reports whether host has no token left, and how long until it
// has one.
func (t *Throttle) Slowed(host string, now time.Time) (time.Duration, bool) {
	if t.n.Load() == 0 {
		return 0, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.m[host]
	if !ok {
		return 0, false
	}
	l := t.level(b, now)
	if l >= t.burst {
		t.deleteLocked(host)
		return 0, false
	}
	if l >= 1 {
		return 0, false
	}
	return time.Duration((1 - l) * float64(t.every)), true
}

// Take spends one of host's tokens (a failed verification).
func (t *Throttle) Take(host string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, ok := t.m[host]
	if !ok {
		if len(t.m) >= maxThrottled {
			t.pruneLocked(now)
		}
		b = &bucket{tokens: t.burst, at: now}
		t.m[host] = b
		t.n.Store(int64(len(t.m)))
	}
	b.tokens, b.at = max(0, t.level(b, now)-1), now
}

// EmptyCount counts the addresses without a token at now (and forgets the
// ones whose bucket has refilled).
func (t *Throttle) EmptyCount(now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(now)
	n := 0
	for _, b := range t.m {
		if t.level(b, now) < 1 {
			n++
		}
	}
	return n
}

func (t *Throttle) pruneLocked(now time.Time) {
	for h, b := range t.m {
		if t.level(b, now) >= t.burst {
			delete(t.m, h)
		}
	}
	if len(t.m) >= maxThrottled {
		clear(t.m)
	}
	t.n.Store(int64(len(t.m)))
}

func (t *Throttle) deleteLocked(host string) {
	delete(t.m, host)
	t.n.Store(int64(len(t.m)))
}

// AddrHost is the host of a client address ("10.0.0.1:53211" ->
// "10.0.0.1"): the throttle counts per host, whatever port a client comes
// from.
func AddrHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// Remembered is how many hosts the throttle holds a bucket for.
func (t *Throttle) Remembered() int { return int(t.n.Load()) }
