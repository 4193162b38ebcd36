package client

import (
	"context"
	"sync/atomic"

	"github.com/raftmq/raftmq/api"
)

// Message is what a producer sends.
type Message struct {
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
	// Queue, when not nil, names the queue; otherwise the key's hash picks
	// it (one key stays ordered), or round robin when there is no key.
	Queue *int32
}

// Producer sends messages idempotently: every request carries the
// producer's id and its own sequence number, and a retry after an unknown
// outcome (leader died mid-commit, timeout) reuses them, so the group appends
// it once. Safe for concurrent use; keep at most a few hundred requests in
// flight (the group remembers the last 1024 sequences of each producer).
type Producer struct {
	c   *Client
	id  string
	seq atomic.Uint64
}

// NewProducer returns a producer with a fresh random id.
func (c *Client) NewProducer() *Producer {
	return &Producer{c: c, id: randomID("p-")}
}

// ID is the producer id.
func (p *Producer) ID() string { return p.id }

// Send appends msgs to topic as one request (atomically) and returns one ack
// per message. It retries across leader changes until ctx ends.
func (p *Producer) Send(ctx context.Context, topic string, msgs ...Message) ([]*api.Ack, error) {
	req := &api.ProduceRequest{Topic: topic, ProducerId: p.id, Sequence: p.seq.Add(1), Messages: make([]*api.ProduceMessage, len(msgs))}
	for i, m := range msgs {
		req.Messages[i] = &api.ProduceMessage{Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body, Queue: m.Queue}
	}
	var acks []*api.Ack
	err := p.c.do(ctx, func(ctx context.Context, cl api.BrokerClient) error {
		r, err := cl.Produce(ctx, req)
		if err == nil {
			acks = r.Acks
		}
		return err
	})
	return acks, err
}
