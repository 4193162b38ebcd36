package queueindex

import (
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
)

// file is what the index needs of an open file.
type file interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Close() error
}

// fsys is where the index files live: a directory, or memory for nodes whose
// Raft log is in memory too.
type fsys interface {
	mkdirAll(dir string) error
	// open opens (creating when missing) a file for reading and writing and
	// returns its size.
	open(name string) (file, int64, error)
	// list returns the names in dir, sorted; none when dir is missing.
	list(dir string) ([]string, error)
	remove(name string) error
	removeAll(dir string) error
	// rename moves a directory to a name that does not exist.
	rename(from, to string) error
	// size is a file's size; an error when it is missing.
	size(name string) (int64, error)
	syncDir(dir string) error
}

type osFS struct{}

func (osFS) mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

func (osFS) open(name string) (file, int64, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func (osFS) list(dir string) ([]string, error) {
	es, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names, nil // ReadDir sorts by name
}

func (osFS) remove(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (osFS) removeAll(dir string) error { return os.RemoveAll(dir) }

func (osFS) rename(from, to string) error { return os.Rename(from, to) }

func (osFS) size(name string) (int64, error) {
	st, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (osFS) syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// memFS keeps the files in memory (paths use slashes).
type memFS struct {
	mu    sync.Mutex
	files map[string]*memFile
}

type memFile struct {
	mu   sync.RWMutex
	data []byte
}

func newMemFS() *memFS { return &memFS{files: map[string]*memFile{}} }

func (*memFS) mkdirAll(string) error { return nil }

func (m *memFS) open(name string) (file, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.files[name]
	if f == nil {
		f = &memFile{}
		m.files[name] = f
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f, int64(len(f.data)), nil
}

func (m *memFS) list(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for name := range m.files {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			first, _, _ := strings.Cut(rest, "/")
			seen[first] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func (m *memFS) remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, name)
	return nil
}

func (m *memFS) removeAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for name := range m.files {
		if name == dir || strings.HasPrefix(name, prefix) {
			delete(m.files, name)
		}
	}
	return nil
}

func (m *memFS) rename(from, to string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := strings.TrimSuffix(from, "/") + "/"
	dst := strings.TrimSuffix(to, "/") + "/"
	moved := map[string]*memFile{}
	for name, f := range m.files {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			delete(m.files, name)
			moved[dst+rest] = f
		}
	}
	for name, f := range moved {
		m.files[name] = f
	}
	return nil
}

func (m *memFS) size(name string) (int64, error) {
	m.mu.Lock()
	f := m.files[name]
	m.mu.Unlock()
	if f == nil {
		return 0, os.ErrNotExist
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return int64(len(f.data)), nil
}

func (*memFS) syncDir(string) error { return nil }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if off >= int64(len(f.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(f.data)) {
		f.data = append(f.data, make([]byte, end-int64(len(f.data)))...)
	}
	return copy(f.data[off:], p), nil
}

func (f *memFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if size < int64(len(f.data)) {
		f.data = f.data[:size:size]
	}
	return nil
}

func (*memFile) Sync() error  { return nil }
func (*memFile) Close() error { return nil }
