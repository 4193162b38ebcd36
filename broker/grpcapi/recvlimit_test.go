package grpcapi

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// TestRecvLimitAdmitsEveryRequestWithinTheBound: gRPC must read every
// produce request ValidateProduce accepts, so that its refusal is the
// broker's own error naming --max-request-bytes. The shapes where protobuf
// spends most over the log's encoding are tiny properties, tiny messages
// and tiny keys and tags; each is grown to just within the bound.
func TestRecvLimitAdmitsEveryRequestWithinTheBound(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.MaxRequestBytes = 1 << 20
	limit := RecvLimit(cfg.MaxRequestBytes)
	q := int32(7)
	shapes := map[string]func(i int) *api.ProduceMessage{
		"tiny properties": func(i int) *api.ProduceMessage {
			props := map[string]string{}
			for j := 0; j < 128; j++ {
				props[fmt.Sprintf("%c%c", 'a'+j%26, 'a'+j/26)] = ""
			}
			return &api.ProduceMessage{Properties: props}
		},
		"empty messages": func(i int) *api.ProduceMessage { return &api.ProduceMessage{} },
		"key, tag, queue": func(i int) *api.ProduceMessage {
			return &api.ProduceMessage{Key: "k", Tag: "t", Body: []byte("b"), Queue: &q, TimestampMs: 1}
		},
		"large timestamps":  func(i int) *api.ProduceMessage { return &api.ProduceMessage{TimestampMs: -1} },
		"one-byte property": func(i int) *api.ProduceMessage { return &api.ProduceMessage{Properties: map[string]string{"a": "b"}} },
	}
	for name, mk := range shapes {
		n := broker.MaxMessagesPerRequest
		if name == "tiny properties" {
			n = 4096 // about 2,000 fit; building 65,536 maps is slow
		}
		all := make([]*api.ProduceMessage, n)
		for i := range all {
			all[i] = mk(i)
		}
		req := &api.ProduceRequest{Topic: "t", ProducerId: "p", Sequence: 1}
		fits := func(n int) bool {
			req.Messages = all[:n]
			breq := produceRequest(req)
			return broker.ValidateProduce(&cfg, &breq) == nil
		}
		// The most messages of this shape within the bound.
		lo, hi := 1, len(all)
		for lo < hi {
			if mid := (lo + hi + 1) / 2; fits(mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		req.Messages = all[:lo]
		breq := produceRequest(req)
		if err := broker.ValidateProduce(&cfg, &breq); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if size := proto.Size(req); size > limit {
			t.Errorf("%s: a request within the bound is %d protobuf bytes, over gRPC's limit %d", name, size, limit)
		} else {
			t.Logf("%s: %d messages, %d protobuf bytes of at most %d", name, len(req.Messages), size, limit)
		}
	}
}
