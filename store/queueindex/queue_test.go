package queueindex

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var small = Options{RecordsPerFile: 100, Tail: 64}

// fill appends n records of 1..3 messages at log indexes 10, 12, 14, ...;
// every seventh has a skip list.
func fill(t *testing.T, q *Queue, n int) []Record {
	t.Helper()
	var out []Record
	for i := range n {
		r := Record{Base: q.Next(), Index: max(8, q.lastIndex) + 2, Count: uint32(1 + i%3)}
		if i%7 == 3 {
			r.Skip = []uint32{uint32(i), uint32(i + 5)}
		}
		if err := q.Append(r); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}

func stores(t *testing.T) map[string]func() *Store {
	dir := t.TempDir()
	return map[string]func() *Store{
		"disk": func() *Store {
			s, err := Open(dir, small)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"memory": func() *Store {
			s, err := Open("", small)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
}

func checkAll(t *testing.T, q *Queue, recs []Record, from int) {
	t.Helper()
	for i := from; i < len(recs); i++ {
		r := recs[i]
		for off := r.Base; off < r.End(); off++ {
			got, err := q.Find(off, 2)
			if err != nil || len(got) == 0 || !reflect.DeepEqual(got[0], r) {
				t.Fatalf("Find(%d) = %v, %v; want %v first", off, got, err, r)
			}
			if len(got) == 2 && i+1 < len(recs) && !reflect.DeepEqual(got[1], recs[i+1]) {
				t.Fatalf("Find(%d)[1] = %v, want %v", off, got[1], recs[i+1])
			}
		}
		got, ok, err := q.FindIndex(r.Index)
		if err != nil || !ok || !reflect.DeepEqual(got, r) {
			t.Fatalf("FindIndex(%d) = %v, %v, %v; want %v", r.Index, got, ok, err, r)
		}
		if _, ok, _ := q.FindIndex(r.Index + 1); ok {
			t.Fatalf("FindIndex(%d) found a record of an entry without one", r.Index+1)
		}
	}
}

func TestAppendFindAcrossFiles(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			qs, err := s.CreateTopic(TopicKey{Name: "%RETRY%g", Created: 7}, 2)
			if err != nil {
				t.Fatal(err)
			}
			recs := fill(t, qs[1], 450) // five files, the tail of 64 and records not written yet
			checkAll(t, qs[1], recs, 0)
			if got, _ := qs[1].Find(recs[len(recs)-1].End(), 1); got != nil {
				t.Errorf("Find past the end = %v", got)
			}
			if got, _ := qs[0].Find(0, 1); got != nil {
				t.Errorf("empty queue found %v", got)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReopenTruncatesPastTheSnapshotAndTornRecords(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, small)
	k := TopicKey{Name: "t", Created: 3}
	qs, _ := s.CreateTopic(k, 1)
	recs := fill(t, qs[0], 250)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A torn record at the end of the last file, as a crash leaves it.
	last := filepath.Join(dir, k.dirName(), "0", segName(recs[200].Base, recs[200].Index))
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, RecordLen+5))
	f.Close()

	s, _ = Open(dir, small)
	qs, err = s.OpenTopic(k, 1)
	if err != nil {
		t.Fatal(err)
	}
	snapAt := recs[149].Index // the state machine's snapshot: records after it are applied again
	if err := qs[0].Truncate(snapAt); err != nil {
		t.Fatal(err)
	}
	if qs[0].Next() != recs[149].End() {
		t.Fatalf("after truncate next = %d, want %d", qs[0].Next(), recs[149].End())
	}
	checkAll(t, qs[0], recs[:150], 0)
	// Applying again gives the same records.
	for _, r := range recs[150:] {
		if err := qs[0].Append(r); err != nil {
			t.Fatal(err)
		}
	}
	checkAll(t, qs[0], recs, 0)
	s.Close()
}

func TestAppendRefusesWhatDoesNotFollow(t *testing.T) {
	s, _ := Open("", small)
	qs, _ := s.CreateTopic(TopicKey{Name: "t"}, 1)
	q := qs[0]
	if err := q.Append(Record{Base: 0, Index: 5, Count: 2}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{{Base: 3, Index: 6, Count: 1}, {Base: 2, Index: 5, Count: 1}, {Base: 2, Index: 6, Count: 0}} {
		if err := q.Append(r); err == nil {
			t.Errorf("Append(%v) after offset 2, index 5 succeeded", r)
		}
	}
}

func TestDropBelow(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			qs, _ := s.CreateTopic(TopicKey{Name: "t", Created: 1}, 1)
			q := qs[0]
			recs := fill(t, q, 350)
			// FloorAt tells each floor DropBelowIndex would leave, from
			// any file, and drops nothing.
			for _, i := range []int{0, 57, 99, 100, 101, 220, 299, 300, 349} {
				for _, below := range []uint64{recs[i].Index - 1, recs[i].Index} {
					want := recs[i].Base
					if below < recs[0].Index {
						want = recs[0].Base
					}
					if got, err := q.FloorAt(below); err != nil || got != want {
						t.Fatalf("FloorAt(%d) = %d, %v; want %d", below, got, err, want)
					}
				}
			}
			if got, err := q.FloorAt(recs[349].Index + 1); err != nil || got != q.Next() {
				t.Fatalf("FloorAt past the last record = %d, %v; want next %d", got, err, q.Next())
			}
			checkAll(t, q, recs, 0)
			floor, err := q.DropBelowIndex(recs[220].Index)
			if err != nil || floor != recs[220].Base {
				t.Fatalf("DropBelowIndex = %d, %v; want %d", floor, err, recs[220].Base)
			}
			if len(q.segs) != 2 {
				t.Errorf("%d files left, want 2 (the first two dropped)", len(q.segs))
			}
			if got, _ := q.Find(recs[219].Base, 1); got != nil {
				t.Errorf("found %v below the floor", got)
			}
			if _, ok, _ := q.FindIndex(recs[219].Index); ok {
				t.Error("FindIndex found a record below the floor")
			}
			checkAll(t, q, recs, 220)
			if got, _ := q.FloorAt(recs[100].Index); got != recs[220].Base {
				t.Errorf("FloorAt below the floor = %d, want the floor %d", got, recs[220].Base)
			}
			// Between two entries: the floor is the next one's.
			if floor, _ := q.DropBelowIndex(recs[230].Index - 1); floor != recs[230].Base {
				t.Errorf("floor %d, want %d", floor, recs[230].Base)
			}
			if err := q.DropBelowOffset(recs[320].Base); err != nil || q.Floor() != recs[320].Base || len(q.segs) != 1 {
				t.Errorf("DropBelowOffset: floor %d, %d files, %v", q.Floor(), len(q.segs), err)
			}
			checkAll(t, q, recs, 320)
			if floor, err := q.DropBelowIndex(recs[349].Index + 1); err != nil || floor != q.Next() || len(q.segs) != 0 {
				t.Errorf("dropping all: floor %d (next %d), %d files, %v", floor, q.Next(), len(q.segs), err)
			}
			more := fill(t, q, 5)
			checkAll(t, q, more, 0)
			s.Close()
		})
	}
}

func TestPruneRemovesOtherTopics(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, small)
	a, b := TopicKey{Name: "a", Created: 1}, TopicKey{Name: "a", Created: 9}
	qa, _ := s.CreateTopic(a, 1)
	fill(t, qa[0], 3)
	qb, _ := s.CreateTopic(b, 1)
	fill(t, qb[0], 3)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Prune([]TopicKey{b}, map[*Queue]bool{qb[0]: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, a.dirName())); !os.IsNotExist(err) {
		t.Errorf("the old incarnation's directory is still there: %v", err)
	}
	if got, _ := qb[0].Find(0, 1); len(got) != 1 {
		t.Errorf("the kept topic lost its records: %v", got)
	}
	s.Close()
}

func TestCorruptRecordIsAnErrorOnRead(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, small)
	k := TopicKey{Name: "t", Created: 1}
	qs, _ := s.CreateTopic(k, 1)
	recs := fill(t, qs[0], 150)
	s.Close()
	p := filepath.Join(dir, k.dirName(), "0", segName(recs[0].Base, recs[0].Index))
	f, _ := os.OpenFile(p, os.O_WRONLY, 0)
	f.WriteAt([]byte{0xff}, 10*RecordLen+3)
	f.Close()
	s, _ = Open(dir, small)
	qs, _ = s.OpenTopic(k, 1)
	if err := qs[0].Truncate(recs[149].Index); err != nil {
		t.Fatal(err)
	}
	if _, err := qs[0].Find(recs[10].Base, 1); err == nil {
		t.Error("a record with a bad checksum was served")
	}
	if got, err := qs[0].Find(recs[120].Base, 1); err != nil || len(got) != 1 {
		t.Errorf("an intact file: %v, %v", got, err)
	}
	s.Close()
}

// Scan hands out every record position, damaged ones marked; Check finds a
// file shorter than what was written to it; a queue rebuilt beside it
// replaces it, and reads and appends go on from its records.
func TestScanCheckReplace(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			defer s.Close()
			qs, err := s.CreateTopic(TopicKey{Name: "t", Created: 1}, 1)
			if err != nil {
				t.Fatal(err)
			}
			q := qs[0]
			recs := fill(t, q, 250)
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := q.Check(); err != nil {
				t.Fatalf("check of a sound queue: %v", err)
			}
			// Damage record 150 (the second file's 50th) and cut the
			// second file after its 80th.
			seg := q.segs[1]
			f, _, err := s.fs.open(seg.path)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{0xee}, 50*RecordLen+9)
			f.Truncate(80*RecordLen + 3)
			f.Close()
			if err := q.Check(); err == nil {
				t.Fatal("check of a queue with a file cut short found nothing")
			}
			var got []Scanned
			var pos ScanPos
			for done := false; !done; {
				var out []Scanned
				out, pos, done = q.Scan(pos, 33)
				got = append(got, out...)
			}
			if len(got) != len(recs) {
				t.Fatalf("scan returned %d positions, want %d", len(got), len(recs))
			}
			for i, sc := range got {
				bad := i == 150 || (i >= 180 && i < 200)
				if sc.OK == bad || (sc.OK && !reflect.DeepEqual(sc.Record, recs[i])) {
					t.Fatalf("position %d: %+v (ok %v), want %+v (damaged %v)", i, sc.Record, sc.OK, recs[i], bad)
				}
			}
			// Records appended later are found by a scan going on.
			more := fill(t, q, 5)
			out, _, done := q.Scan(pos, 100)
			if !done || len(out) != 5 || !reflect.DeepEqual(out[4].Record, more[4]) {
				t.Fatalf("scan after appends: %d positions, done %v", len(out), done)
			}
			recs = append(recs, more...)

			nq, err := s.OpenRebuild(q)
			if err != nil {
				t.Fatal(err)
			}
			if err := nq.Reset(recs[0].Base); err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if err := nq.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Replace(nq); err != nil {
				t.Fatal(err)
			}
			checkAll(t, q, recs, 0)
			recs = append(recs, fill(t, q, 120)...)
			checkAll(t, q, recs, 0)
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := q.Check(); err != nil {
				t.Fatalf("check after the replace: %v", err)
			}
			// A rebuild dropped leaves nothing behind.
			nq, err = s.OpenRebuild(q)
			if err != nil {
				t.Fatal(err)
			}
			fill(t, nq, 150)
			nq.Flush()
			if err := nq.Discard(); err != nil {
				t.Fatal(err)
			}
			if names, _ := s.fs.list(q.dir + rebuildSuffix); len(names) != 0 {
				t.Fatalf("files left by a dropped rebuild: %v", names)
			}
			checkAll(t, q, recs, 0)
		})
	}
}

// What a rebuild left when the node stopped under it is removed at open.
func TestOpenRemovesLeftRebuilds(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, small)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := s.CreateTopic(TopicKey{Name: "t", Created: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	recs := fill(t, qs[0], 150)
	nq, err := s.OpenRebuild(qs[0])
	if err != nil {
		t.Fatal(err)
	}
	fill(t, nq, 120)
	nq.Flush()
	s.Close()

	s, err = Open(dir, small)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if left, _ := filepath.Glob(filepath.Join(dir, "*", "*"+rebuildSuffix)); len(left) > 0 {
		t.Fatalf("left after open: %v", left)
	}
	qs, err = s.OpenTopic(TopicKey{Name: "t", Created: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := qs[0].Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	checkAll(t, qs[0], recs, 0)
}

// A Sync after a topic's directories were removed does not fail on them.
func TestSyncAfterRemoveTopic(t *testing.T) {
	s, err := Open(t.TempDir(), small)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := TopicKey{Name: "t", Created: 1}
	qs, err := s.CreateTopic(k, 2)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, qs[0], 250) // rolls files: the queue's directory is to be synced
	if err := s.RemoveTopic(k, qs); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatalf("sync after the topic was removed: %v", err)
	}
}

// TestOldFormatFilesAreDropped: files of the earlier 28-byte records are
// removed when their queue opens, so the queue reads as empty (its state
// machine then indexes it anew) and appends go on in the current format.
func TestOldFormatFilesAreDropped(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, small)
	k := TopicKey{Name: "t", Created: 1}
	qdir := filepath.Join(dir, k.dirName(), "0")
	if err := os.MkdirAll(qdir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"00000000000000000000.idx", "00000000000000000000.skp", "00000000000000000100.idx"} {
		if err := os.WriteFile(filepath.Join(qdir, n), make([]byte, 3*28), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	qs, err := s.OpenTopic(k, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := qs[0].Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	if qs[0].Next() != 0 {
		t.Fatalf("next %d after the old files, want 0", qs[0].Next())
	}
	if left, _ := filepath.Glob(filepath.Join(qdir, "*")); len(left) != 0 {
		t.Fatalf("old files left: %v", left)
	}
	recs := fill(t, qs[0], 150)
	s.Close()
	s, _ = Open(dir, small)
	defer s.Close()
	qs, _ = s.OpenTopic(k, 1)
	if err := qs[0].Truncate(recs[149].Index); err != nil {
		t.Fatal(err)
	}
	checkAll(t, qs[0], recs, 0)
}

// TestRecordOutOfRangeStartsAFile: a record whose offset or log index is
// more than 32 bits away from its file's first starts a new file.
func TestRecordOutOfRangeStartsAFile(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			defer s.Close()
			qs, _ := s.CreateTopic(TopicKey{Name: "t", Created: 1}, 1)
			q := qs[0]
			recs := []Record{
				{Base: 0, Index: 5, Count: 2},
				{Base: 2, Index: 5 + 1<<32, Count: 1},             // log index too far
				{Base: 3, Index: 6 + 1<<32, Count: 1<<32 - 2},     // still fits
				{Base: 3 + 1<<32 - 2, Index: 7 + 1<<32, Count: 3}, // offset too far
			}
			for _, r := range recs {
				if err := q.Append(r); err != nil {
					t.Fatal(err)
				}
			}
			if len(q.segs) != 3 {
				t.Fatalf("%d files, want 3", len(q.segs))
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			q.tail = nil // read from the files
			for _, r := range recs {
				got, err := q.Find(r.Base, 1)
				if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], r) {
					t.Fatalf("Find(%d) = %v, %v; want %v", r.Base, got, err, r)
				}
			}
		})
	}
}
