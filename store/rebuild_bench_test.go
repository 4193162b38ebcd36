package store

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
	stores, err := raftlog.Open(filepath.Join(dir, "data"), raftlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer stores.Close()
	ix, err := queueindex.Open(filepath.Join(dir, "index"), queueindex.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	f := newFSM(nil, ix)
	defer f.Close()
	body := make([]byte, 100)
	var logs []*raft.Log
	for i := uint64(1); i <= n+1; i++ {
		data := EncodeCreateTopic("t", 1, false)
		if i > 1 {
			data = raftlog.EncodeBatch(&raftlog.Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []raftlog.Message{{Queue: 0, Body: body}}})
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
	// The rebuilds run here, not on a goroutine of their own.
	rb := &rebuilds{log: stores, stop: make(chan struct{}), done: make(chan struct{})}
	close(rb.done)
	f.rb = rb
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
				f.rebuild(rb, req)
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
