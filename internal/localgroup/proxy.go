package localgroup

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from its 127.0.0.1 listener to one target.
// Blackholed, it still accepts connections and keeps them open but passes
// nothing either way, like lost packets: the sender sees no error, only
// silence. What it read meanwhile is delivered in order once it passes again
// (TCP would retransmit it), unless an end gave up and closed.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	hole    bool
	changed chan struct{} // closed and replaced whenever hole changes
	conns   map[*proxyConn]struct{}
	closed  bool

	wg sync.WaitGroup
}

type proxyConn struct {
	a, b net.Conn
	once sync.Once
	done chan struct{}
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.a.Close()
		c.b.Close()
	})
}

// NewProxy listens on a free 127.0.0.1 port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: listen: %w", target, err)
	}
	p := &Proxy{target: target, ln: ln, changed: make(chan struct{}), conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole stops (true) or resumes (false) forwarding.
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole == on {
		return
	}
	p.hole = on
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) state() (bool, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hole, p.changed
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	var all []*proxyConn
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
	c := &proxyConn{a: a, b: b, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
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
	go func() { defer wg.Done(); p.pump(c, a, b) }()
	go func() { defer wg.Done(); p.pump(c, b, a) }()
	wg.Wait()
}

// pump copies src to dst: a reader hands chunks to a writer that holds
// each while the proxy is blackholed. Either end closing closes both.
func (p *Proxy) pump(c *proxyConn, src, dst net.Conn) {
	ch := make(chan []byte, 64)
	go func() {
		defer close(ch)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case ch <- buf[:n]:
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
	for data := range ch {
		for {
			hole, changed := p.state()
			if !hole {
				break
			}
			select {
			case <-changed:
			case <-c.done:
				return
			}
		}
		if _, err := dst.Write(data); err != nil {
			return
		}
	}
}
