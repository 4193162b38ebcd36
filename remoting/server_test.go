package remoting

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
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
