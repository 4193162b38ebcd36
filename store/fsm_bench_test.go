package store

// Benchmarks of the FSM: applying group-commit entries (every node does this
// for every entry) and the index lookup of every pull (Locate).
//
//	go test -run '^$' -bench 'FSM' -benchmem ./store/

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
)

const fsmBenchQueues = 4

// newBenchFSM returns an FSM with topic "bench" of 4 queues, created at
// index 1 by the same command the broker sends.
func newBenchFSM(b *testing.B) *FSM {
	b.Helper()
	f := newFSM(nil, nil)
	if res := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: EncodeCreateTopic("bench", fsmBenchQueues, false)}); res != nil {
		b.Fatalf("create topic: %v", res)
	}
	return f
}

// entryMaker makes batch entries of reqs requests of msgs messages from
// `producers` distinct producer ids with increasing sequences, round robin
// over the queues, as the leader's group commit would.
type entryMaker struct {
	reqs, msgs, producers int
	body                  []byte
	seq                   []uint64
	ids                   []string
	rr                    uint32
}

func newEntryMaker(reqs, msgs, size, producers int) *entryMaker {
	m := &entryMaker{reqs: reqs, msgs: msgs, producers: producers, body: make([]byte, size), seq: make([]uint64, producers)}
	for i := 0; i < producers; i++ {
		m.ids = append(m.ids, fmt.Sprintf("p-%016x", i))
	}
	return m
}

func (m *entryMaker) next() []byte {
	reqs := make([]*raftlog.Request, m.reqs)
	for i := range reqs {
		p := i % m.producers
		m.seq[p]++
		r := &raftlog.Request{ProducerID: m.ids[p], Seq: m.seq[p], Topic: "bench", Messages: make([]raftlog.Message, m.msgs)}
		for j := range r.Messages {
			r.Messages[j] = raftlog.Message{Queue: m.rr % fsmBenchQueues, Timestamp: 1_700_000_000_000, Body: m.body}
			m.rr++
		}
		reqs[i] = r
	}
	return raftlog.EncodeBatch(reqs...)
}

// BenchmarkFSMApplyBatch applies one entry per op. Entries are encoded
// before the timer starts (a ring of 64 distinct entries would repeat
// sequences, so every op gets its own).
func BenchmarkFSMApplyBatch(b *testing.B) {
	for _, s := range []struct{ reqs, msgs, size int }{{64, 1, 1024}, {1, 64, 1024}, {256, 1, 100}} {
		b.Run(fmt.Sprintf("%dx%d/%dB", s.reqs, s.msgs, s.size), func(b *testing.B) {
			f := newBenchFSM(b)
			mk := newEntryMaker(s.reqs, s.msgs, s.size, 16)
			entries := make([][]byte, b.N)
			for i := range entries {
				entries[i] = mk.next()
			}
			b.SetBytes(int64(len(entries[0])))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res := f.Apply(&raft.Log{Index: uint64(i + 2), Type: raft.LogCommand, Data: entries[i]})
				if rs, ok := res.([]*ProduceResult); !ok || len(rs) != s.reqs || rs[0].Err != nil {
					b.Fatalf("apply %d: %v", i, res)
				}
			}
			b.ReportMetric(float64(s.reqs*s.msgs)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkFSMApplyBatchMany is raft's path: ApplyBatch with 64 committed
// entries at a time (64 requests of one 1 KiB message each).
func BenchmarkFSMApplyBatchMany(b *testing.B) {
	const perCall = 64
	f := newBenchFSM(b)
	mk := newEntryMaker(64, 1, 1024, 16)
	logs := make([]*raft.Log, b.N*perCall)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 2), Type: raft.LogCommand, Data: mk.next()}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.ApplyBatch(logs[i*perCall : (i+1)*perCall])
	}
	b.ReportMetric(float64(perCall*64)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkFSMLocate looks up the index of a queue holding 100,000 entries'
// worth of records: a random offset (a consumer far behind) and the tail (a
// caught-up consumer), with the pull path's limit of 64 locations.
func BenchmarkFSMLocate(b *testing.B) {
	const entries = 100000
	f := newBenchFSM(b)
	mk := newEntryMaker(16, 1, 16, 16) // 4 messages per queue per entry
	for i := 0; i < entries; i++ {
		f.Apply(&raft.Log{Index: uint64(i + 2), Type: raft.LogCommand, Data: mk.next()})
	}
	ti, err := f.Topic("bench")
	if err != nil {
		b.Fatal(err)
	}
	end := ti.Queues[0].Max
	if end != entries*4 {
		b.Fatalf("queue 0 holds %d messages, want %d", end, entries*4)
	}
	r := rand.New(rand.NewPCG(1, 2))
	b.Run("random", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			locs, _, err := f.Locate("bench", int32(i%fsmBenchQueues), r.Uint64N(end-300), 64)
			if err != nil || len(locs) != 64 {
				b.Fatalf("locate: %v, %d locations", err, len(locs))
			}
		}
	})
	b.Run("tail", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			locs, _, err := f.Locate("bench", 0, end-1, 64)
			if err != nil || len(locs) != 1 {
				b.Fatalf("locate: %v, %d locations", err, len(locs))
			}
		}
	})
	b.Run("parallel-random", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := rand.New(rand.NewPCG(rand.Uint64(), 2))
			for pb.Next() {
				if _, _, err := f.Locate("bench", 1, r.Uint64N(end-300), 64); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
