package queueindex

import (
	"fmt"
	"path/filepath"
	"sort"
)

// Scanned is one record position of a file as Scan read it: the record, or
// OK false where the bytes are damaged (checksum, skip list) or missing (a
// file shorter than the records it should hold, or deleted).
type Scanned struct {
	Record
	OK bool
}

// ScanPos is where a Scan goes on: the file of that base offset, that
// record of it. The zero value starts at the first file.
type ScanPos struct {
	File uint64
	Rec  int
}

// Scan reads up to limit record positions from pos on, file after file,
// without trusting any of them: each comes back with OK set when its
// checksum (and its skip list's) holds. A file retention removed since the
// last call is passed over. It returns where to go on, and done when it
// read the last position of the last file. Records not written yet come
// from memory. It never changes the queue, so it may run beside readers.
func (q *Queue) Scan(pos ScanPos, limit int) (out []Scanned, next ScanPos, done bool) {
	si := sort.Search(len(q.segs), func(i int) bool { return q.segs[i].base >= pos.File })
	if si < len(q.segs) && q.segs[si].base != pos.File {
		pos.Rec = 0 // its file is gone: go on at the next one
	}
	for ; si < len(q.segs) && len(out) < limit; si, pos.Rec = si+1, 0 {
		seg := q.segs[si]
		pos.File = seg.base
		if pos.Rec < seg.n {
			n := min(limit-len(out), seg.n-pos.Rec)
			out = append(out, q.scanFile(seg, pos.Rec, n)...)
			pos.Rec += n
		}
		if pos.Rec < seg.n {
			return out, pos, false
		}
	}
	if si >= len(q.segs) {
		if len(q.segs) > 0 {
			last := q.segs[len(q.segs)-1]
			return out, ScanPos{File: last.base, Rec: last.n}, true
		}
		return out, pos, true
	}
	return out, ScanPos{File: q.segs[si].base}, false
}

// scanFile reads n record positions of seg from from on.
func (q *Queue) scanFile(seg *segment, from, n int) []Scanned {
	out := make([]Scanned, n)
	// Pending records are the last ones of the last file, all in the tail.
	written := min(seg.written, from+n)
	if seg == q.segs[len(q.segs)-1] {
		for i := max(from, seg.written); i < from+n; i++ {
			if t := len(q.tail) - (seg.n - i); t >= 0 {
				out[i-from] = Scanned{Record: q.tail[t], OK: true}
			}
		}
	}
	if from >= written {
		return out
	}
	f, closeF, err := q.reader(seg)
	if err != nil {
		return out
	}
	defer closeF()
	b := make([]byte, (written-from)*RecordLen)
	got, _ := f.ReadAt(b, int64(from)*RecordLen)
	sk := q.skips(seg)
	defer sk.close()
	for i := 0; (i+1)*RecordLen <= got; i++ {
		r, ref, err := seg.parseRecord(b[i*RecordLen:])
		if err != nil {
			continue
		}
		if ref != 0 && sk.fill(ref, &r) != nil {
			continue
		}
		out[i] = Scanned{Record: r, OK: true}
	}
	return out
}

// Check looks for files shorter than the records written to them (torn, cut
// or deleted under the running node). It reads one size per file and
// changes nothing. It is Sizes and CheckSizes at once.
func (q *Queue) Check() error { return q.s.CheckSizes(q.Sizes()) }

// FileSize is the least size a file of a queue must have.
type FileSize struct {
	Path string
	Min  int64
}

// Sizes lists the least size of each of the queue's files: what was written
// to it. It reads nothing from disk, so a caller can take it under the lock
// that keeps writers out and check it (CheckSizes) after releasing it.
func (q *Queue) Sizes() []FileSize {
	out := make([]FileSize, 0, len(q.segs))
	for _, seg := range q.segs {
		if seg.written > 0 {
			out = append(out, FileSize{Path: seg.path, Min: int64(seg.written) * RecordLen})
		}
	}
	return out
}

// CheckSizes reports the first file shorter than its least size, or gone.
// A file the queue dropped or replaced since Sizes is not a fault: the
// caller takes Sizes again before it acts on an error.
func (s *Store) CheckSizes(files []FileSize) error {
	for _, f := range files {
		size, err := s.fs.size(f.Path)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrCorrupt, f.Path, err)
		}
		if size < f.Min {
			return fmt.Errorf("%w: %s holds %d bytes, %d records were written to it", ErrCorrupt, f.Path, size, f.Min/RecordLen)
		}
	}
	return nil
}

// OpenRebuild returns an empty queue beside q (in a directory of its own,
// emptied first) for a rebuild to append to; Replace puts it in q's place,
// Discard drops it. The store does not flush, sync or close it with the
// queues it handed out: only its owner writes it, Sync still syncs what it
// wrote.
func (s *Store) OpenRebuild(q *Queue) (*Queue, error) {
	dir := q.dir + rebuildSuffix
	if err := s.fs.removeAll(dir); err != nil {
		return nil, fmt.Errorf("queueindex: %w", err)
	}
	if err := s.fs.mkdirAll(dir); err != nil {
		return nil, fmt.Errorf("queueindex: %w", err)
	}
	return &Queue{s: s, dir: dir}, nil
}

// rebuildSuffix names the directory a rebuild writes beside its queue's.
const rebuildSuffix = ".rebuild"

// Flush writes the queue's buffered records (a rebuilt queue's owner calls
// it; the store flushes the queues it handed out itself).
func (q *Queue) Flush() error { return q.flush() }

// Replace puts nq (from OpenRebuild(q)) in q's place: q's files are
// deleted, nq's directory takes q's name, and q holds nq's records from
// then on (nq is not used again). The files are synced by the next Sync, as
// appended ones are. On an error q is left without records; Reset makes
// it usable again.
func (q *Queue) Replace(nq *Queue) error {
	if err := nq.flush(); err != nil {
		return err
	}
	q.s.syncMu.Lock()
	defer q.s.syncMu.Unlock()
	q.closeSegs(nq.dir) // renamed: its new name is synced
	q.segs, q.tail, q.pend, q.pendSkip = nil, nil, q.pend[:0], q.pendSkip[:0]
	q.next, q.lastIndex = q.floor, 0
	if err := q.s.fs.removeAll(q.dir); err != nil {
		return fmt.Errorf("queueindex: replace %s: %w", q.dir, err)
	}
	// Open files stay open across the rename: Sync still syncs them.
	if err := q.s.fs.rename(nq.dir, q.dir); err != nil {
		return fmt.Errorf("queueindex: replace %s: %w", q.dir, err)
	}
	for _, seg := range nq.segs {
		seg.path = filepath.Join(q.dir, filepath.Base(seg.path))
	}
	q.segs, q.floor, q.next, q.lastIndex = nq.segs, nq.floor, nq.next, nq.lastIndex
	q.tail = nq.tail
	q.s.markDirDirty(q.dir)
	q.s.markDirDirty(filepath.Dir(q.dir))
	*nq = Queue{s: q.s}
	return nil
}

// closeSegs closes q's segment files and takes them, and the directory
// dir, off the list of what the next Sync syncs (syncMu held).
func (q *Queue) closeSegs(dir string) {
	q.s.mu.Lock()
	defer q.s.mu.Unlock()
	q.dropSegsLocked()
	delete(q.s.dirtyDirs, dir)
}

// Discard closes nq (from OpenRebuild) and deletes its files.
func (q *Queue) Discard() error {
	q.s.syncMu.Lock()
	defer q.s.syncMu.Unlock()
	q.closeSegs(q.dir)
	q.segs = nil
	if err := q.s.fs.removeAll(q.dir); err != nil {
		return fmt.Errorf("queueindex: %w", err)
	}
	return nil
}
