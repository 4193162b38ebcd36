package queueindex

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Queue is the index of one queue: records in offset (and log index) order,
// dense in offsets, from Floor to Next.
type Queue struct {
	s    *Store
	dir  string
	segs []*segment // oldest first; the last is appended to

	floor     uint64 // first offset indexed here
	next      uint64 // offset after the last record
	lastIndex uint64 // log index of the last record (0: none)

	tail     []Record // the last records, oldest first; holds every pending one
	pend     []byte   // records not written yet, of the last segment
	pendSkip []byte   // their skip lists
}

type segment struct {
	path        string // .idx file; the skip lists are in the .skp beside it
	base        uint64 // offset of its first record (in the file's name)
	first       uint64 // log index of its first record (in the file's name)
	n           int    // records, written or pending
	written     int    // records in the file
	skipSize    int64  // bytes of skip lists, written or pending
	skipWritten int64

	// f and sf are open while the segment is appended to or has writes not
	// yet synced; readers of a sealed segment open their own.
	f, sf  file
	sealed bool // set under Store.mu
}

// segName is the name of the file whose first record is at offset base
// and log index first.
func segName(base, first uint64) string { return fmt.Sprintf("%020d-%020d.idx", base, first) }

// parseSegName reads a segName; old is set for the name of a file of the
// earlier 28-byte records ("<base>.idx").
func parseSegName(name string) (base, first uint64, old, ok bool) {
	stem, isIdx := strings.CutSuffix(name, ".idx")
	if !isIdx {
		return 0, 0, false, false
	}
	b, f, cut := strings.Cut(stem, "-")
	base, err := strconv.ParseUint(b, 10, 64)
	if err != nil {
		return 0, 0, false, false
	}
	if !cut {
		return base, 0, true, true
	}
	first, err = strconv.ParseUint(f, 10, 64)
	return base, first, false, err == nil
}

func skipPath(idx string) string { return strings.TrimSuffix(idx, ".idx") + ".skp" }

func (s *Store) openQueue(dir string) (*Queue, error) {
	if err := s.fs.mkdirAll(dir); err != nil {
		return nil, err
	}
	q := &Queue{s: s, dir: dir}
	names, err := s.fs.list(dir)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base, first, old, ok := parseSegName(n)
		if !ok {
			continue
		}
		if old {
			// A file of the earlier record format: the queue is indexed
			// anew (the state machine finds it short of the snapshot and
			// rebuilds it from the log).
			p := filepath.Join(dir, n)
			if err := s.fs.remove(p); err != nil {
				return nil, err
			}
			if err := s.fs.remove(skipPath(p)); err != nil {
				return nil, err
			}
			s.markDirDirty(dir)
			continue
		}
		seg := &segment{path: filepath.Join(dir, n), base: base, first: first}
		f, size, err := s.fs.open(seg.path)
		if err != nil {
			return nil, err
		}
		seg.n = int(size / RecordLen)
		seg.written = seg.n
		var b [RecordLen]byte
		if seg.n > 0 {
			_, err = f.ReadAt(b[:], 0)
		}
		var r Record
		if err == nil && seg.n > 0 {
			r, _, err = seg.parseRecord(b[:])
		}
		f.Close()
		if seg.n == 0 || err != nil || r.Base != base || r.Index != first {
			// Torn or empty at its start: it and every later file hold
			// nothing that survived; Truncate removes them.
			seg.n, seg.written = 0, 0
		}
		q.segs = append(q.segs, seg)
	}
	if len(q.segs) > 0 {
		q.floor = q.segs[0].base
	}
	s.open[q] = struct{}{}
	return q, nil
}

// Floor is the first offset this queue indexes (older ones were dropped, or
// never held here: a node that installed a snapshot starts at its end).
func (q *Queue) Floor() uint64 { return q.floor }

// Next is the offset after the last record.
func (q *Queue) Next() uint64 { return q.next }

// Truncate drops every record of a log index above maxIndex and any torn
// record, scanning back from the end (so its cost is the records past
// maxIndex, not the queue), and reloads the tail. The records up to
// maxIndex are trusted as synced; each is checked when read.
func (q *Queue) Truncate(maxIndex uint64) error {
	q.pend, q.pendSkip, q.tail = q.pend[:0], q.pendSkip[:0], nil
	for len(q.segs) > 0 {
		seg := q.segs[len(q.segs)-1]
		keep := 0
		if seg.n > 0 && seg.first <= maxIndex {
			var err error
			if keep, err = q.lastAtOrBelow(seg, maxIndex); err != nil {
				return err
			}
		}
		if keep == 0 {
			if err := q.removeLast(); err != nil {
				return err
			}
			continue
		}
		if keep < seg.written {
			if err := q.cut(seg, keep); err != nil {
				return err
			}
		}
		break
	}
	q.next, q.lastIndex = q.floor, 0
	if len(q.segs) == 0 {
		return nil
	}
	seg := q.segs[len(q.segs)-1]
	// Appends go on after the skip lists already there (a cut leaves any
	// of the dropped records' lists in place, unreferenced).
	sf, size, err := q.s.fs.open(skipPath(seg.path))
	if err != nil {
		return err
	}
	sf.Close()
	seg.skipSize, seg.skipWritten = size, size
	from := max(0, seg.written-q.s.opts.Tail)
	recs, err := q.read(seg, from, seg.written-from)
	if err != nil {
		return err
	}
	q.tail = recs
	last := recs[len(recs)-1]
	q.next, q.lastIndex = last.End(), last.Index
	return nil
}

// lastAtOrBelow returns how many leading records of seg to keep: up to the
// last intact one whose log index is at most maxIndex.
func (q *Queue) lastAtOrBelow(seg *segment, maxIndex uint64) (int, error) {
	f, _, err := q.s.fs.open(seg.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	const chunk = 1024
	buf := make([]byte, chunk*RecordLen)
	for end := seg.written; end > 0; {
		start := max(0, end-chunk)
		b := buf[:(end-start)*RecordLen]
		if _, err := f.ReadAt(b, int64(start)*RecordLen); err != nil {
			return 0, fmt.Errorf("read %s: %w", seg.path, err)
		}
		for j := end - start - 1; j >= 0; j-- {
			r, _, err := seg.parseRecord(b[j*RecordLen:])
			if err == nil && r.Index <= maxIndex {
				return start + j + 1, nil
			}
		}
		end = start
	}
	return 0, nil
}

// cut truncates seg's file to its first keep records.
func (q *Queue) cut(seg *segment, keep int) error {
	q.s.syncMu.Lock()
	defer q.s.syncMu.Unlock()
	f, _, err := q.s.fs.open(seg.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(int64(keep) * RecordLen); err != nil {
		return err
	}
	seg.n, seg.written = keep, keep
	q.s.markDirty(seg)
	return nil
}

// Reset empties the queue; its next record will be at offset start.
func (q *Queue) Reset(start uint64) error {
	q.pend, q.pendSkip, q.tail = q.pend[:0], q.pendSkip[:0], nil
	for len(q.segs) > 0 {
		if err := q.removeLast(); err != nil {
			return err
		}
	}
	q.floor, q.next, q.lastIndex = start, start, 0
	return nil
}

func (q *Queue) removeLast() error {
	return q.remove(len(q.segs) - 1)
}

// remove deletes segment i's files.
func (q *Queue) remove(i int) error {
	seg := q.segs[i]
	q.s.syncMu.Lock()
	defer q.s.syncMu.Unlock()
	q.s.mu.Lock()
	delete(q.s.dirty, seg)
	q.s.mu.Unlock()
	seg.closeFiles()
	if err := q.s.fs.remove(seg.path); err != nil {
		return err
	}
	if err := q.s.fs.remove(skipPath(seg.path)); err != nil {
		return err
	}
	q.s.markDirDirty(q.dir)
	q.segs = slices.Delete(q.segs, i, i+1)
	return nil
}

// Append adds the record of the next entry holding messages of the queue.
// It is written once flushEvery records are buffered, at a Flush, or when
// its file is full.
func (q *Queue) Append(r Record) error {
	if r.Count == 0 || r.Index == 0 || r.Base != q.next || (q.lastIndex != 0 && r.Index <= q.lastIndex) {
		return fmt.Errorf("%w: record of %d messages at offset %d, log index %d after offset %d, log index %d",
			ErrCorrupt, r.Count, r.Base, r.Index, q.next, q.lastIndex)
	}
	if n := len(q.segs); n == 0 || q.segs[n-1].n >= q.s.opts.RecordsPerFile || !q.segs[n-1].fits(r) {
		if err := q.roll(r); err != nil {
			return err
		}
	}
	seg := q.segs[len(q.segs)-1]
	var ref uint32
	if needsSkipEntry(r) {
		ref = uint32(seg.skipSize) + 1
		before := len(q.pendSkip)
		q.pendSkip = appendSkip(q.pendSkip, r)
		seg.skipSize += int64(len(q.pendSkip) - before)
	}
	var b [RecordLen]byte
	seg.putRecord(b[:], r, ref)
	q.pend = append(q.pend, b[:]...)
	seg.n++
	q.next, q.lastIndex = r.End(), r.Index
	if len(q.tail) >= 2*q.s.opts.Tail {
		n := copy(q.tail, q.tail[len(q.tail)-q.s.opts.Tail+1:])
		clear(q.tail[n:])
		q.tail = q.tail[:n]
	}
	q.tail = append(q.tail, r)
	if len(q.pend) >= flushEvery*RecordLen {
		return q.flush()
	}
	return nil
}

// roll writes the current segment out and starts a new one at r.
func (q *Queue) roll(r Record) error {
	if err := q.flush(); err != nil {
		return err
	}
	if n := len(q.segs); n > 0 {
		// Sealed: the next Sync closes its files (it may be syncing them
		// right now, so they are not closed here).
		q.s.mu.Lock()
		q.segs[n-1].sealed = true
		q.s.dirty[q.segs[n-1]] = struct{}{}
		q.s.mu.Unlock()
	}
	seg := &segment{path: filepath.Join(q.dir, segName(r.Base, r.Index)), base: r.Base, first: r.Index}
	f, size, err := q.s.fs.open(seg.path)
	if err != nil {
		return err
	}
	if size > 0 { // a leftover of a cut: nothing in it is live
		if err := f.Truncate(0); err != nil {
			f.Close()
			return err
		}
	}
	seg.f = f
	if len(q.segs) == 0 {
		q.floor = max(q.floor, r.Base)
	}
	q.segs = append(q.segs, seg)
	q.s.markDirDirty(q.dir)
	return nil
}

// flush writes the buffered records (skip lists first, so that no written
// record refers past the skip file's end).
func (q *Queue) flush() error {
	if len(q.pend) == 0 {
		return nil
	}
	seg := q.segs[len(q.segs)-1]
	if seg.f == nil {
		f, _, err := q.s.fs.open(seg.path)
		if err != nil {
			return err
		}
		q.s.mu.Lock() // Sync reads the handles under it
		seg.f = f
		q.s.mu.Unlock()
	}
	if len(q.pendSkip) > 0 {
		if seg.sf == nil {
			f, _, err := q.s.fs.open(skipPath(seg.path))
			if err != nil {
				return err
			}
			q.s.mu.Lock()
			seg.sf = f
			q.s.mu.Unlock()
		}
		if _, err := seg.sf.WriteAt(q.pendSkip, seg.skipWritten); err != nil {
			return fmt.Errorf("queueindex: write %s: %w", skipPath(seg.path), err)
		}
		seg.skipWritten += int64(len(q.pendSkip))
		q.pendSkip = q.pendSkip[:0]
	}
	if _, err := seg.f.WriteAt(q.pend, int64(seg.written)*RecordLen); err != nil {
		return fmt.Errorf("queueindex: write %s: %w", seg.path, err)
	}
	seg.written += len(q.pend) / RecordLen
	q.pend = q.pend[:0]
	q.s.markDirty(seg)
	return nil
}

// Find returns up to limit records from the one holding offset on (fewer
// at the end of a file); none when offset is outside [Floor, Next).
func (q *Queue) Find(offset uint64, limit int) ([]Record, error) {
	if offset < q.floor || offset >= q.next || limit <= 0 {
		return nil, nil
	}
	if n := len(q.tail); n > 0 && offset >= q.tail[0].Base {
		i := sort.Search(n, func(i int) bool { return q.tail[i].End() > offset })
		return slices.Clone(q.tail[i:min(n, i+limit)]), nil
	}
	si := sort.Search(len(q.segs), func(i int) bool { return q.segs[i].base > offset }) - 1
	if si < 0 {
		return nil, fmt.Errorf("%w: no file holds offset %d of %s", ErrCorrupt, offset, q.dir)
	}
	seg := q.segs[si]
	i, err := q.search(seg, func(r Record) bool { return r.End() > offset })
	if err != nil {
		return nil, err
	}
	if i == seg.written {
		return nil, fmt.Errorf("%w: offset %d is not in %s", ErrCorrupt, offset, seg.path)
	}
	return q.read(seg, i, min(limit, seg.written-i))
}

// FindIndex returns the record of log entry index (false when the queue has
// no messages in it, or not any more).
func (q *Queue) FindIndex(index uint64) (Record, bool, error) {
	if q.lastIndex == 0 || index > q.lastIndex {
		return Record{}, false, nil
	}
	if n := len(q.tail); n > 0 && index >= q.tail[0].Index {
		i := sort.Search(n, func(i int) bool { return q.tail[i].Index >= index })
		if i < n && q.tail[i].Index == index && q.tail[i].End() > q.floor {
			return q.tail[i], true, nil
		}
		return Record{}, false, nil
	}
	si := sort.Search(len(q.segs), func(i int) bool { return q.segs[i].first > index }) - 1
	if si < 0 {
		return Record{}, false, nil
	}
	seg := q.segs[si]
	i, err := q.search(seg, func(r Record) bool { return r.Index >= index })
	if err != nil || i == seg.written {
		return Record{}, false, err
	}
	recs, err := q.read(seg, i, 1)
	if err != nil {
		return Record{}, false, err
	}
	if recs[0].Index != index || recs[0].End() <= q.floor {
		return Record{}, false, nil
	}
	return recs[0], true, nil
}

// search is sort.Search over seg's written records.
func (q *Queue) search(seg *segment, pred func(Record) bool) (int, error) {
	f, closeF, err := q.reader(seg)
	if err != nil {
		return 0, err
	}
	defer closeF()
	var b [RecordLen]byte
	var rerr error
	sk := q.skips(seg)
	defer sk.close()
	i := sort.Search(seg.written, func(i int) bool {
		if rerr != nil {
			return true
		}
		if _, err := f.ReadAt(b[:], int64(i)*RecordLen); err != nil {
			rerr = err
			return true
		}
		r, ref, err := seg.parseRecord(b[:])
		if err == nil && ref != 0 {
			err = sk.fill(ref, &r)
		}
		if err != nil {
			rerr = fmt.Errorf("%s record %d: %w", seg.path, i, err)
			return true
		}
		return pred(r)
	})
	return i, rerr
}

// read returns n written records of seg from record from on, skip lists
// included.
func (q *Queue) read(seg *segment, from, n int) ([]Record, error) {
	f, closeF, err := q.reader(seg)
	if err != nil {
		return nil, err
	}
	defer closeF()
	b := make([]byte, n*RecordLen)
	if _, err := f.ReadAt(b, int64(from)*RecordLen); err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrCorrupt, seg.path, err)
	}
	out := make([]Record, n)
	sk := q.skips(seg)
	defer sk.close()
	for i := range out {
		r, ref, err := seg.parseRecord(b[i*RecordLen:])
		if err != nil {
			return nil, fmt.Errorf("%s record %d: %w", seg.path, from+i, err)
		}
		if i > 0 && (r.Base != out[i-1].End() || r.Index <= out[i-1].Index) {
			return nil, fmt.Errorf("%w: %s record %d does not follow the one before", ErrCorrupt, seg.path, from+i)
		}
		if ref != 0 {
			if err := sk.fill(ref, &r); err != nil {
				return nil, fmt.Errorf("%s record %d: %w", seg.path, from+i, err)
			}
		}
		out[i] = r
	}
	return out, nil
}

// skipReader fills records from their entries in a segment's skip file,
// which it opens at the first record that has one.
type skipReader struct {
	fs   fsys
	path string
	f    file
}

func (q *Queue) skips(seg *segment) *skipReader {
	return &skipReader{fs: q.s.fs, path: skipPath(seg.path)}
}

// fill reads r's count and skip list from the skip entry ref names.
func (sk *skipReader) fill(ref uint32, r *Record) error {
	if sk.f == nil {
		f, _, err := sk.fs.open(sk.path)
		if err != nil {
			return err
		}
		sk.f = f
	}
	return readSkip(sk.f, int64(ref-1), r)
}

func (sk *skipReader) close() {
	if sk.f != nil {
		sk.f.Close()
	}
}

// reader is a file to read seg from: the writer's own for the segment being
// appended to, a fresh one for a sealed segment (Sync may close the
// writer's).
func (q *Queue) reader(seg *segment) (file, func(), error) {
	if seg == q.segs[len(q.segs)-1] && seg.f != nil {
		return seg.f, func() {}, nil
	}
	f, _, err := q.s.fs.open(seg.path)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// DropBelowIndex drops the records of every log index below below
// (retention) and returns the new floor: the first offset of a record at or
// above below, or Next when none is.
func (q *Queue) DropBelowIndex(below uint64) (uint64, error) {
	if q.lastIndex == 0 || q.lastIndex < below {
		q.floor = q.next
		return q.floor, q.dropSegments()
	}
	for len(q.segs) > 1 && q.segs[1].first <= below {
		if err := q.remove(0); err != nil {
			return q.floor, err
		}
	}
	first, err := q.firstAtOrAbove(below)
	if err != nil {
		return q.floor, err
	}
	q.floor = max(q.floor, first)
	return q.floor, nil
}

// FloorAt is the floor DropBelowIndex(below) would leave, without dropping
// anything: the first offset of a record of log index below or above
// (never below Floor), or Next when none is.
func (q *Queue) FloorAt(below uint64) (uint64, error) {
	if q.lastIndex == 0 || q.lastIndex < below {
		return q.next, nil
	}
	first, err := q.firstAtOrAbove(below)
	if err != nil {
		return q.floor, err
	}
	return max(q.floor, first), nil
}

// firstAtOrAbove is the offset of the first record of log index below or
// above, the queue holding one (lastIndex >= below).
func (q *Queue) firstAtOrAbove(below uint64) (uint64, error) {
	if n := len(q.tail); n > 0 && below >= q.tail[0].Index {
		return q.tail[sort.Search(n, func(i int) bool { return q.tail[i].Index >= below })].Base, nil
	}
	// The last file whose first record is at or below below (the first
	// file when none is).
	si := max(0, sort.Search(len(q.segs), func(i int) bool { return q.segs[i].first > below })-1)
	seg := q.segs[si]
	i, err := q.search(seg, func(r Record) bool { return r.Index >= below })
	if err != nil {
		return 0, err
	}
	switch {
	case i < seg.written:
	case si+1 < len(q.segs): // the next file starts at or above below
		return q.segs[si+1].base, nil
	case i == 0: // every record of the only file is pending
		return seg.base, nil
	default: // the first pending record follows the last written one
		i--
	}
	recs, err := q.read(seg, i, 1)
	if err != nil {
		return 0, err
	}
	if recs[0].Index < below {
		return recs[0].End(), nil
	}
	return recs[0].Base, nil
}

// DropBelowOffset drops the records wholly below offset (a schedule
// queue's delivered cursor), file by file.
func (q *Queue) DropBelowOffset(offset uint64) error {
	q.floor = max(q.floor, min(offset, q.next))
	for len(q.segs) > 1 && q.segs[1].base <= q.floor {
		if err := q.remove(0); err != nil {
			return err
		}
	}
	return nil
}

// dropSegments deletes every file; the next Append starts a new one.
func (q *Queue) dropSegments() error {
	if err := q.flush(); err != nil {
		return err
	}
	for len(q.segs) > 0 {
		if err := q.removeLast(); err != nil {
			return err
		}
	}
	q.tail = nil
	return nil
}

// close forgets the queue and closes its files (the caller holds syncMu
// for closeLocked).
func (q *Queue) close() {
	q.s.syncMu.Lock()
	defer q.s.syncMu.Unlock()
	q.closeLocked()
}

func (q *Queue) closeLocked() {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.dropSegsLocked()
	delete(q.s.open, q)
}

// dropSegsLocked closes q's segment files and takes them off the list of
// what the next Sync syncs (the store's mu held).
func (q *Queue) dropSegsLocked() {
	for _, seg := range q.segs {
		delete(q.s.dirty, seg)
		seg.closeFiles()
	}
}

func (seg *segment) closeFiles() {
	if seg.f != nil {
		seg.f.Close()
		seg.f = nil
	}
	if seg.sf != nil {
		seg.sf.Close()
		seg.sf = nil
	}
}
