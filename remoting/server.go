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
	// OnClose, when set, is called once per closed connection with why it
	// closed (one of the Close* reasons), for metrics.
	OnClose func(reason string)
	// OnUndecodable, when set, is called for every frame whose header did
	// not decode (the connection stays open), for metrics.
	OnUndecodable func()
}

// Why a connection closed (ServerConfig.OnClose).
const (
	// CloseEOF: the client closed it between two frames.
	CloseEOF = "client_closed"
	// CloseCutShort: the client closed it in the middle of a frame.
	CloseCutShort = "cut_short"
	// CloseFrameLength: a frame length out of bounds, after which the
	// stream cannot be delimited.
	CloseFrameLength = "frame_length"
	// CloseReadError: reading failed (a reset, a timeout).
	CloseReadError = "read_error"
	// CloseWriteError: writing an answer failed.
	CloseWriteError = "write_error"
	// CloseServer: the server closed it (stopping, or a handler closed it).
	CloseServer = "server_closed"
)

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
	// jobs hands a request to an idle worker (run).
	jobs chan func()
}

// workerIdle is how long a worker waits for another request before it
// ends.
const workerIdle = 10 * time.Second

// Conn is one client connection.
type Conn struct {
	ID     uint64
	Remote string
	nc     net.Conn
	// wmu guards the write queue: frames waiting while another Send
	// writes, which that Send writes next, all in one system call.
	wmu     sync.Mutex
	wqueue  [][]byte
	queued  int       // bytes in wqueue
	drained sync.Cond // on wmu: a write ended
	writing bool
	werr    error // the first write error; every later Send returns it
	mu      sync.Mutex
	closed  bool
	reason  string // the first reason set; why the connection closed
	onEnd   []func()
	// waiting holds the requests this server sent on the connection
	// (Invoke) by opaque, until the client answers.
	waiting map[int32]chan *Command
}

// setReason records why the connection is closing, unless a reason is
// already recorded.
func (c *Conn) setReason(r string) {
	c.mu.Lock()
	if c.reason == "" {
		c.reason = r
	}
	c.mu.Unlock()
}

// Close closes the connection from the server's side.
func (c *Conn) Close() {
	c.setReason(CloseServer)
	c.nc.Close()
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
	for op, ch := range c.waiting {
		close(ch)
		delete(c.waiting, op)
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// maxQueued bounds the bytes that wait on a connection for the Send that
// is writing; past it Send waits for the write, so a client that does not
// read its answers holds up its own requests (each connection handles at
// most MaxInflight at once) instead of filling memory.
const maxQueued = 1 << 20

// Send writes one command on the connection. When another Send is
// writing, the command joins the queue that one writes next (the answers
// of one group commit leave in one system call) and Send returns at once,
// unless maxQueued bytes wait already; if that write fails the connection
// is closed and every later Send returns the error.
func (c *Conn) Send(cmd *Command) error {
	b, err := cmd.Encode()
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.drained.L == nil {
		c.drained.L = &c.wmu
	}
	for c.writing && c.queued >= maxQueued && c.werr == nil {
		c.drained.Wait()
	}
	if c.werr != nil {
		return c.werr
	}
	c.wqueue = append(c.wqueue, b)
	c.queued += len(b)
	if c.writing {
		return nil
	}
	c.writing = true
	for len(c.wqueue) > 0 && err == nil {
		bufs := net.Buffers(c.wqueue)
		c.wqueue, c.queued = nil, 0
		c.wmu.Unlock()
		c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err = bufs.WriteTo(c.nc)
		c.wmu.Lock()
		c.drained.Broadcast()
	}
	c.writing = false
	if err != nil {
		c.werr = err
		c.wqueue, c.queued = nil, 0
		c.setReason(CloseWriteError)
		c.nc.Close()
	}
	return err
}

// ErrConnClosed: the connection closed before the client answered.
var ErrConnClosed = errors.New("remoting connection closed")

// Invoke sends a request to the client on this connection and waits for
// its answer until ctx ends (RocketMQ's broker-to-client calls, such as
// PUSH_REPLY_MESSAGE_TO_CLIENT). req.Opaque must be unique among the
// requests in flight on the connection.
func (c *Conn) Invoke(ctx context.Context, req *Command) (*Command, error) {
	req.Flag &^= FlagResponse | FlagOneway
	ch := make(chan *Command, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrConnClosed
	}
	if c.waiting == nil {
		c.waiting = map[int32]chan *Command{}
	}
	c.waiting[req.Opaque] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, req.Opaque)
		c.mu.Unlock()
	}()
	if err := c.Send(req); err != nil {
		return nil, err
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, ErrConnClosed
		}
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answered hands a client's response to the Invoke waiting for it; it
// reports whether one was.
func (c *Conn) answered(resp *Command) bool {
	c.mu.Lock()
	ch := c.waiting[resp.Opaque]
	delete(c.waiting, resp.Opaque)
	c.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- resp
	return true
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
	return &Server{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel, conns: map[*Conn]struct{}{}, jobs: make(chan func())}
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
		if s.cfg.OnClose != nil {
			c.mu.Lock()
			r := c.reason
			c.mu.Unlock()
			s.cfg.OnClose(r)
		}
	}()
	sem := make(chan struct{}, s.cfg.MaxInflight)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		frame, err := ReadFrame(br, s.cfg.MaxFrame)
		if err != nil {
			reason := readCloseReason(err)
			c.setReason(reason)
			switch reason {
			case CloseFrameLength, CloseCutShort:
				s.log.Warn("closing remoting connection", "remote", c.Remote, "reason", err)
			case CloseReadError:
				if ctx.Err() == nil {
					s.log.Debug("closing remoting connection", "remote", c.Remote, "reason", err)
				}
			}
			return
		}
		req, err := Decode(frame)
		if err != nil {
			// The frame's length was sound, so the stream is still in
			// step: answer it if its opaque can be found, and go on.
			s.undecodable(ctx, c, frame, err)
			continue
		}
		if req.IsResponse() {
			if c.answered(req) {
				continue
			}
			s.log.Debug("ignoring a response sent to the server", "remote", c.Remote, "opaque", req.Opaque)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		reqs.Add(1)
		s.run(func() {
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
				c.setReason(CloseWriteError)
				c.nc.Close()
			}
		})
	}
}

// run runs job on an idle worker, or on a new one when none is idle. A
// worker keeps the stack its requests grew, which a goroutine per request
// would grow again for each.
func (s *Server) run(job func()) {
	select {
	case s.jobs <- job:
		return
	default:
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		idle := time.NewTimer(workerIdle)
		defer idle.Stop()
		for {
			job()
			idle.Reset(workerIdle)
			select {
			case job = <-s.jobs:
			case <-idle.C:
				return
			case <-s.ctx.Done():
				return
			}
		}
	}()
}

// readCloseReason is why a connection whose read failed with err closes.
func readCloseReason(err error) string {
	switch {
	case errors.Is(err, ErrFrameLength):
		return CloseFrameLength
	case errors.Is(err, io.EOF):
		return CloseEOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return CloseCutShort
	case errors.Is(err, net.ErrClosed):
		return CloseServer
	}
	return CloseReadError
}

// undecodable answers a frame whose header did not decode with
// SYSTEM_ERROR on its opaque, when the opaque can be read and the frame is
// a request that wants an answer; otherwise the frame is dropped. The
// connection stays open either way.
func (s *Server) undecodable(ctx context.Context, c *Conn, frame []byte, err error) {
	if s.cfg.OnUndecodable != nil {
		s.cfg.OnUndecodable()
	}
	codec, opaque, flag, ok := Recover(frame)
	s.log.Warn("undecodable remoting frame", "remote", c.Remote, "answered", ok, "reason", err)
	if !ok || flag&(FlagResponse|FlagOneway) != 0 {
		return
	}
	if codec != JSON && codec != RocketMQ {
		codec = JSON
	}
	remark := err.Error()
	if len(remark) > 512 {
		remark = remark[:512]
	}
	resp := &Command{Code: SystemError, Language: "GO", Version: Version, Opaque: opaque, Flag: FlagResponse,
		Remark: "undecodable request header: " + remark, Ext: map[string]string{}, Codec: codec}
	if err := c.Send(resp); err != nil && ctx.Err() == nil {
		c.setReason(CloseWriteError)
		c.nc.Close()
	}
}

// Conns is the number of open connections.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
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
		c.setReason(CloseServer)
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}
