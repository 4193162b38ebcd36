package raftlog_test

// Benchmarks of the batch codec: what the leader's group commit does per Raft
// entry (BatchBuilder), what every node's FSM and every pull do (ParseBatch +
// the lazy views) and the copying decoder of tests and tools (DecodeBatch).
//
//	go test -run '^$' -bench 'Batch' -benchmem ./raftlog/
//
// Shapes: "64x1" is 64 produce requests of one message each (the group commit
// of 64 concurrent synchronous producers), "1x64" one request of 64 messages
// (client-side batching); bodies are 1 KiB or 100 B. MB/s counts entry bytes.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/raftmq/raftmq/raftlog"
)

type codecShape struct {
	reqs, msgs, size int
}

func (s codecShape) String() string { return fmt.Sprintf("%dx%d/%dB", s.reqs, s.msgs, s.size) }

var codecShapes = []codecShape{{64, 1, 1024}, {1, 64, 1024}, {256, 1, 100}, {1, 256, 100}}

func codecRequests(s codecShape) []*raftlog.Request {
	r := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, s.size)
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	reqs := make([]*raftlog.Request, s.reqs)
	for i := range reqs {
		req := &raftlog.Request{ProducerID: "p-0123456789abcdef", Seq: uint64(1000 + i), Topic: "bench", Messages: make([]raftlog.Message, s.msgs)}
		for j := range req.Messages {
			req.Messages[j] = raftlog.Message{Queue: uint32((i + j) % 4), Timestamp: 1_700_000_000_000 + int64(i), Body: body}
		}
		reqs[i] = req
	}
	return reqs
}

// BenchmarkBatchEncode is the leader's encoding of one group-commit entry,
// sized up front as broker.batchLoop does.
func BenchmarkBatchEncode(b *testing.B) {
	for _, s := range codecShapes {
		b.Run(s.String(), func(b *testing.B) {
			reqs := codecRequests(s)
			hint := len(raftlog.EncodeBatch(reqs...))
			b.SetBytes(int64(hint))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				enc := raftlog.NewBatchBuilder(hint, raftlog.BatchV1)
				for _, r := range reqs {
					enc.Add(r)
				}
				if len(enc.Finish()) != hint {
					b.Fatal("size changed")
				}
			}
			b.ReportMetric(float64(s.reqs*s.msgs)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkBatchDecodeViews walks every request and message with the lazy
// views, touching each body: the work of the FSM's apply plus one pull.
func BenchmarkBatchDecodeViews(b *testing.B) {
	for _, s := range codecShapes {
		b.Run(s.String(), func(b *testing.B) {
			data := raftlog.EncodeBatch(codecRequests(s)...)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				batch, err := raftlog.ParseBatch(data, 0)
				if err != nil {
					b.Fatal(err)
				}
				n, total := 0, 0
				err = batch.Each(func(_ int, rv *raftlog.RequestView) bool {
					rv.Messages(func(_ int, m *raftlog.MessageView) bool {
						n++
						total += len(m.Body)
						return true
					})
					return true
				})
				if err != nil || n != s.reqs*s.msgs || total != n*s.size {
					b.Fatalf("walk: %v, %d messages, %d bytes", err, n, total)
				}
			}
			b.ReportMetric(float64(s.reqs*s.msgs)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkBatchParse is the header and CRC32C check alone.
func BenchmarkBatchParse(b *testing.B) {
	data := raftlog.EncodeBatch(codecRequests(codecShape{64, 1, 1024})...)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := raftlog.ParseBatch(data, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchDecodeCopy is DecodeBatch, which copies every field.
func BenchmarkBatchDecodeCopy(b *testing.B) {
	for _, s := range codecShapes {
		b.Run(s.String(), func(b *testing.B) {
			data := raftlog.EncodeBatch(codecRequests(s)...)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				reqs, err := raftlog.DecodeBatch(data, 0)
				if err != nil || len(reqs) != s.reqs {
					b.Fatalf("decode: %v, %d requests", err, len(reqs))
				}
			}
			b.ReportMetric(float64(s.reqs*s.msgs)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
