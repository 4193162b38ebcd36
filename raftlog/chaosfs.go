package raftlog

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// Fault injection for the fault suite (integration/chaos) only. With the
// environment variable RAFTMQ_CHAOS_LAZYFS=1, raft-wal's files behave like
// Jepsen's lazyfs: a write reaches the file only when the file is synced,
// so a process killed before its fsync returned loses everything it wrote
// since its last fsync (a machine crash loses the page cache). The file
// CHAOS_FSYNC_DELAY in the data directory, when it holds a duration
// ("150ms"), makes every sync wait that long first (a slow disk). Neither
// changes anything unless the variable is set.
const (
	chaosFSEnv     = "RAFTMQ_CHAOS_LAZYFS"
	chaosDelayFile = "CHAOS_FSYNC_DELAY"
)

// chaosVFS returns the lazy file system for the log directory logDir, or
// nil when the environment does not ask for it.
func chaosVFS(logDir string) types.VFS {
	if os.Getenv(chaosFSEnv) != "1" {
		return nil
	}
	return &lazyFS{FS: fs.New(), delayPath: filepath.Join(filepath.Dir(logDir), chaosDelayFile)}
}

type lazyFS struct {
	*fs.FS
	delayPath string

	mu      sync.Mutex
	checked time.Time
	delay   time.Duration
}

// syncDelay is the current delay, reread at most every 100 ms.
func (l *lazyFS) syncDelay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.checked) > 100*time.Millisecond {
		l.checked = time.Now()
		l.delay = 0
		if b, err := os.ReadFile(l.delayPath); err == nil {
			if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil && d > 0 {
				l.delay = d
			}
		}
	}
	return l.delay
}

func (l *lazyFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := l.FS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &lazyFile{f: f, fs: l}, nil
}

func (l *lazyFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := l.FS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &lazyFile{f: f, fs: l}, nil
}

type pendingWrite struct {
	off  int64
	data []byte
}

// lazyFile keeps writes in memory until Sync.
type lazyFile struct {
	f  types.WritableFile
	fs *lazyFS

	mu      sync.Mutex
	pending []pendingWrite
}

func (f *lazyFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	f.pending = append(f.pending, pendingWrite{off, append([]byte(nil), p...)})
	f.mu.Unlock()
	return len(p), nil
}

// ReadAt reads the file with the pending writes laid over it. It holds
// the lock that flush holds while it moves pending writes into the file,
// so a read sees each write either in the file or pending, never in
// neither.
func (f *lazyFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.f.ReadAt(p, off)
	end := off + int64(n)
	for _, w := range f.pending {
		lo, hi := max(off, w.off), min(off+int64(len(p)), w.off+int64(len(w.data)))
		if lo >= hi {
			continue
		}
		copy(p[lo-off:hi-off], w.data[lo-w.off:hi-w.off])
		end = max(end, hi)
	}
	if got := int(end - off); got > n {
		n = got
		if n == len(p) {
			err = nil
		}
	}
	return n, err
}

// Sync waits for the slow-disk delay, then writes and syncs what is
// pending: a process killed meanwhile loses it.
func (f *lazyFile) Sync() error {
	if d := f.fs.syncDelay(); d > 0 {
		time.Sleep(d)
	}
	if err := f.flush(); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *lazyFile) flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.pending) > 0 {
		w := f.pending[0]
		if _, err := f.f.WriteAt(w.data, w.off); err != nil {
			return err
		}
		f.pending = f.pending[1:]
	}
	return nil
}

// Close writes what is pending (to the page cache, which a killed process
// does not lose) and closes the file.
func (f *lazyFile) Close() error {
	err := f.flush()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}
