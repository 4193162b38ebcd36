package store

// What a node's state machine costs as its retained log grows: heap, the
// snapshot's size and time, and the time a restart takes to restore it,
// with the queue index on disk.
//
//	RAFTMQ_GROWTH_ENTRIES=1000000,10000000 go test -run TestCostAgainstRetainedEntries -v ./store/
//
// (`make bench-growth`). Without the variable the test applies 200,000
// entries and asserts that none of the three grows with them.

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/queueindex"
)

type growthPoint struct {
	entries          int
	heap             uint64 // live heap after a GC
	snapBytes        int
	snapTook         time.Duration
	restartTook      time.Duration // open the index, restore the snapshot
	heapAfterRestart uint64
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func TestCostAgainstRetainedEntries(t *testing.T) {
	sizes := []int{20_000, 200_000}
	if env := os.Getenv("RAFTMQ_GROWTH_ENTRIES"); env != "" {
		sizes = nil
		for _, s := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 {
				t.Fatalf("RAFTMQ_GROWTH_ENTRIES: %q is not a positive count", s)
			}
			sizes = append(sizes, n)
		}
	}
	const queues = 8
	dir := t.TempDir()
	idx, err := queueindex.Open(dir, queueindex.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	f := newFSM(nil, idx)
	var index uint64 = 1
	if res := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: EncodeCreateTopic("g", queues, false)}); res != nil {
		t.Fatal(res)
	}
	// One message of 100 bytes per entry, from 16 producers: the index's
	// worst case, one record per message.
	body := bytes.Repeat([]byte("x"), 100)
	seq := make([]uint64, 16)
	applied := 0
	var points []growthPoint
	start := time.Now()
	for _, target := range sizes {
		for ; applied < target; applied++ {
			p := applied % len(seq)
			seq[p]++
			req := &raftlog.Request{ProducerID: fmt.Sprintf("p-%02d", p), Seq: seq[p], Topic: "g",
				Messages: []raftlog.Message{{Queue: uint32(applied % queues), Body: body}}}
			index++
			if _, ok := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: raftlog.EncodeBatch(req)}).([]*ProduceResult); !ok {
				t.Fatalf("entry %d not applied", index)
			}
			if testing.Verbose() && applied > 0 && applied%5_000_000 == 0 {
				t.Logf("%d entries applied (%s)", applied, time.Since(start).Round(time.Second))
			}
		}
		pt := growthPoint{entries: applied, heap: liveHeap()}

		t0 := time.Now()
		sink := persistSnapshot(t, f)
		pt.snapTook, pt.snapBytes = time.Since(t0), sink.Len()

		// A restart: close the index, open it again, restore the snapshot.
		if err := f.idx.Close(); err != nil {
			t.Fatal(err)
		}
		f = nil
		t0 = time.Now()
		if idx, err = queueindex.Open(dir, queueindex.DefaultOptions()); err != nil {
			t.Fatal(err)
		}
		f = newFSM(nil, idx)
		if err := f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
			t.Fatal(err)
		}
		pt.restartTook = time.Since(t0)
		pt.heapAfterRestart = liveHeap()
		points = append(points, pt)

		// The restarted node still finds the first and the last entries.
		for _, off := range []uint64{0, uint64((applied - 1) / queues)} {
			locs, _, err := f.Locate("g", 0, off, 1)
			if err != nil || len(locs) != 1 || locs[0].LogIndex != 2+off*queues {
				t.Fatalf("after %d entries, offset %d of queue 0: %v %v, want log index %d", applied, off, locs, err, 2+off*queues)
			}
		}
	}
	t.Logf("%d queues, 1 message of 100 B per entry; index on disk in %s", queues, dir)
	t.Logf("%12s %12s %12s %10s %12s %14s", "entries", "live heap", "snapshot", "snap took", "restart took", "heap restarted")
	for _, p := range points {
		t.Logf("%12d %10.1f MB %10d B %10s %12s %11.1f MB", p.entries, float64(p.heap)/1e6, p.snapBytes,
			p.snapTook.Round(time.Microsecond), p.restartTook.Round(time.Microsecond), float64(p.heapAfterRestart)/1e6)
	}
	first, last := points[0], points[len(points)-1]
	// The bounded tails (256 records per queue) and per-file entries are the
	// only index memory; 4 MB is far above both and far below the 32 bytes
	// per entry an in-memory index would take.
	if last.heapAfterRestart > first.heapAfterRestart+4<<20 {
		t.Errorf("heap after a restart grew from %d to %d bytes between %d and %d entries", first.heapAfterRestart, last.heapAfterRestart, first.entries, last.entries)
	}
	// The snapshot holds the producers' dedupe windows (16 × DedupeWindow
	// results here), whose numbers take a few more varint bytes as the log
	// grows; an index in it would add 28 bytes per entry.
	if last.snapBytes > first.snapBytes*11/10 {
		t.Errorf("snapshot grew from %d to %d bytes between %d and %d entries", first.snapBytes, last.snapBytes, first.entries, last.entries)
	}
	if err := f.idx.Close(); err != nil {
		t.Fatal(err)
	}
}
