package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
)

// TestSendAsync: many SendAsync calls in flight from one goroutine each get
// exactly one callback with one ack per message, and the topic holds every
// message exactly once at the acknowledged positions.
func TestSendAsync(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.leader()
	cl := c.client(t)
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
	b := c.nodes[c.leader()].Broker()
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
