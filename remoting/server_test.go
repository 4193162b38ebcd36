package remoting

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func startServer(t *testing.T, h Handler) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerConfig{Handler: h, MaxFrame: 1 << 20})
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
	return s, l.Addr().String()
}

func TestServerClient(t *testing.T) {
	var mu sync.Mutex
	var oneways int
	_, addr := startServer(t, func(ctx context.Context, c *Conn, req *Command) *Command {
		if req.IsOneway() {
			mu.Lock()
			oneways++
			mu.Unlock()
		}
		if req.Code == PullMessage {
			select { // a long poll that ends with the connection
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		r := Response(req, Success, "")
		r.Ext["echo"] = req.Ext["v"]
		r.Body = req.Body
		return r
	})
	cl := NewClient()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code := SendMessage
			if i%2 == 0 {
				code = PullMessage
			}
			req := NewRequest(code, map[string]string{"v": string(rune('a' + i))}, []byte{byte(i)})
			if i%3 == 0 {
				req.Codec = RocketMQ
			}
			resp, err := cl.Invoke(ctx, addr, req)
			if err != nil {
				t.Errorf("invoke %d: %v", i, err)
				return
			}
			if !resp.IsResponse() || resp.Ext["echo"] != string(rune('a'+i)) || len(resp.Body) != 1 || resp.Body[0] != byte(i) || resp.Codec != req.Codec {
				t.Errorf("answer %d: %+v", i, resp)
			}
		}(i)
	}
	wg.Wait()
}

// A frame longer than the bound closes the connection; the server keeps
// serving others.
func TestServerRefusesOversizedFrame(t *testing.T) {
	_, addr := startServer(t, func(ctx context.Context, c *Conn, req *Command) *Command { return Response(req, Success, "") })
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write(binary.BigEndian.AppendUint32(nil, 1<<30))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after an oversized length, want a closed connection", n)
	}
	cl := NewClient()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Invoke(ctx, addr, NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
}

func TestClientSeesClose(t *testing.T) {
	_, addr := startServer(t, func(ctx context.Context, c *Conn, req *Command) *Command {
		c.nc.Close()
		return nil
	})
	cl := NewClient()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Invoke(ctx, addr, NewRequest(HeartBeat, nil, nil)); err == nil {
		t.Fatal("no error from a closed connection")
	}
}

// A server that closes a plaintext connection before answering anything
// (what a TLS-only server does) is reported with that hint; one that
// closes after answering is not.
func TestClientHintsAtTLSWhenClosedUnanswered(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 16) // what a TLS server reads as a bad handshake
			nc.Read(buf)
			nc.Close()
		}
	}()
	cl := NewClient()
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cl.Invoke(ctx, l.Addr().String(), NewRequest(HeartBeat, nil, nil))
	if err == nil || !strings.Contains(err.Error(), "requires TLS") {
		t.Fatalf("closed before any answer: %v, want the TLS hint", err)
	}

	var answered atomic.Int32
	_, addr := startServer(t, func(ctx context.Context, c *Conn, req *Command) *Command {
		if answered.Add(1) > 1 {
			c.nc.Close()
			return nil
		}
		return Response(req, Success, "")
	})
	if _, err := cl.Invoke(ctx, addr, NewRequest(HeartBeat, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Invoke(ctx, addr, NewRequest(HeartBeat, nil, nil)); err == nil || strings.Contains(err.Error(), "TLS") {
		t.Fatalf("closed after answering: %v, want an error without the TLS hint", err)
	}
}

// rawFrame is a frame with the given codec and header bytes, its length
// first.
func rawFrame(codec byte, header []byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(codec)<<24|uint32(len(header)))
	b = append(b, header...)
	return append(b, body...)
}

func readAnswer(t *testing.T, nc net.Conn) *Command {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := ReadFrame(nc, MaxFrame)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	c, err := Decode(f)
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	return c
}

// A header that does not decode is answered SYSTEM_ERROR on its opaque
// when that can be read, dropped when not; either way the connection
// stays open and the next request is served. Codes above 16 bits reach the
// handler whole.
func TestServerKeepsConnectionOnBadHeaders(t *testing.T) {
	var mu sync.Mutex
	var reasons []string
	undecodable := 0
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(ServerConfig{MaxFrame: 1 << 20,
		Handler: func(ctx context.Context, c *Conn, req *Command) *Command {
			r := Response(req, Success, "")
			r.Ext["code"] = strconv.Itoa(int(req.Code))
			return r
		},
		OnClose:       func(r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() },
		OnUndecodable: func() { mu.Lock(); undecodable++; mu.Unlock() },
	})
	done := make(chan struct{})
	go func() { defer close(done); s.Serve(l) }()
	defer func() { s.Close(); <-done }()

	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// JSON: a code that is no number; the opaque is readable.
	nc.Write(rawFrame(JSON, []byte(`{"code":"POP","opaque":77,"flag":0,"extFields":{}}`), nil))
	if a := readAnswer(t, nc); a.Code != SystemError || a.Opaque != 77 || !a.IsResponse() || !strings.Contains(a.Remark, "undecodable") {
		t.Fatalf("bad JSON code answered %+v", a)
	}
	// JSON that does not parse at all: no opaque, nothing to answer.
	nc.Write(rawFrame(JSON, []byte(`{x}`), nil))
	// Binary: opaque 78 readable, the remark length runs past the header.
	h := binary.BigEndian.AppendUint16(nil, 11)
	h = append(h, 9)
	h = binary.BigEndian.AppendUint16(h, 317)
	h = binary.BigEndian.AppendUint32(h, 78)
	h = binary.BigEndian.AppendUint32(h, 0)
	h = binary.BigEndian.AppendUint32(h, 1<<30)
	nc.Write(rawFrame(RocketMQ, h, nil))
	if a := readAnswer(t, nc); a.Code != SystemError || a.Opaque != 78 || a.Codec != RocketMQ {
		t.Fatalf("bad binary header answered %+v", a)
	}
	// An unknown serialize type.
	nc.Write(rawFrame(7, []byte("??"), nil))
	// A JSON request whose code is RocketMQ 5.x's POP_MESSAGE.
	nc.Write(rawFrame(JSON, []byte(`{"code":200050,"language":"JAVA","version":475,"opaque":79,"flag":0,"extFields":{"topic":"t"}}`), nil))
	if a := readAnswer(t, nc); a.Code != Success || a.Opaque != 79 || a.Ext["code"] != "200050" {
		t.Fatalf("code 200050 reached the handler as %+v", a)
	}
	// Absurd but decodable fields: a version past 16 bits, a numeric remark.
	nc.Write(rawFrame(JSON, []byte(`{"code":34,"language":7,"version":99999999,"opaque":80,"flag":0,"remark":12,"extFields":{"n":1}}`), nil))
	if a := readAnswer(t, nc); a.Code != Success || a.Opaque != 80 || a.Ext["code"] != "34" {
		t.Fatalf("absurd fields answered %+v", a)
	}
	// Only a length that cannot be delimited closes the connection.
	nc.Write(binary.BigEndian.AppendUint32(nil, 3))
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after a bad length, want a closed connection", n)
	}
	nc.Close()
	// A client that closes between frames.
	nc2, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc2.Write(rawFrame(JSON, []byte(`{"code":34,"opaque":1,"flag":0}`), nil))
	readAnswer(t, nc2)
	nc2.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := append([]string(nil), reasons...)
		und := undecodable
		mu.Unlock()
		if len(got) == 2 {
			sort.Strings(got) // the two connections close concurrently
			if got[0] != CloseEOF || got[1] != CloseFrameLength || und != 4 {
				t.Fatalf("close reasons %v, undecodable %d; want [%s %s], 4", got, und, CloseEOF, CloseFrameLength)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("close reasons %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The ROCKETMQ binary header has 16 bits for the code (RocketMQSerializable
// writes a short): a larger code is refused rather than sent as another.
func TestBinaryHeaderRefusesWideCodes(t *testing.T) {
	c := NewRequest(PopMessage, nil, nil)
	c.Codec = RocketMQ
	if _, err := c.Encode(); err == nil {
		t.Fatal("code 200050 encoded in 16 bits")
	}
	c.Codec = JSON
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b[4:])
	if err != nil || got.Code != PopMessage {
		t.Fatalf("JSON round trip of 200050: %+v, %v", got, err)
	}
	// What Java writes for a code it truncated: a negative short decodes
	// sign-extended, as readShort does.
	c = NewRequest(-2, nil, nil)
	c.Codec = RocketMQ
	b, err = c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Decode(b[4:]); err != nil || got.Code != -2 {
		t.Fatalf("binary -2: %+v, %v", got, err)
	}
}

// A handler's Invoke on its connection (a broker-to-client call) gets the
// client's answer by its opaque; a call whose connection closes before the
// answer fails at once (ErrConnClosed, or the handler's context, which
// ends with the connection).
func TestConnInvokeReachesTheClient(t *testing.T) {
	results := make(chan string, 2)
	_, addr := startServer(t, func(ctx context.Context, c *Conn, req *Command) *Command {
		call := NewRequest(326, map[string]string{"n": req.Ext["n"]}, nil)
		call.Opaque = 1000 + req.Opaque
		resp, err := c.Invoke(ctx, call)
		if err != nil {
			results <- "error: " + err.Error()
		} else {
			results <- resp.Remark
		}
		return nil
	})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	write := func(c *Command) {
		b, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(b)
	}
	req := NewRequest(34, map[string]string{"n": "1"}, nil)
	req.Opaque = 7
	write(req)
	call := readAnswer(t, nc)
	if call.IsResponse() || call.Code != 326 || call.Ext["n"] != "1" || call.IsOneway() {
		t.Fatalf("call %+v", call)
	}
	write(Response(call, Success, "took it"))
	if got := <-results; got != "took it" {
		t.Fatalf("invoke got %q", got)
	}
	// Unanswered, then the connection closes.
	req.Opaque = 8
	write(req)
	readAnswer(t, nc)
	nc.Close()
	select {
	case got := <-results:
		if !strings.Contains(got, ErrConnClosed.Error()) && !strings.Contains(got, context.Canceled.Error()) {
			t.Fatalf("invoke on a closed connection: %q", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("invoke still waits after its connection closed")
	}
}

// TestSendQueueIsBounded: answers queue while another is being written,
// but only up to maxQueued bytes; past that Send waits for the write, so a
// client that never reads its answers cannot make the server hold more.
func TestSendQueueIsBounded(t *testing.T) {
	server, client := net.Pipe() // a write returns once the other end has read it all
	defer server.Close()
	defer client.Close()
	c := &Conn{nc: server}
	big := &Command{Codec: JSON, Body: make([]byte, maxQueued/4)}
	first := make(chan error, 1)
	go func() { first <- c.Send(big) }() // writes, and blocks until the client reads
	for {
		c.wmu.Lock()
		writing := c.writing
		c.wmu.Unlock()
		if writing {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 4 { // queued behind the write: up to maxQueued
		if err := c.Send(big); err != nil {
			t.Fatalf("queued send %d: %v", i, err)
		}
	}
	over := make(chan error, 1)
	go func() { over <- c.Send(big) }()
	select {
	case err := <-over:
		t.Fatalf("a send past maxQueued returned (%v) while the client read nothing", err)
	case <-time.After(200 * time.Millisecond):
	}
	go io.Copy(io.Discard, client)
	for _, ch := range []chan error{first, over} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("sends still wait after the client read")
		}
	}
}
