package store

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/queueindex"
)

var rebuildRecords = flag.Int("rebuild.records", 100_000, "BenchmarkIndexRebuild: records of the queue")

// BenchmarkIndexRebuild times the rebuild of one queue's index of 100,000
// records (-rebuild.records; one 100-byte message per entry) over a raft-wal
// log on disk:
// "from-log" with every index file cut to nothing (each record derived
// from its entry, read from the log), "one-record" with one record damaged
// (the others copied from the old index). The log's entries are in the
// page cache, as on a node that wrote them recently.
//
//	go test ./store/ -run '^$' -bench IndexRebuild -benchtime 3x
//	go test ./store/ -run '^$' -bench IndexRebuild -benchtime 1x -rebuild.records 1000000
func BenchmarkIndexRebuild(b *testing.B) {
	n := uint64(*rebuildRecords)
	dir := b.TempDir()
	stores, f := rebuildBenchLog(b, dir, 1, n)
	rb := rebuildHere(f, stores)
	files := func() []string {
		out, _ := filepath.Glob(filepath.Join(dir, "index", "*", "0", "*.idx"))
		return out
	}
	for _, tc := range []struct {
		name   string
		damage func()
	}{
		{"from-log", func() {
			for _, p := range files() {
				os.Truncate(p, 0)
			}
		}},
		{"one-record", func() {
			fh, err := os.OpenFile(files()[0], os.O_RDWR, 0)
			if err != nil {
				b.Fatal(err)
			}
			fh.WriteAt([]byte{0xff}, 1000*queueindex.RecordLen+1)
			fh.Close()
		}},
	} {
		b.Run(fmt.Sprintf("%s/%d", tc.name, n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				if err := f.idx.Flush(); err != nil {
					b.Fatal(err)
				}
				tc.damage()
				t := f.topics["t"]
				req := rebuildReq{topic: "t", q: t.queues[0]}
				before := rb.rebuilt.Load()
				b.StartTimer()
				f.rebuild(rb, req, nil)
				b.StopTimer()
				if rb.rebuilt.Load() != before+1 || rb.refused.Load() != 0 {
					b.Fatalf("rebuilt %d, refused %d", rb.rebuilt.Load(), rb.refused.Load())
				}
				if locs, _, err := f.Locate("t", 0, n-1, 1); err != nil || len(locs) != 1 || locs[0].LogIndex != n+1 {
					b.Fatalf("last offset after the rebuild: %v %v", locs, err)
				}
			}
		})
	}
}

// rebuildBenchLog builds in dir a raft-wal log of a topic "t" of queues
// queues and n entries after it of one 100-byte message each, queue by
// queue in turn, and an FSM that applied them with its index in dir/index;
// both are closed at the benchmark's end.
func rebuildBenchLog(b *testing.B, dir string, queues int32, n uint64) (*raftlog.Stores, *FSM) {
	b.Helper()
	stores, err := raftlog.Open(filepath.Join(dir, "data"), raftlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stores.Close() })
	ix, err := queueindex.Open(filepath.Join(dir, "index"), queueindex.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	f := newFSM(nil, ix)
	b.Cleanup(func() { f.Close() })
	body := make([]byte, 100)
	var logs []*raft.Log
	for i := uint64(1); i <= n+1; i++ {
		data := EncodeCreateTopic("t", queues, false)
		if i > 1 {
			data = raftlog.EncodeBatch(&raftlog.Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []raftlog.Message{{Queue: uint32(i % uint64(queues)), Body: body}}})
		}
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data})
		if len(logs) == 1000 || i == n+1 {
			if err := stores.Log.StoreLogs(logs); err != nil {
				b.Fatal(err)
			}
			f.ApplyBatch(logs)
			logs = logs[:0]
		}
	}
	return stores, f
}

// countingLog counts the entries read from a LogReader.
type countingLog struct {
	LogReader
	reads atomic.Uint64
}

func (c *countingLog) ReadUncached(idx uint64) (raftlog.Entry, error) {
	c.reads.Add(1)
	return c.LogReader.ReadUncached(idx)
}

// BenchmarkIndexRebuildQueues times the rebuild of every queue of a topic
// of 8 queues whose index files were all cut to nothing, over a raft-wal
// log of 100,000 entries (-rebuild.records; one 100-byte message per entry,
// queue by queue in turn), one queue after the other and together, and
// reports the log entries read.
//
//	go test ./store/ -run '^$' -bench IndexRebuildQueues -benchtime 3x
func BenchmarkIndexRebuildQueues(b *testing.B) {
	const queues = 8
	n := uint64(*rebuildRecords)
	dir := b.TempDir()
	stores, f := rebuildBenchLog(b, dir, queues, n)
	counted := &countingLog{LogReader: stores}
	rb := rebuildHere(f, counted)
	for _, mode := range []struct {
		name string
		run  func(reqs []rebuildReq)
	}{
		{"one-by-one", func(reqs []rebuildReq) {
			for _, r := range reqs {
				f.rebuild(rb, r, nil)
			}
		}},
		{"together", func(reqs []rebuildReq) { f.rebuildGroup(rb, reqs) }},
	} {
		b.Run(fmt.Sprintf("%s/%dx%d", mode.name, queues, n), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				if err := f.idx.Flush(); err != nil {
					b.Fatal(err)
				}
				files, _ := filepath.Glob(filepath.Join(dir, "index", "*", "*", "*.idx"))
				for _, p := range files {
					os.Truncate(p, 0)
				}
				f.mu.RLock()
				t := f.topics["t"]
				var reqs []rebuildReq
				for q := range queues {
					reqs = append(reqs, rebuildReq{topic: "t", n: q, q: t.queues[q]})
				}
				f.mu.RUnlock()
				before, reads := rb.rebuilt.Load(), counted.reads.Load()
				b.StartTimer()
				mode.run(reqs)
				b.StopTimer()
				if rb.rebuilt.Load() != before+queues || rb.refused.Load() != 0 {
					b.Fatalf("rebuilt %d, refused %d", rb.rebuilt.Load()-before, rb.refused.Load())
				}
				b.ReportMetric(float64(counted.reads.Load()-reads), "entries_read/op")
				for q := range queues {
					if locs, _, err := f.Locate("t", int32(q), n/queues-1, 1); err != nil || len(locs) != 1 {
						b.Fatalf("queue %d: last offset after the rebuild: %v %v", q, locs, err)
					}
				}
			}
		})
	}
}
