package remoting

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrClosed is returned by a closed Client.
var ErrClosed = errors.New("remoting client closed")

// Client sends requests to remoting servers, one connection per address,
// and matches answers by opaque.
type Client struct {
	mu     sync.Mutex
	conns  map[string]*clientConn
	closed bool
	opaque atomic.Int32
	wg     sync.WaitGroup
	// DialTimeout bounds connecting (0: 3 s).
	DialTimeout time.Duration
	// Dial, when set, connects to addr instead of a plain TCP dial (TLS:
	// tlsconf.Node.Dial, or a tls.Dialer); it runs under DialTimeout.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

type clientConn struct {
	nc      net.Conn
	wmu     sync.Mutex
	mu      sync.Mutex
	waiting map[int32]chan *Command
	err     error
}

// NewClient returns a client with no connections.
func NewClient() *Client { return &Client{conns: map[string]*clientConn{}} }

func (c *Client) conn(ctx context.Context, addr string) (*clientConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if cc, ok := c.conns[addr]; ok {
		c.mu.Unlock()
		return cc, nil
	}
	c.mu.Unlock()
	timeout := c.DialTimeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	var nc net.Conn
	var err error
	if c.Dial != nil {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		nc, err = c.Dial(dctx, addr)
		cancel()
	} else {
		d := net.Dialer{Timeout: timeout}
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	cc := &clientConn{nc: nc, waiting: map[int32]chan *Command{}}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, ErrClosed
	}
	if old, ok := c.conns[addr]; ok {
		c.mu.Unlock()
		nc.Close()
		return old, nil
	}
	c.conns[addr] = cc
	c.wg.Add(1)
	c.mu.Unlock()
	go c.read(addr, cc)
	return cc, nil
}

func (c *Client) read(addr string, cc *clientConn) {
	defer c.wg.Done()
	br := bufio.NewReader(cc.nc)
	var err error
	answered := false
	for {
		var frame []byte
		if frame, err = ReadFrame(br, MaxFrame); err != nil {
			break
		}
		answered = true
		var cmd *Command
		if cmd, err = Decode(frame); err != nil {
			break
		}
		if !cmd.IsResponse() {
			continue // requests from the server (NOTIFY_...) are not served here
		}
		cc.mu.Lock()
		ch := cc.waiting[cmd.Opaque]
		delete(cc.waiting, cmd.Opaque)
		cc.mu.Unlock()
		if ch != nil {
			ch <- cmd
		}
	}
	cc.nc.Close()
	c.mu.Lock()
	if c.conns[addr] == cc {
		delete(c.conns, addr)
	}
	c.mu.Unlock()
	cc.mu.Lock()
	cc.err = fmt.Errorf("connection to %s: %w", addr, err)
	if !answered && c.Dial == nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		cc.err = fmt.Errorf("connection to %s closed before any answer (a server that requires TLS closes plaintext connections): %w", addr, err)
	}
	for op, ch := range cc.waiting {
		close(ch)
		delete(cc.waiting, op)
	}
	cc.mu.Unlock()
}

// Invoke sends req to addr and waits for its answer until ctx ends.
func (c *Client) Invoke(ctx context.Context, addr string, req *Command) (*Command, error) {
	cc, err := c.conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	req.Opaque = c.opaque.Add(1)
	req.Flag &^= FlagResponse
	b, err := req.Encode()
	if err != nil {
		return nil, err
	}
	ch := make(chan *Command, 1)
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return nil, cc.err
	}
	cc.waiting[req.Opaque] = ch
	cc.mu.Unlock()
	defer func() {
		cc.mu.Lock()
		delete(cc.waiting, req.Opaque)
		cc.mu.Unlock()
	}()
	cc.wmu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		cc.nc.SetWriteDeadline(dl)
	} else {
		cc.nc.SetWriteDeadline(time.Time{})
	}
	_, err = cc.nc.Write(b)
	cc.wmu.Unlock()
	if err != nil {
		cc.nc.Close()
		return nil, fmt.Errorf("send to %s: %w", addr, err)
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			cc.mu.Lock()
			err := cc.err
			cc.mu.Unlock()
			return nil, err
		}
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close closes every connection and waits for their readers; it is
// idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	for _, cc := range c.conns {
		cc.nc.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}
