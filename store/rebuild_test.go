package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store/queueindex"
)

// memLog is a Raft log in memory: what the FSM applied, by index, from
// first on.
type memLog struct {
	mu    sync.Mutex
	data  map[uint64][]byte
	first uint64
}

func (l *memLog) ReadUncached(idx uint64) (raftlog.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.data[idx]
	if !ok || idx < l.first {
		return raftlog.Entry{}, fmt.Errorf("read index %d: %w", idx, raftlog.ErrBelowFloor)
	}
	return raftlog.Entry{Data: d}, nil
}

func (l *memLog) FirstIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}

// logged is an FSM over a queue index on disk of small files and the
// memory log of what it applied.
type logged struct {
	t   *testing.T
	f   *FSM
	log *memLog
	dir string
	idx uint64
}

var rebuildOpts = queueindex.Options{RecordsPerFile: 100, Tail: 64}

// rebuildHere makes f's index rebuilds run on the caller's goroutine,
// reading log (rebuildWaiting runs them), instead of on a goroutine of
// their own.
func rebuildHere(f *FSM, log LogReader) *rebuilds {
	rb := &rebuilds{log: log, stop: make(chan struct{}), done: make(chan struct{})}
	close(rb.done)
	f.rb = rb
	return rb
}

// loseEveryIndex cuts every queue index file of l to nothing, lets the
// FSM find it and runs the rebuilds rb then waits for; it returns the
// files it cut.
func (l *logged) loseEveryIndex(t *testing.T, rb *rebuilds) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(l.dir, "*", "*", "*.idx"))
	for _, f := range files {
		if err := os.Truncate(f, 0); err != nil {
			t.Fatal(err)
		}
	}
	l.f.checkIndexFiles()
	if !l.f.rebuildWaiting(rb) {
		t.Fatal("no rebuild waiting after every index file was cut")
	}
	return files
}

func newLogged(t *testing.T) *logged {
	dir := t.TempDir()
	ix, err := queueindex.Open(dir, rebuildOpts)
	if err != nil {
		t.Fatal(err)
	}
	l := &logged{t: t, f: newFSM(hclog.New(&hclog.LoggerOptions{Output: testWriter{t}, Level: hclog.Info}), ix),
		log: &memLog{data: map[uint64][]byte{}, first: 1}, dir: dir}
	t.Cleanup(func() { l.f.Close() })
	return l
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func (l *logged) apply(data []byte) interface{} {
	l.idx++
	l.log.mu.Lock()
	l.log.data[l.idx] = data
	l.log.mu.Unlock()
	return l.f.Apply(&raft.Log{Index: l.idx, Type: raft.LogCommand, Data: data})
}

// fill applies n entries to topic "t" of 3 queues, most with a producer
// id: entries of one or two requests over one or more queues, and now and
// then the retry of an earlier request (a duplicate apply skips).
func (l *logged) fill(n int, seq *uint64) {
	for i := range n {
		*seq++
		reqs := []*raftlog.Request{{ProducerID: "p", Seq: *seq, Topic: "t", Messages: msgs(uint32(i%3), "a")}}
		switch i % 5 {
		case 1:
			reqs[0].Messages = append(reqs[0].Messages, msgs(0, "b", "c")...)
		case 2:
			reqs = append(reqs, &raftlog.Request{Topic: "t", Messages: msgs(1, "d")})
		case 3:
			if *seq > 3 { // the retry of a request two entries back
				reqs = append(reqs, &raftlog.Request{ProducerID: "p", Seq: *seq - 2, Topic: "t", Messages: msgs(uint32((i-2)%3), "a")})
			}
		}
		if _, ok := l.apply(raftlog.EncodeBatch(reqs...)).([]*ProduceResult); !ok {
			l.t.Fatalf("entry %d not applied", l.idx)
		}
	}
}

// locations is every location of queue q of "t", offset by offset, and
// the range.
func (l *logged) locations(q int32) ([]Location, QueueRange, error) {
	return l.locationsOf("t", q)
}

// locationsOf is locations of queue q of topic.
func (l *logged) locationsOf(topic string, q int32) ([]Location, QueueRange, error) {
	_, rng, err := l.f.Locate(topic, q, 0, 1)
	if err != nil {
		return nil, rng, err
	}
	var out []Location
	for off := rng.Held; off < rng.Max; off++ {
		locs, _, err := l.f.Locate(topic, q, off, 1)
		if err != nil {
			return nil, rng, err
		}
		if len(locs) != 1 {
			return nil, rng, fmt.Errorf("offset %d: %d locations", off, len(locs))
		}
		out = append(out, l.norm(locs[0], q))
	}
	return out, rng, nil
}

// norm keeps of a location's skip list the requests with messages in queue
// q: apply lists every request of the entry it refused, a rebuild those
// of the queue, and a reader of the queue passes over the others anyway.
func (l *logged) norm(loc Location, q int32) Location {
	if len(loc.Skip) == 0 {
		loc.Skip = nil
		return loc
	}
	l.log.mu.Lock()
	data := l.log.data[loc.LogIndex]
	l.log.mu.Unlock()
	reqs, err := raftlog.DecodeBatch(data, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	var skip []uint32
	for _, s := range loc.Skip {
		for _, m := range reqs[s].Messages {
			if m.Queue == uint32(q) {
				skip = append(skip, s)
				break
			}
		}
	}
	loc.Skip = skip
	return loc
}

func (l *logged) files(q int) []string {
	files, _ := filepath.Glob(filepath.Join(l.dir, "*", fmt.Sprint(q), "*.idx"))
	sort.Strings(files)
	return files
}

// waitRebuilt waits until the FSM counts want rebuilds.
func (l *logged) waitRebuilt(want uint64) {
	l.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, _ := l.f.IndexRebuilds(); got >= want {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("no rebuild after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A queue index damaged under a running node (a record's checksum, a file
// deleted, a file cut short, the first file gone) is rebuilt from the log:
// afterwards every offset is at the same location as before, and
// meanwhile nothing the lookups return differs from it, while entries go
// on being applied.
func TestDamagedIndexIsRebuiltFromTheLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, files []string)
	}{
		{"record checksum", func(t *testing.T, files []string) {
			fh, err := os.OpenFile(files[1], os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			fh.WriteAt([]byte{0xff, 0xff}, 40*queueindex.RecordLen+3)
		}},
		{"file deleted", func(t *testing.T, files []string) {
			if err := os.Remove(files[1]); err != nil {
				t.Fatal(err)
			}
		}},
		{"file cut short", func(t *testing.T, files []string) {
			if err := os.Truncate(files[1], 30*queueindex.RecordLen+5); err != nil {
				t.Fatal(err)
			}
		}},
		{"first file deleted", func(t *testing.T, files []string) {
			if err := os.Remove(files[0]); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLogged(t)
			l.f.StartRebuilds(l.log)
			l.apply(EncodeCreateTopic("t", 3, false))
			var seq uint64
			l.fill(1000, &seq)
			if err := l.f.idx.Flush(); err != nil {
				t.Fatal(err)
			}
			before, rng, err := l.locations(0)
			if err != nil {
				t.Fatal(err)
			}
			files := l.files(0)
			if len(files) < 3 {
				t.Fatalf("queue 0 has files %v, want 3 or more", files)
			}
			tc.damage(t, files)

			// Readers run while the rebuild does and entries are applied.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var served, refused int
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					off := rng.Held + uint64(i*7)%(rng.Max-rng.Held)
					locs, _, err := l.f.Locate("t", 0, off, 1)
					if err != nil {
						if !errors.Is(err, ErrIndexDamaged) {
							t.Errorf("offset %d: %v", off, err)
						}
						refused++
						continue
					}
					served++
					if len(locs) != 1 || !reflect.DeepEqual(l.norm(locs[0], 0), before[off-rng.Held]) {
						t.Errorf("offset %d served at %+v, it is at %+v", off, locs, before[off-rng.Held])
						return
					}
				}
			}()
			// The lookup that meets the damage asks for the rebuild (a
			// lost file is found by the periodic check too).
			for off := rng.Held; off < rng.Max; off++ {
				if _, _, err := l.f.Locate("t", 0, off, 1); err != nil {
					break
				}
			}
			l.f.checkIndexFiles()
			l.fill(300, &seq)
			l.waitRebuilt(1)
			close(stop)
			wg.Wait()
			after, rng2, err := l.locations(0)
			if err != nil {
				t.Fatal(err)
			}
			if rng2.Held != rng.Held || rng2.Min != rng.Min {
				t.Fatalf("range after the rebuild %+v, before %+v", rng2, rng)
			}
			if !reflect.DeepEqual(after[:len(before)], before) {
				for i := range before {
					if !reflect.DeepEqual(after[i], before[i]) {
						t.Fatalf("offset %d at %+v after the rebuild, at %+v before", rng.Held+uint64(i), after[i], before[i])
					}
				}
			}
			if _, refused := l.f.IndexRebuilds(); refused != 0 {
				t.Errorf("%d ranges refused", refused)
			}
			t.Logf("lookups during the rebuild: %d served, %d refused", served, refused)
			// The other queues were not touched, and the rebuilt one goes on.
			l.fill(10, &seq)
			if _, _, err := l.locations(0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A range whose entries the node no longer holds is not rebuilt: the index
// restarts past it and peers serve what lies below; nothing is served
// wrong.
func TestDamageBelowTheLogIsServedByPeers(t *testing.T) {
	l := newLogged(t)
	l.f.StartRebuilds(l.log)
	l.apply(EncodeCreateTopic("t", 3, false))
	var seq uint64
	l.fill(1000, &seq)
	l.f.idx.Flush()
	before, rng, err := l.locations(0)
	if err != nil {
		t.Fatal(err)
	}
	files := l.files(0)
	os.Truncate(files[1], 10*queueindex.RecordLen)
	l.log.mu.Lock()
	l.log.first = l.idx - 100 // the log now holds the last 100 entries only
	l.log.mu.Unlock()
	l.f.checkIndexFiles()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, refused := l.f.IndexRebuilds()
		l.f.mu.RLock()
		busy := l.f.topics["t"].queues[0].rebuilding.Load()
		l.f.mu.RUnlock()
		if refused > 0 && !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no refusal after 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	after, rng2, err := l.locations(0)
	if err != nil {
		t.Fatal(err)
	}
	if rng2.Held <= rng.Held || rng2.Max != rng.Max || rng2.Min != rng.Min {
		t.Fatalf("range after the refusal %+v, before %+v: want the held floor above the damage", rng2, rng)
	}
	for i, loc := range after {
		if want := before[rng2.Held-rng.Held+uint64(i)]; !reflect.DeepEqual(loc, want) {
			t.Fatalf("offset %d at %+v, was at %+v", rng2.Held+uint64(i), loc, want)
		}
	}
}

// A restart over a queue index that lost files restarts the queue's index
// at its end (peers serve below) and rebuilds what lies below from the log
// in the background; then the node holds the whole queue again, each offset
// where it was.
func TestRestartRebuildsALostIndexBelowItsFloor(t *testing.T) {
	l := newLogged(t)
	l.apply(EncodeCreateTopic("t", 3, false))
	var seq uint64
	l.fill(600, &seq)
	before, rng, err := l.locations(1)
	if err != nil {
		t.Fatal(err)
	}
	sink := persistSnapshot(t, l.f)
	if err := l.f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range l.files(1) {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}

	ix, err := queueindex.Open(l.dir, rebuildOpts)
	if err != nil {
		t.Fatal(err)
	}
	l.f = newFSM(l.f.log, ix)
	l.f.startSnap = 601 // OpenFSM: the newest snapshot on disk
	l.f.StartRebuilds(l.log)
	if err := l.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	// Entries after the snapshot are applied meanwhile.
	l.fill(200, &seq)
	l.waitRebuilt(1)
	after, rng2, err := l.locations(1)
	if err != nil {
		t.Fatal(err)
	}
	if rng2.Held != rng.Held || rng2.Min != rng.Min {
		t.Fatalf("range after the rebuild %+v, before the restart %+v", rng2, rng)
	}
	if !reflect.DeepEqual(after[:len(before)], before) {
		t.Fatalf("locations after the rebuild differ from before the restart")
	}
	// The other queues kept their index as it was.
	if _, r0, _ := l.locations(0); r0.Held != 0 {
		t.Fatalf("queue 0 held from %d", r0.Held)
	}
}

// A retry whose first attempt lies far before the damaged range (beyond
// what a rebuild reads before it) is known from the dedupe table: the
// entry that stored it is remembered, so the retry's entry stored nothing.
func TestRebuildKnowsARetryFromTheDedupeTable(t *testing.T) {
	l := newLogged(t)
	l.f.StartRebuilds(l.log)
	l.apply(EncodeCreateTopic("t", 1, false))
	first := &raftlog.Request{ProducerID: "far", Seq: 1, Topic: "t", Messages: msgs(0, "x")}
	l.apply(raftlog.EncodeBatch(first))
	for range 2000 {
		l.apply(raftlog.EncodeBatch(&raftlog.Request{Topic: "t", Messages: msgs(0, "m")}))
	}
	// The retry and a new request in one entry: the retry stores nothing.
	res, _ := l.apply(raftlog.EncodeBatch(first, &raftlog.Request{Topic: "t", Messages: msgs(0, "n")})).([]*ProduceResult)
	if len(res) != 2 || !res[0].Duplicate {
		t.Fatalf("the retry was not a duplicate: %+v", res)
	}
	retryAt := l.idx
	for range 100 {
		l.apply(raftlog.EncodeBatch(&raftlog.Request{Topic: "t", Messages: msgs(0, "m")}))
	}
	l.f.idx.Flush()
	before, rng, err := l.locations(0)
	if err != nil {
		t.Fatal(err)
	}
	// Delete the file holding the retry's entry.
	var file string
	for _, f := range l.files(0) {
		var base uint64
		fmt.Sscanf(filepath.Base(f), "%d.idx", &base)
		if base <= retryAt-2 {
			file = f
		}
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	l.f.checkIndexFiles()
	l.waitRebuilt(1)
	after, rng2, err := l.locations(0)
	if err != nil {
		t.Fatal(err)
	}
	if rng2 != rng || !reflect.DeepEqual(after, before) {
		t.Fatalf("after the rebuild: range %+v, before %+v; same locations: %v", rng2, rng, reflect.DeepEqual(after, before))
	}
	if _, refused := l.f.IndexRebuilds(); refused != 0 {
		t.Fatalf("%d ranges refused", refused)
	}
}

// A rebuild under way when the node restores a snapshot, deletes the
// topic or closes is dropped: nothing of it is left behind, the restore or
// the delete goes through, and Close waits for it.
func TestRebuildDroppedByRestoreAndClose(t *testing.T) {
	for _, tc := range []struct {
		then   string
		queues int // damaged: more than one are rebuilt together
	}{{"restore", 1}, {"delete", 1}, {"close", 1}, {"restore", 3}, {"delete", 3}, {"close", 3}} {
		then := tc.then
		t.Run(fmt.Sprintf("%s/%d", then, tc.queues), func(t *testing.T) {
			l := newLogged(t)
			l.f.StartRebuilds(l.log)
			l.apply(EncodeCreateTopic("t", 3, false))
			var seq uint64
			l.fill(3000, &seq)
			sink := persistSnapshot(t, l.f)
			for q := range tc.queues {
				for _, f := range l.files(q) {
					os.Truncate(f, 0)
				}
			}
			l.f.checkIndexFiles()
			switch then {
			case "restore":
				if err := l.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
					t.Fatal(err)
				}
				l.fill(10, &seq)
			case "delete":
				if res := l.apply(EncodeDeleteTopic("t")); res != nil {
					t.Fatalf("delete topic: %v", res)
				}
				if at, _ := l.f.Damaged(); at != 0 {
					t.Fatalf("damaged at %d", at)
				}
			}
			if err := l.f.Close(); err != nil {
				t.Fatal(err)
			}
			if left, _ := filepath.Glob(filepath.Join(l.dir, "*", "*.rebuild", "*")); len(left) > 0 {
				t.Fatalf("files left by a dropped rebuild: %v", left)
			}
		})
	}
}

// A snapshot installed from the leader (not the newest snapshot on disk at
// start) that restarts a queue's index at its end rebuilds nothing below
// it: the node's log there may hold entries the group never committed.
func TestNoRebuildBelowAnInstalledSnapshot(t *testing.T) {
	l := newLogged(t)
	l.apply(EncodeCreateTopic("t", 1, false))
	var seq uint64
	l.fill(300, &seq)
	sink := persistSnapshot(t, l.f)
	l.f.Close()
	for _, f := range l.files(0) {
		os.Remove(f)
	}
	ix, err := queueindex.Open(l.dir, rebuildOpts)
	if err != nil {
		t.Fatal(err)
	}
	l.f = newFSM(l.f.log, ix) // no snapshot on disk at start: startSnap 0
	l.f.StartRebuilds(l.log)
	if err := l.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	l.f.rb.mu.Lock()
	want := len(l.f.rb.want)
	l.f.rb.mu.Unlock()
	if want != 0 {
		t.Fatalf("%d rebuilds asked for below an installed snapshot", want)
	}
	if _, rng, _ := l.locations(0); rng.Held != rng.Max {
		t.Fatalf("range %+v: want held from its end", rng)
	}
}

// readCounter counts the reads of each entry of a LogReader.
type readCounter struct {
	LogReader
	mu    sync.Mutex
	reads map[uint64]int
}

func newReadCounter(log LogReader) *readCounter {
	return &readCounter{LogReader: log, reads: map[uint64]int{}}
}

func (c *readCounter) ReadUncached(idx uint64) (raftlog.Entry, error) {
	c.mu.Lock()
	c.reads[idx]++
	c.mu.Unlock()
	return c.LogReader.ReadUncached(idx)
}

// check fails t unless each of entries from..to was read, and no entry
// was read twice or below from.
func (c *readCounter) check(t *testing.T, from, to uint64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	total, in := 0, 0
	for idx, n := range c.reads {
		total += n
		if idx < from {
			t.Errorf("entry %d read, below %d", idx, from)
		}
		if n != 1 {
			t.Errorf("entry %d read %d times", idx, n)
		}
		if idx >= from && idx <= to {
			in++
		}
	}
	if in != int(to-from+1) {
		t.Errorf("%d entries of %d..%d read", in, from, to)
	}
	t.Logf("%d reads of %d entries", total, len(c.reads))
}

// fillQueues applies n entries to topics "t" (8 queues) and "u" (2), with
// no retries: entries of one to three requests with or without a producer
// id, over one or more queues of a topic.
func (l *logged) fillQueues(n int, seq *uint64) {
	for i := range n {
		*seq++
		reqs := []*raftlog.Request{{ProducerID: "p", Seq: *seq, Topic: "t", Messages: msgs(uint32(i%8), "a")}}
		switch i % 4 {
		case 1:
			reqs[0].Messages = append(reqs[0].Messages, msgs(uint32((i+3)%8), "b", "c")...)
		case 2:
			reqs = append(reqs, &raftlog.Request{Topic: "u", Messages: msgs(uint32(i%2), "d")})
		case 3:
			reqs = append(reqs, &raftlog.Request{Topic: "t", Messages: msgs(7, "e")},
				&raftlog.Request{ProducerID: "q", Seq: *seq, Topic: "u", Messages: append(msgs(0, "f"), msgs(1, "g")...)})
		}
		if _, ok := l.apply(raftlog.EncodeBatch(reqs...)).([]*ProduceResult); !ok {
			l.t.Fatalf("entry %d not applied", l.idx)
		}
	}
}

// every is the locations of every queue of "t" and "u".
func (l *logged) every() map[string][]Location {
	l.t.Helper()
	out := map[string][]Location{}
	for _, tq := range []struct {
		topic  string
		queues int32
	}{{"t", 8}, {"u", 2}} {
		for q := range tq.queues {
			locs, rng, err := l.locationsOf(tq.topic, q)
			if err != nil {
				l.t.Fatalf("%s/%d: %v", tq.topic, q, err)
			}
			if rng.Held != rng.Min || len(locs) == 0 {
				l.t.Fatalf("%s/%d: range %+v, %d locations", tq.topic, q, rng, len(locs))
			}
			out[fmt.Sprintf("%s/%d", tq.topic, q)] = locs
		}
	}
	return out
}

// The queues whose indexes are lost together (every index file cut to
// nothing) are rebuilt together: each entry of the log is read once, not
// once per queue, and every queue holds each offset where it was.
func TestQueuesDroppedTogetherAreRebuiltInOneRead(t *testing.T) {
	l := newLogged(t)
	reads := newReadCounter(l.log)
	rb := rebuildHere(l.f, reads)
	l.apply(EncodeCreateTopic("t", 8, false))
	l.apply(EncodeCreateTopic("u", 2, false))
	var seq uint64
	l.fillQueues(1500, &seq)
	if err := l.f.idx.Flush(); err != nil {
		t.Fatal(err)
	}
	before := l.every()
	if files := l.loseEveryIndex(t, rb); len(files) < 20 {
		t.Fatalf("index files %v, want 2 or more per queue", files)
	}
	if rebuilt, refused := l.f.IndexRebuilds(); rebuilt != 10 || refused != 0 {
		t.Fatalf("%d queues rebuilt, %d ranges refused; want 10, 0", rebuilt, refused)
	}
	// From topic t's first entry on (the rebuilds of u start one entry
	// later and join when the read reaches it).
	reads.check(t, 2, l.idx)
	if after := l.every(); !reflect.DeepEqual(after, before) {
		for k := range before {
			if !reflect.DeepEqual(after[k], before[k]) {
				t.Errorf("%s after the rebuild differs from before", k)
			}
		}
	}
	if l.f.rebuildWaiting(rb) {
		t.Fatal("a rebuild still waiting")
	}
}

// A restart over an index directory that lost every file (the queues'
// indexes restart at their ends) rebuilds what lies below in one read of
// the log, while entries after the snapshot are applied.
func TestRestartRebuildsEveryLostQueueInOneRead(t *testing.T) {
	l := newLogged(t)
	l.apply(EncodeCreateTopic("t", 8, false))
	l.apply(EncodeCreateTopic("u", 2, false))
	var seq uint64
	l.fillQueues(800, &seq)
	before := l.every()
	sink := persistSnapshot(t, l.f)
	if err := l.f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(l.dir); err != nil {
		t.Fatal(err)
	}
	ix, err := queueindex.Open(l.dir, rebuildOpts)
	if err != nil {
		t.Fatal(err)
	}
	snap := l.idx
	l.f = newFSM(l.f.log, ix)
	l.f.startSnap = snap // OpenFSM: the newest snapshot on disk
	reads := newReadCounter(l.log)
	l.f.StartRebuilds(reads)
	if err := l.f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	l.fill(50, &seq)
	l.waitRebuilt(10)
	if _, refused := l.f.IndexRebuilds(); refused != 0 {
		t.Fatalf("%d ranges refused", refused)
	}
	// Up to the snapshot at least: a queue's rebuild reads up to its
	// first record after it.
	reads.check(t, 2, snap)
	after := l.every()
	for k, locs := range before {
		if !reflect.DeepEqual(after[k][:len(locs)], locs) {
			t.Errorf("%s after the rebuild differs from before the restart", k)
		}
	}
}

// Queues rebuilt together from a log that holds retries (a first pass
// that does not add up, so each passes over its range again, carefully)
// and from indexes that keep most of their records (gaps at different log
// indexes) hold each offset where it was.
func TestQueuesRebuiltTogetherOverRetriesAndPartialDamage(t *testing.T) {
	for _, damage := range []string{"every file", "second file"} {
		t.Run(damage, func(t *testing.T) {
			l := newLogged(t)
			rb := rebuildHere(l.f, l.log)
			l.apply(EncodeCreateTopic("t", 3, false))
			var seq uint64
			l.fill(1000, &seq)
			if err := l.f.idx.Flush(); err != nil {
				t.Fatal(err)
			}
			var before [3][]Location
			for q := range before {
				var err error
				if before[q], _, err = l.locations(int32(q)); err != nil {
					t.Fatal(err)
				}
				files := l.files(q)
				if damage == "second file" {
					files = files[1:2]
				}
				for _, f := range files {
					os.Truncate(f, 0)
				}
			}
			l.f.checkIndexFiles()
			l.f.rebuildWaiting(rb)
			if rebuilt, refused := l.f.IndexRebuilds(); rebuilt != 3 || refused != 0 {
				t.Fatalf("%d queues rebuilt, %d ranges refused; want 3, 0", rebuilt, refused)
			}
			for q := range before {
				after, _, err := l.locations(int32(q))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(after, before[q]) {
					t.Errorf("queue %d after the rebuild differs from before", q)
				}
			}
		})
	}
}

// A group's rebuild logs its progress every checkIndexEvery and its end
// once, with the queues and the entries read.
func TestRebuildOfAGroupLogsProgressAndEnd(t *testing.T) {
	every := checkIndexEvery
	checkIndexEvery = 0 // after every window
	t.Cleanup(func() { checkIndexEvery = every })
	l := newLogged(t)
	var out bytes.Buffer
	l.f.log = hclog.New(&hclog.LoggerOptions{Output: io.MultiWriter(&out, testWriter{t}), Level: hclog.Info})
	rb := rebuildHere(l.f, l.log)
	l.apply(EncodeCreateTopic("t", 8, false))
	l.apply(EncodeCreateTopic("u", 2, false))
	var seq uint64
	l.fillQueues(3000, &seq)
	if err := l.f.idx.Flush(); err != nil {
		t.Fatal(err)
	}
	l.loseEveryIndex(t, rb)
	if n := strings.Count(out.String(), "queue indexes: rebuilding from the log: queues=10"); n < 2 {
		t.Errorf("%d progress lines, want one per window of %d entries", n, groupWindow)
	}
	if n := strings.Count(out.String(), "queue indexes: rebuild of a group ended: queues=10 rebuilt=10 entries_read=3001 "); n != 1 {
		t.Errorf("%d end lines with 10 queues rebuilt from 3,001 entries read, want 1", n)
	}
}
