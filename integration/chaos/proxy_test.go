package chaos

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(l)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, timeout time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	l, err := r.ReadString('\n')
	return l, err
}

func TestProxyModes(t *testing.T) {
	p, err := NewProxy("test", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "one", 5*time.Second); err != nil || got != "one\n" {
		t.Fatalf("pass: %q %v", got, err)
	}

	// Blackhole: nothing comes back while it lasts; held bytes arrive after.
	p.Set(Blackhole, 0)
	if _, err := roundTrip(c, r, "two", 300*time.Millisecond); err == nil {
		t.Fatal("blackhole: got an answer")
	}
	p.Set(Pass, 0)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "two\n" {
		t.Fatalf("after blackhole: %q %v", got, err)
	}

	// Delay: answers come, later.
	p.Set(Pass, 100*time.Millisecond)
	start := time.Now()
	if got, err := roundTrip(c, r, "three", 5*time.Second); err != nil || got != "three\n" {
		t.Fatalf("delay: %q %v", got, err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("delay: round trip took %s, want >= 200ms (100ms each way)", d)
	}

	// Drop: the open connection is closed, new ones are refused.
	p.Set(Drop, 0)
	if _, err := roundTrip(c, r, "four", 2*time.Second); err == nil {
		t.Fatal("drop: connection still works")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		c2.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := roundTrip(c2, bufio.NewReader(c2), "five", 2*time.Second); err == nil {
			t.Fatal("drop: new connection works")
		}
		c2.Close()
	}

	// Healed: new connections work again.
	p.Set(Pass, 0)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(c3, bufio.NewReader(c3), "six", 5*time.Second); err != nil || got != "six\n" {
		t.Fatalf("healed: %q %v", got, err)
	}
}
