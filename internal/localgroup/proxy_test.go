package localgroup

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestProxyBlackholeHoldsConnectionsAndPassesNothing: blackholed, a proxy
// keeps the connection open and delivers nothing; healed, it delivers what
// was held, in order.
func TestProxyBlackholeHoldsConnectionsAndPassesNothing(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	p, err := NewProxy(echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip := func(msg string) {
		t.Helper()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
			t.Fatalf("read %q, %v; want %q", buf, err, msg)
		}
	}
	roundTrip("before")

	p.Blackhole(true)
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatalf("write into the blackhole: %v (the connection must stay open)", err)
	}
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 16)
	if n, err := c.Read(buf); n > 0 || err == nil {
		t.Fatalf("read %q through a blackhole", buf[:n])
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("blackholed read ended with %v, want silence (a timeout)", err)
	}

	p.Blackhole(false)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after heal read %q, %v; want the held bytes", got, err)
	}
	roundTrip("after")
}
