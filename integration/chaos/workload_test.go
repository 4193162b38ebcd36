package chaos

import (
	"testing"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// The hand-made requests at and over the request bound are where they
// claim to be, as the broker's own edge check counts them.
func TestOddityRequestSizes(t *testing.T) {
	cfg := broker.DefaultConfig()
	validate := func(msgs []*api.ProduceMessage) error {
		req := broker.ProduceRequest{Topic: "chaos", ProducerID: "odd-123456-99", Seq: 1}
		for _, m := range msgs {
			req.Messages = append(req.Messages, broker.ProduceMessage{Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body})
		}
		return broker.ValidateProduce(&cfg, &req)
	}
	if err := validate(atLimit("x1-000000")); err != nil {
		t.Errorf("at-limit request refused: %v", err)
	}
	if s := exactSize(atLimit("x1-000000")); s < limitRequestBytes-1024 {
		t.Errorf("at-limit request encodes to %d bytes, not near the limit %d", s, limitRequestBytes)
	}
	for _, l := range overLimits() {
		if err := validate(l.make("x1-000001")); err == nil {
			t.Errorf("%s: accepted by broker.ValidateProduce", l.what)
		}
	}
}
