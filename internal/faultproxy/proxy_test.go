package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string { return echoServerTelling(t, nil) }

// echoServerTelling is echoServer, sending each line it reads to got first
// (when not nil).
func echoServerTelling(t *testing.T, got chan<- string) string {
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
					if got != nil {
						got <- l
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

// connect starts a proxy to target, dials it and checks one round trip
// through it; the proxy and the connection close with the test.
func connect(t *testing.T, target string) (*Proxy, net.Conn, *bufio.Reader) {
	t.Helper()
	p, err := New("test", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "first", 5*time.Second); err != nil || got != "first\n" {
		t.Fatalf("pass: %q %v", got, err)
	}
	return p, c, r
}

func TestProxyModes(t *testing.T) {
	p, c, r := connect(t, echoServer(t))

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

// Hold blackholes one direction only: with the replies held, the target
// still gets every request (as in a one-way partition, where the other side
// hears the requests but its answers are lost); with the requests held, it
// gets nothing. Set lifts both, and the held bytes arrive in order.
func TestProxyHoldsOneDirection(t *testing.T) {
	got := make(chan string, 16)
	p, c, r := connect(t, echoServerTelling(t, got))
	<-got

	p.Hold(false) // replies held
	if _, err := roundTrip(c, r, "b", 300*time.Millisecond); err == nil {
		t.Fatal("a reply came through while replies are held")
	}
	select {
	case l := <-got:
		if l != "b\n" {
			t.Fatalf("target got %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the target while only replies are held")
	}
	p.Set(Pass, 0)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if l, err := r.ReadString('\n'); err != nil || l != "b\n" {
		t.Fatalf("held reply after healing: %q %v", l, err)
	}

	p.Hold(true) // requests held
	if _, err := roundTrip(c, r, "c", 300*time.Millisecond); err == nil {
		t.Fatal("a reply came through while requests are held")
	}
	select {
	case l := <-got:
		t.Fatalf("target got %q while requests are held", l)
	case <-time.After(300 * time.Millisecond):
	}
	p.Set(Pass, 0)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if l, err := r.ReadString('\n'); err != nil || l != "c\n" {
		t.Fatalf("held request after healing: %q %v", l, err)
	}
}

// TestProxyBlackholeHoldsConnectionsAndPassesNothing: blackholed, a proxy
// keeps the connection open (writes succeed) and delivers nothing (reads
// time out, they do not fail); healed, it delivers what was held, in order.
func TestProxyBlackholeHoldsConnectionsAndPassesNothing(t *testing.T) {
	p, c, r := connect(t, echoServer(t))

	p.Set(Blackhole, 0)
	_, err := roundTrip(c, r, "held", 300*time.Millisecond)
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("round trip through a blackhole ended with %v, want silence (a timeout)", err)
	}

	p.Set(Pass, 0)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after heal read %q, %v; want the held bytes", got, err)
	}
	if got, err := roundTrip(c, r, "after", 10*time.Second); err != nil || got != "after\n" {
		t.Fatalf("healed: %q %v", got, err)
	}
}
