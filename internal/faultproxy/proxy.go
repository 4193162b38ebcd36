package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is what a Proxy does with traffic.
type Mode int

// Proxy modes.
const (
	// Pass forwards both directions (after Delay, when set).
	Pass Mode = iota
	// Drop closes every open connection and refuses new ones at once: the
	// dialer sees connection errors, like a rejecting firewall.
	Drop
	// Blackhole accepts connections but forwards nothing and holds what it
	// read until the mode changes: the dialer sees timeouts, like lost
	// packets. Held bytes are delivered in order afterwards (TCP would
	// retransmit them), unless an end gave up and closed meanwhile.
	Blackhole
)

func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Drop:
		return "drop"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// Proxy forwards TCP connections from its 127.0.0.1 listener to one target.
// One proxy carries the connections one node opens to another: node i
// dials node j through proxy(i->j) and j answers on the same connection.
type Proxy struct {
	Name   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	mode  Mode
	delay time.Duration
	// held[0] holds the bytes the dialer sends, held[1] those it receives,
	// whatever the mode (one direction of a one-way partition).
	held    [2]bool
	changed chan struct{} // closed and replaced whenever mode or delay change
	conns   map[*pconn]struct{}
	closed  bool

	wg sync.WaitGroup
}

type pconn struct {
	a, b net.Conn
	once sync.Once
	done chan struct{}
}

func (c *pconn) close() {
	c.once.Do(func() {
		close(c.done)
		c.a.Close()
		c.b.Close()
	})
}

// New listens on a free 127.0.0.1 port and forwards to target; name
// labels the proxy in logs and reports.
func New(name, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy %s: listen: %w", name, err)
	}
	p := &Proxy{Name: name, target: target, ln: ln, changed: make(chan struct{}), conns: map[*pconn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode and delay and lets both directions through. Drop
// closes open connections.
func (p *Proxy) Set(m Mode, delay time.Duration) {
	p.mu.Lock()
	p.mode, p.delay = m, delay
	p.held = [2]bool{}
	close(p.changed)
	p.changed = make(chan struct{})
	var victims []*pconn
	if m == Drop {
		for c := range p.conns {
			victims = append(victims, c)
		}
	}
	p.mu.Unlock()
	for _, c := range victims {
		c.close()
	}
}

// Hold blackholes one direction of every connection: the bytes the dialer
// sends (toTarget) or the bytes it receives. The other direction passes.
// Set lifts it.
func (p *Proxy) Hold(toTarget bool) {
	p.mu.Lock()
	if toTarget {
		p.held[0] = true
	} else {
		p.held[1] = true
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Held reports which directions Hold blocks.
func (p *Proxy) Held() (toTarget, fromTarget bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[0], p.held[1]
}

func (p *Proxy) state(dir int) (Mode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[dir] && p.mode == Pass {
		return Blackhole, p.delay, p.changed
	}
	return p.mode, p.delay, p.changed
}

// State returns the mode, the delay and a channel closed at the next change.
func (p *Proxy) State() (Mode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var all []*pconn
	for c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range all {
		c.close()
	}
	p.wg.Wait()
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		a, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		mode, _, _ := p.State()
		if mode == Drop {
			a.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(a)
	}
}

func (p *Proxy) serve(a net.Conn) {
	defer p.wg.Done()
	b, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		a.Close()
		return
	}
	c := &pconn{a: a, b: b, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.mode == Drop {
		p.mu.Unlock()
		c.close()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(c, a, b, 0) }()
	go func() { defer wg.Done(); p.pump(c, b, a, 1) }()
	wg.Wait()
}

type chunk struct {
	at   time.Time
	data []byte
}

// pump copies src to dst (direction dir: 0 from the dialer, 1 to it): a
// reader stamps chunks, a writer delivers each once the delay has passed
// since it was read and the mode lets it through.
func (p *Proxy) pump(c *pconn, src, dst net.Conn, dir int) {
	ch := make(chan chunk, 64)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case ch <- chunk{time.Now(), buf[:n]}:
				case <-c.done:
					return
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					c.close()
				}
				return
			}
		}
	}()
	defer c.close()
	for ck := range ch {
		for {
			mode, delay, changed := p.state(dir)
			if mode == Drop {
				return
			}
			if mode == Blackhole {
				select {
				case <-changed:
					continue
				case <-c.done:
					return
				}
			}
			if wait := time.Until(ck.at.Add(delay)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-changed:
					t.Stop()
					continue
				case <-c.done:
					t.Stop()
					return
				}
			}
			break
		}
		if _, err := dst.Write(ck.data); err != nil {
			return
		}
	}
	// src ended: Raft connections are request/response, so the whole
	// connection goes (the deferred close).
}
