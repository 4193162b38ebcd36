package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

func validConfig() Config {
	c := DefaultConfig()
	c.NodeID, c.ClientAddr = "n1", "127.0.0.1:1"
	return c
}

// bigProps is n properties of about 16 KB each (the per-property limit).
func bigProps(n int) map[string]string {
	props := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k := strings.Repeat("k", 8) + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		props[k] = strings.Repeat("v", maxPropertyBytes-len(k))
	}
	return props
}

// TestLargeKeysRequestRefusedAtTheEdge: the first reproduction of "one
// large request stops all writes for good", 4,700 messages with 16 KiB keys
// (77 MB of keys, bodies empty), must be refused by ValidateProduce with an
// error that names the limit and its flag.
func TestLargeKeysRequestRefusedAtTheEdge(t *testing.T) {
	cfg := validConfig()
	key := strings.Repeat("k", maxKeyBytes)
	req := ProduceRequest{Topic: "t", Messages: make([]ProduceMessage, 4700)}
	for i := range req.Messages {
		req.Messages[i] = ProduceMessage{Key: key, Body: []byte("x")}
	}
	err := ValidateProduce(&cfg, &req)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") || !strings.Contains(err.Error(), "16777216") {
		t.Fatalf("4,700 x 16 KiB keys: %v, want ErrTooLarge naming --max-request-bytes and its value", err)
	}
}

// TestManyPropertiesRequestRefusedAtTheEdge: the second reproduction, 16
// messages x 128 properties of 16 KB (32 MiB of properties, which the old
// size check left out entirely).
func TestManyPropertiesRequestRefusedAtTheEdge(t *testing.T) {
	cfg := validConfig()
	props := bigProps(maxProperties)
	req := ProduceRequest{Topic: "t", Messages: make([]ProduceMessage, 16)}
	for i := range req.Messages {
		req.Messages[i] = ProduceMessage{Properties: props, Body: []byte("x")}
	}
	if err := ValidateProduce(&cfg, &req); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Fatalf("16 x 128 properties of 16 KB: %v, want ErrTooLarge naming --max-request-bytes", err)
	}
}

// TestValidateProduceBoundsEncodedSize: ValidateProduce's size is an upper
// bound of the request's exact encoded size whatever queue the leader picks,
// so a request it admits always fits MaxRequestBytes; and it is tight
// enough that a request just below the bound is admitted.
func TestValidateProduceBoundsEncodedSize(t *testing.T) {
	cfg := validConfig()
	cfg.MaxRequestBytes = 1 << 20
	props := map[string]string{"a": "", "b": strings.Repeat("v", 100)}
	for _, bodyLen := range []int{0, 1, 1000, 1<<20 - 2000, 1<<20 - 100, 1 << 20} {
		req := ProduceRequest{Topic: "topic", ProducerID: "p-1", Seq: 1 << 40, Messages: []ProduceMessage{
			{Key: "key", Tag: "tag", Properties: props, Body: make([]byte, bodyLen)}, {Body: []byte("x")}}}
		verr := ValidateProduce(&cfg, &req)
		exact := raftlog.Request{ProducerID: req.ProducerID, Seq: req.Seq, Topic: req.Topic}
		for _, m := range req.Messages {
			exact.Messages = append(exact.Messages, raftlog.Message{Queue: store.MaxQueues - 1, Timestamp: 1780000000000,
				Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body})
		}
		size := exact.EncodedSize()
		switch {
		case verr == nil && size > cfg.MaxRequestBytes:
			t.Errorf("body %d: admitted a request of %d encoded bytes over the %d bound", bodyLen, size, cfg.MaxRequestBytes)
		case verr != nil && size+64 < cfg.MaxRequestBytes:
			t.Errorf("body %d: refused a request of %d encoded bytes, well within %d: %v", bodyLen, size, cfg.MaxRequestBytes, verr)
		}
	}
}

func TestConfigValidateRequestBound(t *testing.T) {
	if c := validConfig(); c.Validate() != nil {
		t.Fatalf("default config: %v", c.Validate())
	}
	cases := []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"request bound over one entry", func(c *Config) { c.MaxRequestBytes = raftlog.MaxEntryBytes }, "max-request-bytes"},
		{"request bound of 80 MiB", func(c *Config) { c.MaxRequestBytes = 80 << 20 }, "max-request-bytes"},
		{"request bound tiny", func(c *Config) { c.MaxRequestBytes = 10 }, "max-request-bytes"},
		{"body over the request bound", func(c *Config) { c.MaxRequestBytes, c.MaxMessageBytes = 1<<20, 2<<20 }, "max-message-bytes"},
		{"batch over one entry", func(c *Config) { c.MaxBatchBytes = 64 << 20 }, "max-batch-bytes"},
	}
	for _, tc := range cases {
		c := validConfig()
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	c := validConfig()
	c.MaxRequestBytes, c.MaxBatchBytes, c.MaxMessageBytes = MaxRequestLimit, MaxRequestLimit, MaxRequestLimit
	if err := c.Validate(); err != nil {
		t.Fatalf("largest allowed bounds: %v", err)
	}
}

// TestStallTracker: readiness counts how long an index has stayed below its
// target without moving; moving or catching up resets it.
func TestStallTracker(t *testing.T) {
	var s stall
	t0 := time.Unix(1000, 0)
	s.observe(5, 5, t0)
	if d := s.stuckFor(t0.Add(time.Hour)); d != 0 {
		t.Fatalf("caught up: stuck for %s", d)
	}
	s.observe(5, 9, t0)
	s.observe(5, 9, t0.Add(3*time.Second))
	if d := s.stuckFor(t0.Add(4 * time.Second)); d != 4*time.Second {
		t.Fatalf("stuck at 5 below 9: %s, want 4s", d)
	}
	s.observe(6, 12, t0.Add(5*time.Second)) // moving under load: not stuck
	if d := s.stuckFor(t0.Add(5 * time.Second)); d != 0 {
		t.Fatalf("after moving: stuck for %s", d)
	}
	s.observe(12, 12, t0.Add(6*time.Second))
	s.observe(12, 13, t0.Add(7*time.Second))
	if d := s.stuckFor(t0.Add(8 * time.Second)); d != time.Second {
		t.Fatalf("behind again: %s, want 1s", d)
	}
}
