package remoting

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Handler answers one request. It returns nil to send nothing (a oneway
// request is never answered, whatever it returns). ctx ends when the
// connection closes or the server stops.
type Handler func(ctx context.Context, conn *Conn, req *Command) *Command

// ServerConfig configures a Server.
type ServerConfig struct {
	Handler Handler
	Logger  hclog.Logger
	// MaxFrame bounds a frame read (0: MaxFrame).
	MaxFrame int
	// MaxInflight bounds the requests of one connection handled at once;
	// the connection is not read further until one finishes (0: 256).
	MaxInflight int
}

// Server serves the remoting protocol on listeners.
type Server struct {
	cfg    ServerConfig
	log    hclog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	lis    []net.Listener
	conns  map[*Conn]struct{}
	wg     sync.WaitGroup
	closed bool
	nextID atomic.Uint64
}

// Conn is one client connection.
type Conn struct {
	ID     uint64
	Remote string
	nc     net.Conn
	wmu    sync.Mutex
	mu     sync.Mutex
	closed bool
	onEnd  []func()
}

// OnClose registers fn to run once the connection has closed (at once if
// it has).
func (c *Conn) OnClose(fn func()) {
	c.mu.Lock()
	if !c.closed {
		c.onEnd = append(c.onEnd, fn)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	fn()
}

func (c *Conn) close() {
	c.nc.Close()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	fns := c.onEnd
	c.onEnd = nil
	c.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Send writes one command on the connection.
func (c *Conn) Send(cmd *Command) error {
	b, err := cmd.Encode()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err = c.nc.Write(b)
	return err
}

// NewServer returns a server that runs cfg.Handler for every request.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxFrame <= 0 || cfg.MaxFrame > MaxFrame {
		cfg.MaxFrame = MaxFrame
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = 256
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, conns: map[*Conn]struct{}{}}
}

// Serve accepts connections on l until Close; it returns nil after Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.lis = append(s.lis, l)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		c := &Conn{ID: s.nextID.Add(1), Remote: nc.RemoteAddr().String(), nc: nc}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

func (s *Server) serveConn(c *Conn) {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(s.ctx)
	var reqs sync.WaitGroup
	defer func() {
		cancel()
		c.close()
		reqs.Wait()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	sem := make(chan struct{}, s.cfg.MaxInflight)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		frame, err := ReadFrame(br, s.cfg.MaxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				s.log.Warn("closing remoting connection", "remote", c.Remote, "reason", err)
			}
			return
		}
		req, err := Decode(frame)
		if err != nil {
			// The frame's length was sound, so the stream is still in
			// step; but without a header there is no opaque to answer.
			s.log.Warn("closing remoting connection: undecodable frame", "remote", c.Remote, "reason", err)
			return
		}
		if req.IsResponse() {
			s.log.Debug("ignoring a response sent to the server", "remote", c.Remote, "opaque", req.Opaque)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		reqs.Add(1)
		go func() {
			defer reqs.Done()
			defer func() { <-sem }()
			resp := s.cfg.Handler(ctx, c, req)
			if resp == nil || req.IsOneway() {
				return
			}
			resp.Opaque, resp.Codec = req.Opaque, req.Codec
			resp.Flag |= FlagResponse
			if err := c.Send(resp); err != nil {
				s.log.Debug("write remoting response", "remote", c.Remote, "code", req.Code, "error", err)
				c.nc.Close()
			}
		}()
	}
}

// Close stops accepting, closes every connection and waits for their
// handlers. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, l := range s.lis {
		l.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}
