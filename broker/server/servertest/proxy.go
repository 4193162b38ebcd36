package servertest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// proxy forwards TCP connections to a target until blocked. Blocking closes
// every open connection and refuses new ones: a network partition of one
// direction between two nodes (raft sends each RPC on a connection the
// caller opened, so the answers travel back on it).
type proxy struct {
	l       net.Listener
	target  string
	mu      sync.Mutex
	blocked bool
	conns   map[net.Conn]bool
	wg      sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.blocked {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

func (p *proxy) setBlocked(b bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = b
	if b {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *proxy) close() {
	p.l.Close()
	p.setBlocked(true)
	p.wg.Wait()
}
