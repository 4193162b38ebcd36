package queueindex

import (
	"path/filepath"
	"testing"
)

// FuzzOpenQueue opens a queue over arbitrary index and skip-list bytes,
// scans it as a rebuild does, cuts it back as a restart does and looks
// records up: it must never panic, and every record it hands out must hold
// the offset or log index asked for and follow the one before.
func FuzzOpenQueue(f *testing.F) {
	// A real pair of files: 150 records, some with skip lists.
	s, _ := Open("", small)
	k := TopicKey{Name: "t", Created: 1}
	qs, _ := s.CreateTopic(k, 1)
	recs := fill(&testing.T{}, qs[0], 150)
	s.Flush()
	mem := s.fs.(*memFS)
	seg := filepath.Join(s.topicDir(k), "0", segName(recs[100].Base, recs[100].Index))
	f.Add(recs[100].Base, recs[100].Index, mem.files[seg].data, mem.files[skipPath(seg)].data, recs[120].Index)
	f.Add(uint64(0), uint64(0), []byte{}, []byte{}, uint64(0))
	f.Add(uint64(5), uint64(1<<40), make([]byte, 3*RecordLen+7), []byte{1, 0, 0, 0}, uint64(1<<62))

	f.Fuzz(func(t *testing.T, base, first uint64, idx, skp []byte, maxIndex uint64) {
		s, err := Open("", small)
		if err != nil {
			t.Fatal(err)
		}
		mem := s.fs.(*memFS)
		path := filepath.Join(s.topicDir(k), "0", segName(base, first))
		mem.files[path] = &memFile{data: append([]byte(nil), idx...)}
		mem.files[skipPath(path)] = &memFile{data: append([]byte(nil), skp...)}
		qs, err := s.OpenTopic(k, 1)
		if err != nil {
			return
		}
		q := qs[0]
		// A rebuild's scan of the files as they are: every position once,
		// and only records that pass their checksums marked sound.
		q.Check()
		positions := 0
		for pos, done, calls := (ScanPos{}), false, 0; !done; calls++ {
			if calls > len(idx)+2 {
				t.Fatalf("scan makes no progress at %+v", pos)
			}
			var out []Scanned
			out, pos, done = q.Scan(pos, 1+len(idx)%7)
			positions += len(out)
			for _, sc := range out {
				if sc.OK && (sc.Count == 0 || sc.Index == 0) {
					t.Fatalf("scan marked %+v sound", sc.Record)
				}
			}
		}
		if positions != len(idx)/RecordLen && positions != 0 {
			t.Fatalf("scan returned %d positions of a file of %d records", positions, len(idx)/RecordLen)
		}
		if err := q.Truncate(maxIndex); err != nil {
			return
		}
		if q.Next() < q.Floor() {
			t.Fatalf("next %d below floor %d", q.Next(), q.Floor())
		}
		for i, off := 0, q.Floor(); off < q.Next() && i < 64; i, off = i+1, off+1+(q.Next()-q.Floor())/64 {
			got, err := q.Find(off, 4)
			if err != nil {
				continue
			}
			for j, r := range got {
				if j == 0 && (off < r.Base || off >= r.End()) {
					t.Fatalf("Find(%d) returned %+v first", off, r)
				}
				if j > 0 && (r.Base != got[j-1].End() || r.Index <= got[j-1].Index) {
					t.Fatalf("Find(%d): %+v does not follow %+v", off, r, got[j-1])
				}
				if r2, ok, err := q.FindIndex(r.Index); err == nil && ok && r2.Index != r.Index {
					t.Fatalf("FindIndex(%d) returned %+v", r.Index, r2)
				}
			}
		}
		// Appending after a cut goes on from Next.
		if q.Next() < 1<<62 {
			if err := q.Append(Record{Base: q.Next(), Index: max(q.lastIndex, maxIndex) + 1, Count: 1}); err == nil {
				if got, err := q.Find(q.Next()-1, 1); err != nil || len(got) != 1 || got[0].End() != q.Next() {
					t.Fatalf("the appended record: %v %v", got, err)
				}
			}
		}
	})
}
