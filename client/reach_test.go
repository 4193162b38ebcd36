package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// closedAddr is an address on which nothing listens.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestGivesUpWhenNoAddressIsANode(t *testing.T) {
	httpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) }))
	defer httpSrv.Close()
	for _, tc := range []struct {
		name, addr, why string
	}{
		{"refused", closedAddr(t), "connection refused"},
		{"http port", strings.TrimPrefix(httpSrv.URL, "http://"), "not raftmq's client API"},
		{"unresolvable", "no-such-host.invalid:9001", "does not resolve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var said []string
			c, err := New(Config{Servers: []string{tc.addr}, RetryTimeout: 30 * time.Second,
				GiveUpUnreachable: 300 * time.Millisecond, WaitingAfter: 100 * time.Millisecond,
				OnWaiting: func(m string) { mu.Lock(); said = append(said, m); mu.Unlock() }})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			_, err = c.CreateTopic(context.Background(), "t", 1, false)
			if !errors.Is(err, ErrNoNode) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("err = %v, want ErrNoNode saying %q", err, tc.why)
			}
			if took := time.Since(start); took > 20*time.Second {
				t.Errorf("gave up after %s, want about GiveUpUnreachable, far below RetryTimeout", took)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(said) != 1 || !strings.Contains(said[0], "waiting for "+tc.addr) || !strings.Contains(said[0], tc.why) {
				t.Errorf("OnWaiting said %q, want once: waiting for %s (%s)", said, tc.addr, tc.why)
			}
		})
	}
}

func TestWaitsThroughRefusalsWithoutGiveUp(t *testing.T) {
	c, err := New(Config{Servers: []string{closedAddr(t)}, RetryTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err = c.CreateTopic(ctx, "t", 1, false)
	if errors.Is(err, ErrNoNode) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline: a client without GiveUpUnreachable keeps retrying", err)
	}
}
