package server_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
)

// TestSendAsync: many SendAsync calls in flight from one goroutine each get
// exactly one callback with one ack per message, and the topic holds every
// message exactly once at the acknowledged positions.
func TestSendAsync(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "async", 2, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducer()

	var emptyErr error
	p.SendAsync("async", nil, func(_ []*api.Ack, err error) { emptyErr = err })
	if emptyErr == nil {
		t.Fatal("SendAsync of no messages: no error")
	}

	const sends, perSend = 300, 3
	window := make(chan struct{}, 64)
	var (
		mu    sync.Mutex
		calls = map[int]int{}
		where = map[string]string{} // body -> queue/offset
		wg    sync.WaitGroup
	)
	for i := 0; i < sends; i++ {
		window <- struct{}{}
		wg.Add(1)
		msgs := make([]client.Message, perSend)
		for j := range msgs {
			msgs[j] = client.Message{Body: []byte(fmt.Sprintf("s%d-m%d", i, j))}
		}
		i := i
		p.SendAsync("async", msgs, func(acks []*api.Ack, err error) {
			defer wg.Done()
			defer func() { <-window }()
			mu.Lock()
			defer mu.Unlock()
			calls[i]++
			if err != nil {
				t.Errorf("send %d: %v", i, err)
				return
			}
			if len(acks) != perSend {
				t.Errorf("send %d: %d acks for %d messages", i, len(acks), perSend)
				return
			}
			for j, a := range acks {
				where[string(msgs[j].Body)] = fmt.Sprintf("%d/%d", a.Queue, a.Offset)
			}
		})
	}
	wg.Wait()
	for i := 0; i < sends; i++ {
		if calls[i] != 1 {
			t.Fatalf("send %d: callback ran %d times", i, calls[i])
		}
	}

	// Read both queues back through the leader: every message once, where
	// its ack said.
	b := c.Node(c.Leader()).Broker()
	seen := map[string]string{}
	for q := int32(0); q < 2; q++ {
		for off := uint64(0); ; {
			r, err := b.Pull(ctx, broker.PullRequest{Topic: "async", Queue: q, Offset: off, MaxMessages: 500})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Messages) == 0 {
				break
			}
			for _, m := range r.Messages {
				if _, dup := seen[string(m.Body)]; dup {
					t.Fatalf("%s stored twice", m.Body)
				}
				seen[string(m.Body)] = fmt.Sprintf("%d/%d", q, m.Offset)
			}
			off = r.NextOffset
		}
	}
	if len(seen) != sends*perSend {
		t.Fatalf("topic holds %d messages, sent %d", len(seen), sends*perSend)
	}
	for body, pos := range where {
		if seen[body] != pos {
			t.Fatalf("%s acknowledged at %s, stored at %s", body, pos, seen[body])
		}
	}
}

// TestBusyLeaderHoldsProducersBack: with a 1 MiB budget for pending produce
// bytes, concurrent large requests beyond it and beyond as many bytes
// waiting for it are refused as busy, and SDK
// producers, which retry busy answers with the same sequence, get every
// message appended exactly once.
func TestBusyLeaderHoldsProducersBack(t *testing.T) {
	c := newCluster(t, 3, func(_ int, cfg *server.Config) { cfg.Broker.MaxPendingBytes = 1 << 20 })
	l := c.Leader()
	ctx := ctxT(t, 4*time.Minute)
	// 24 MiB through a 1 MiB budget under -race on a loaded machine: the
	// sends may retry for longer than the SDK's default 30 s.
	cl, err := client.New(client.Config{Servers: c.Addrs(), RetryTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, "busy", 2, false); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 200<<10)

	// The broker itself: 16 requests of 400 KiB at once cannot all fit.
	var busy, ok sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := 0; i < 16; i++ {
		busy.Add(1)
		go func() {
			defer busy.Done()
			_, err := c.Node(l).Broker().Produce(ctx, broker.ProduceRequest{Topic: "busy",
				Messages: []broker.ProduceMessage{{Body: body}, {Body: body}}})
			if errors.Is(err, broker.ErrBusy) {
				mu.Lock()
				refused++
				mu.Unlock()
			} else if err != nil {
				t.Errorf("produce: %v", err)
			}
		}()
	}
	busy.Wait()
	if refused == 0 {
		t.Fatal("16 concurrent requests of 400 KiB under a 1 MiB budget: none refused as busy")
	}
	t.Logf("%d of 16 requests refused as busy", refused)
	accepted := 16 - refused

	// SDK producers retry busy answers until everything is in.
	const producers, sends = 6, 10
	for i := 0; i < producers; i++ {
		p := cl.NewProducer()
		for j := 0; j < sends; j++ {
			ok.Add(1)
			p.SendAsync("busy", []client.Message{{Body: body}, {Body: body}}, func(acks []*api.Ack, err error) {
				defer ok.Done()
				if err != nil || len(acks) != 2 {
					t.Errorf("send: %d acks, %v", len(acks), err)
				}
			})
		}
	}
	ok.Wait()
	// Every node holds each acknowledged message once. A node may still be
	// applying the last entries (leadership can move under this load), so
	// each is polled until it has applied what the current leader has.
	want := uint64(2 * (accepted + producers*sends))
	held := func(i int) uint64 {
		ti, err := c.Node(i).Store().Topic("busy")
		if err != nil {
			return 0
		}
		var got uint64
		for _, q := range ti.Queues {
			got += q.Max
		}
		return got
	}
	for i := range c.Nodes() {
		waitFor(t, 30*time.Second, fmt.Sprintf("n%d to hold %d messages", i+1, want), func() bool { return held(i) >= want })
		if got := held(i); got != want {
			t.Fatalf("n%d holds %d messages, want %d (each acknowledged message once)", i+1, got, want)
		}
	}
}
