package keyindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

const (
	magic      = 0x524d4b49 // "RMKI"
	version    = 1
	headerLen  = 40
	entryLen   = 20
	stateOpen  = 1 // being written: not trusted after a crash
	stateClean = 2 // closed cleanly: the header is true, appending may go on
	stateFull  = 3 // sealed
)

// Options shape the index files.
type Options struct {
	Slots   uint32 // hash slots per file
	Entries uint32 // entries per file
}

// DefaultOptions: 1M slots (4 MiB, the memory the current file costs) and
// 4M entries (80 MiB) per file.
func DefaultOptions() Options { return Options{Slots: 1 << 20, Entries: 4 << 20} }

// Hit is a candidate message: the log entry and the message's ordinal in it.
type Hit struct {
	LogIndex uint64
	Ordinal  uint32
}

// Index is the key index in one directory.
type Index struct {
	dir  string
	opts Options

	mu     sync.Mutex
	sealed []*file // oldest first
	cur    *file   // nil until the first Add
	next   uint64  // every entry below has been indexed
}

type file struct {
	path     string
	f        *os.File
	nslots   uint32
	nentries uint32
	first    uint64   // first log index of the file
	last     uint64   // last log index whose keys are all in it
	count    uint32   // entries used
	slots    []uint32 // the current file's slot table; nil for a sealed file
	// Entries added since the last flush (current file only), from entry
	// number flushed+1 on.
	pending []byte
	flushed uint32
	dirty   map[uint32]bool // slots changed since the last flush
}

// Open opens (or creates) the index in dir.
func Open(dir string, opts Options) (*Index, error) {
	if opts.Slots == 0 || opts.Entries == 0 {
		return nil, errors.New("keyindex: slots and entries per file must be > 0")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("keyindex: %w", err)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*.idx"))
	if err != nil {
		return nil, fmt.Errorf("keyindex: %w", err)
	}
	sort.Strings(names) // names are the zero-padded first log index
	x := &Index{dir: dir, opts: opts}
	for i, name := range names {
		fl, state, err := openFile(name)
		if err == nil && state != stateOpen && (len(x.sealed) == 0 || fl.first > x.sealed[len(x.sealed)-1].last) {
			if state == stateFull || i < len(names)-1 {
				x.sealed = append(x.sealed, fl)
			} else if err = fl.loadSlots(); err == nil {
				x.cur = fl
			}
		}
		if err == nil && (x.cur == fl || len(x.sealed) > 0 && x.sealed[len(x.sealed)-1] == fl) {
			x.next = fl.last + 1
			continue
		}
		// Torn, or not closed cleanly: this file and every later one are
		// indexed again from the log.
		if fl != nil {
			fl.f.Close()
		}
		for _, n := range names[i:] {
			os.Remove(n)
		}
		break
	}
	return x, nil
}

func openFile(path string) (*file, uint32, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, err
	}
	var h [headerLen]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		f.Close()
		return nil, 0, err
	}
	be := binary.BigEndian
	if be.Uint32(h[0:]) != magic || be.Uint32(h[4:]) != version {
		f.Close()
		return nil, 0, fmt.Errorf("keyindex: %s: not an index file", path)
	}
	fl := &file{path: path, f: f, nslots: be.Uint32(h[8:]), nentries: be.Uint32(h[12:]),
		first: be.Uint64(h[16:]), last: be.Uint64(h[24:]), count: be.Uint32(h[32:])}
	fl.flushed = fl.count
	if st, err := f.Stat(); err != nil || fl.nslots == 0 || st.Size() != fileSize(fl.nslots, fl.nentries) || fl.count > fl.nentries {
		return fl, stateOpen, nil
	}
	return fl, be.Uint32(h[36:]), nil
}

func fileSize(slots, entries uint32) int64 {
	return headerLen + int64(slots)*4 + int64(entries)*entryLen
}

func (fl *file) loadSlots() error {
	buf := make([]byte, int(fl.nslots)*4)
	if _, err := fl.f.ReadAt(buf, headerLen); err != nil {
		return err
	}
	fl.slots = make([]uint32, fl.nslots)
	for i := range fl.slots {
		fl.slots[i] = binary.BigEndian.Uint32(buf[i*4:])
	}
	fl.dirty = map[uint32]bool{}
	return nil
}

// Next is the first log index whose keys are not indexed yet (0: none is).
func (x *Index) Next() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.next
}

func hashKey(topic, key string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return h.Sum32()
}

// Add indexes key of topic for message ordinal of log entry logIndex.
// Entries are added in log order; logIndex is at least Next.
func (x *Index) Add(logIndex uint64, ordinal uint32, topic, key string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if logIndex < x.next {
		return fmt.Errorf("keyindex: add of log index %d below the next one %d", logIndex, x.next)
	}
	if x.cur == nil || x.cur.count >= x.cur.nentries {
		// A full file is sealed even inside an entry: its last stays the
		// last entry it holds all keys of.
		if err := x.rollLocked(logIndex); err != nil {
			return err
		}
	}
	fl := x.cur
	h := hashKey(topic, key)
	slot := h % fl.nslots
	var e [entryLen]byte
	be := binary.BigEndian
	be.PutUint32(e[0:], h)
	be.PutUint64(e[4:], logIndex)
	be.PutUint32(e[12:], ordinal)
	be.PutUint32(e[16:], fl.slots[slot])
	fl.pending = append(fl.pending, e[:]...)
	fl.count++
	fl.slots[slot] = fl.count
	fl.dirty[slot] = true
	return nil
}

// Done records that every key of entries up to logIndex is added.
func (x *Index) Done(logIndex uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if logIndex+1 > x.next {
		x.next = logIndex + 1
		if x.cur != nil {
			x.cur.last = logIndex
		}
	}
}

// Skip moves Next to logIndex (entries below it are gone from the log).
func (x *Index) Skip(logIndex uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if logIndex > x.next {
		x.next = logIndex
		if x.cur != nil && x.cur.count == 0 {
			x.cur.first = logIndex
		}
	}
}

func (x *Index) rollLocked(first uint64) error {
	if x.cur != nil {
		if err := x.cur.flush(stateFull); err != nil {
			return err
		}
		x.cur.slots, x.cur.dirty = nil, nil
		x.sealed = append(x.sealed, x.cur)
		x.cur = nil
	}
	path := filepath.Join(x.dir, fmt.Sprintf("%020d.idx", first))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("keyindex: %w", err)
	}
	if err := f.Truncate(fileSize(x.opts.Slots, x.opts.Entries)); err != nil { // sparse: blocks are used as written
		f.Close()
		return fmt.Errorf("keyindex: %w", err)
	}
	fl := &file{path: path, f: f, nslots: x.opts.Slots, nentries: x.opts.Entries, first: first, last: max(first, 1) - 1,
		slots: make([]uint32, x.opts.Slots), dirty: map[uint32]bool{}}
	if err := fl.writeHeader(stateOpen); err != nil {
		return err
	}
	x.cur = fl
	return nil
}

func (fl *file) writeHeader(state uint32) error {
	var h [headerLen]byte
	be := binary.BigEndian
	be.PutUint32(h[0:], magic)
	be.PutUint32(h[4:], version)
	be.PutUint32(h[8:], fl.nslots)
	be.PutUint32(h[12:], fl.nentries)
	be.PutUint64(h[16:], fl.first)
	be.PutUint64(h[24:], fl.last)
	be.PutUint32(h[32:], fl.count)
	be.PutUint32(h[36:], state)
	if _, err := fl.f.WriteAt(h[:], 0); err != nil {
		return fmt.Errorf("keyindex: write %s: %w", fl.path, err)
	}
	return nil
}

// flush writes the pending entries, the changed slots, and the header in
// the given state.
func (fl *file) flush(state uint32) error {
	base := headerLen + int64(fl.nslots)*4
	if len(fl.pending) > 0 {
		if _, err := fl.f.WriteAt(fl.pending, base+int64(fl.flushed)*entryLen); err != nil {
			return fmt.Errorf("keyindex: write %s: %w", fl.path, err)
		}
		fl.flushed += uint32(len(fl.pending) / entryLen)
		fl.pending = fl.pending[:0]
	}
	if len(fl.dirty) > len(fl.slots)/64 {
		buf := make([]byte, len(fl.slots)*4)
		for i, s := range fl.slots {
			binary.BigEndian.PutUint32(buf[i*4:], s)
		}
		if _, err := fl.f.WriteAt(buf, headerLen); err != nil {
			return fmt.Errorf("keyindex: write %s: %w", fl.path, err)
		}
	} else {
		var b [4]byte
		for s := range fl.dirty {
			binary.BigEndian.PutUint32(b[:], fl.slots[s])
			if _, err := fl.f.WriteAt(b[:], headerLen+int64(s)*4); err != nil {
				return fmt.Errorf("keyindex: write %s: %w", fl.path, err)
			}
		}
	}
	clear(fl.dirty)
	return fl.writeHeader(state)
}

// Flush writes what was added to disk (still marked open: after a crash the
// current file is indexed again).
func (x *Index) Flush() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.recordNextLocked(); err != nil || x.cur == nil {
		return err
	}
	return x.cur.flush(stateOpen)
}

// recordNextLocked creates the current file when entries were indexed but
// none had a key: only a file records how far the index got, and without
// one every start read the whole log again from index 1 (a log of 2 GB
// without keys at every restart).
func (x *Index) recordNextLocked() error {
	if x.cur != nil || x.next <= 1 {
		return nil
	}
	for _, fl := range x.sealed {
		if fl.last+1 >= x.next {
			return nil
		}
	}
	return x.rollLocked(x.next)
}

// Close flushes and closes the files; the current one is marked clean so
// that the next Open goes on appending to it.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	err := x.recordNextLocked()
	if x.cur != nil {
		if ferr := x.cur.flush(stateClean); err == nil {
			err = ferr
		}
		if serr := x.cur.f.Sync(); err == nil {
			err = serr
		}
		x.cur.f.Close()
		x.cur = nil
	}
	for _, fl := range x.sealed {
		fl.f.Close()
	}
	x.sealed = nil
	return err
}

// entryAt reads entry number n (1-based) of fl.
func (fl *file) entryAt(n uint32) (h uint32, logIndex uint64, ordinal, prev uint32, err error) {
	var e []byte
	if n > fl.flushed {
		off := int(n-fl.flushed-1) * entryLen
		if off+entryLen > len(fl.pending) {
			return 0, 0, 0, 0, fmt.Errorf("keyindex: entry %d past the end", n)
		}
		e = fl.pending[off : off+entryLen]
	} else {
		var b [entryLen]byte
		if _, err := fl.f.ReadAt(b[:], headerLen+int64(fl.nslots)*4+int64(n-1)*entryLen); err != nil {
			return 0, 0, 0, 0, err
		}
		e = b[:]
	}
	be := binary.BigEndian
	return be.Uint32(e[0:]), be.Uint64(e[4:]), be.Uint32(e[12:]), be.Uint32(e[16:]), nil
}

func (fl *file) slotHead(h uint32) (uint32, error) {
	if fl.slots != nil {
		return fl.slots[h%fl.nslots], nil
	}
	var b [4]byte
	if _, err := fl.f.ReadAt(b[:], headerLen+int64(h%fl.nslots)*4); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint32(b[:]), nil
}

// MaxSteps bounds the entries one Lookup walks (collisions included).
const MaxSteps = 1 << 16

// Lookup returns up to limit candidates for (topic, key), newest first.
func (x *Index) Lookup(topic, key string, limit int) ([]Hit, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	h := hashKey(topic, key)
	files := append([]*file{}, x.sealed...)
	if x.cur != nil {
		files = append(files, x.cur)
	}
	var out []Hit
	steps := 0
	for i := len(files) - 1; i >= 0 && len(out) < limit; i-- {
		fl := files[i]
		n, err := fl.slotHead(h)
		if err != nil {
			return out, fmt.Errorf("keyindex: read %s: %w", fl.path, err)
		}
		for n != 0 && n <= fl.count && len(out) < limit && steps < MaxSteps {
			steps++
			eh, li, ord, prev, err := fl.entryAt(n)
			if err != nil {
				return out, fmt.Errorf("keyindex: read %s: %w", fl.path, err)
			}
			if eh == h {
				out = append(out, Hit{LogIndex: li, Ordinal: ord})
			}
			if prev >= n { // a chain only goes back
				break
			}
			n = prev
		}
	}
	return out, nil
}

// DropBelow deletes the sealed files whose every entry is below logIndex
// (the log no longer holds them).
func (x *Index) DropBelow(logIndex uint64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	keep := x.sealed[:0]
	var errs []string
	for _, fl := range x.sealed {
		if fl.last < logIndex {
			fl.f.Close()
			if err := os.Remove(fl.path); err != nil {
				errs = append(errs, err.Error())
			}
			continue
		}
		keep = append(keep, fl)
	}
	x.sealed = keep
	if len(errs) > 0 {
		return fmt.Errorf("keyindex: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Files is the number of index files (for tests and metrics).
func (x *Index) Files() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := len(x.sealed)
	if x.cur != nil {
		n++
	}
	return n
}
