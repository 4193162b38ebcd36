package client

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/raftlog"
)

// TestMessageSizeBoundsLogEncoding: the SDK's size of a message is never
// below what the broker's log encodes it to (whatever queue and timestamp
// the broker gives it), so a request the SDK builds within the bound is
// within the broker's.
func TestMessageSizeBoundsLogEncoding(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	str := func(max int) string { return strings.Repeat("s", rng.Intn(max+1)) }
	for i := 0; i < 2000; i++ {
		m := Message{Key: str(300), Tag: str(20), Body: make([]byte, rng.Intn(70000))}
		if n := rng.Intn(5); n > 0 {
			m.Properties = map[string]string{}
			for j := 0; j < n; j++ {
				m.Properties[str(200)+string(rune('a'+j))] = str(20000)
			}
		}
		lm := raftlog.Message{Queue: 1023, Timestamp: time.Now().UnixMilli(), Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body}
		if got, exact := messageSize(&m), lm.EncodedSize(); got < exact {
			t.Fatalf("message %d: SDK size %d below the log's %d", i, got, exact)
		}
		r := raftlog.Request{ProducerID: str(maxProducerIDLen), Seq: rng.Uint64(), Topic: str(255) + "t"}
		if got, exact := requestOverhead(r.Topic), r.EncodedSize()+9; got < exact {
			t.Fatalf("request %d: SDK overhead %d below the log's %d (with a 10-byte count)", i, got, exact)
		}
	}
}

// TestSendOverRequestLimitFailsBeforeSending: one Send the broker would
// refuse fails at once with ErrRequestTooLarge naming the limit, without
// a broker (the address answers nothing).
func TestSendOverRequestLimitFailsBeforeSending(t *testing.T) {
	c, err := New(Config{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := c.NewProducerWith(ProducerConfig{RequestLimit: 64 << 10})
	big := Message{Properties: map[string]string{"p": strings.Repeat("v", 40<<10)}, Key: strings.Repeat("k", 30<<10)}
	done := make(chan error, 1)
	p.SendAsync("t", []Message{big}, func(_ []*api.Ack, err error) { done <- err })
	select {
	case err := <-done:
		if !errors.Is(err, ErrRequestTooLarge) || !strings.Contains(err.Error(), "65536") || !strings.Contains(err.Error(), "--max-request-bytes") {
			t.Fatalf("Send over the limit: %v, want ErrRequestTooLarge naming the limit", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Send over the limit was not refused at once")
	}
	if p.cfg.MaxRequestBytes > p.cfg.RequestLimit {
		t.Fatalf("coalescing target %d above the request limit %d", p.cfg.MaxRequestBytes, p.cfg.RequestLimit)
	}
}

func TestExplainSizeRefusal(t *testing.T) {
	refused := status.Error(codes.ResourceExhausted, "grpc: received message larger than max (50000000 vs. 41943040)")
	if Retryable(refused) {
		t.Fatal("a gRPC size refusal is retryable")
	}
	err := explainSizeRefusal(refused, 64<<20)
	if !errors.Is(err, ErrRequestTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("explained: %v", err)
	}
	busy := status.Error(codes.ResourceExhausted, "busy: 1 bytes held")
	if !Retryable(busy) || explainSizeRefusal(busy, 1) != busy {
		t.Fatal("a busy broker is no longer retried as before")
	}
}
