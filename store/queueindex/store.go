package queueindex

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Options shape the index.
type Options struct {
	RecordsPerFile int // records per index file
	Tail           int // records per queue kept in memory
}

// DefaultOptions: files of 64Ki records (1 MiB) and 256 records
// (12 KiB) per queue in memory.
func DefaultOptions() Options { return Options{RecordsPerFile: 1 << 16, Tail: 256} }

// flushEvery is how many records a queue buffers before it writes them.
// It must not exceed Options.Tail: records not written yet are served from
// the tail.
const flushEvery = 64

// Store is the index of every queue of a node, one directory per topic
// incarnation and one per queue inside it.
type Store struct {
	fs   fsys
	dir  string
	opts Options

	// open are the queues handed out; only the writer touches the set.
	open map[*Queue]struct{}

	// syncMu is held by Sync while it syncs files, and by whoever closes
	// or removes files, so that no file is closed under a sync.
	syncMu sync.Mutex
	mu     sync.Mutex // dirty and dirtyDirs
	dirty  map[*segment]struct{}
	// dirtyDirs are directories that gained or lost files since the last Sync.
	dirtyDirs map[string]struct{}
}

// Open opens the index in dir, creating it when missing. An empty dir keeps
// the index in memory (for nodes whose Raft log is in memory too).
func Open(dir string, opts Options) (*Store, error) {
	if opts.RecordsPerFile <= 0 || opts.Tail < flushEvery {
		return nil, fmt.Errorf("queueindex: records per file %d (want > 0), tail %d (want >= %d)", opts.RecordsPerFile, opts.Tail, flushEvery)
	}
	s := &Store{dir: dir, opts: opts, open: map[*Queue]struct{}{}, dirty: map[*segment]struct{}{}, dirtyDirs: map[string]struct{}{}}
	if dir == "" {
		s.fs, s.dir = newMemFS(), "/"
	} else {
		s.fs = osFS{}
		if err := s.fs.mkdirAll(dir); err != nil {
			return nil, fmt.Errorf("queueindex: %w", err)
		}
		if err := s.removeRebuilds(); err != nil {
			return nil, fmt.Errorf("queueindex: %w", err)
		}
	}
	return s, nil
}

// removeRebuilds deletes what rebuilds left when the node stopped under
// them (OpenRebuild): nothing reads it.
func (s *Store) removeRebuilds() error {
	topics, err := s.fs.list(s.dir)
	if err != nil {
		return err
	}
	for _, t := range topics {
		if !isTopicDir(t) {
			continue
		}
		names, err := s.fs.list(filepath.Join(s.dir, t))
		if err != nil {
			return err
		}
		for _, n := range names {
			if strings.HasSuffix(n, rebuildSuffix) {
				if err := s.fs.removeAll(filepath.Join(s.dir, t, n)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// TopicKey names one incarnation of a topic: a topic deleted and created
// again gets new directories, so nothing of the old one is ever read as the
// new one's.
type TopicKey struct {
	Name    string
	Created uint64 // log index of the command that created it (0: unknown)
}

// dirName is the topic's directory: the creating index and a hash of the
// name (names may hold characters no file name should).
func (k TopicKey) dirName() string {
	h := fnv.New64a()
	h.Write([]byte(k.Name))
	return fmt.Sprintf("%020d-%016x", k.Created, h.Sum64())
}

func (s *Store) topicDir(k TopicKey) string { return filepath.Join(s.dir, k.dirName()) }

// OpenTopic opens the queues of a topic as they are on disk; Queue.Truncate
// then cuts them to what the state machine holds.
func (s *Store) OpenTopic(k TopicKey, queues int) ([]*Queue, error) {
	out := make([]*Queue, queues)
	for i := range out {
		q, err := s.openQueue(filepath.Join(s.topicDir(k), strconv.Itoa(i)))
		if err != nil {
			for _, o := range out[:i] {
				o.close()
			}
			return nil, fmt.Errorf("queueindex: topic %q queue %d: %w", k.Name, i, err)
		}
		out[i] = q
	}
	return out, nil
}

// CreateTopic creates the empty queues of a new topic, removing whatever an
// earlier run left under its name (a log replayed without a snapshot
// writes it again).
func (s *Store) CreateTopic(k TopicKey, queues int) ([]*Queue, error) {
	if err := s.RemoveTopic(k, nil); err != nil {
		return nil, err
	}
	return s.OpenTopic(k, queues)
}

// RemoveTopic closes a topic's queues and deletes its directory.
func (s *Store) RemoveTopic(k TopicKey, queues []*Queue) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for _, q := range queues {
		q.closeLocked()
	}
	if err := s.fs.removeAll(s.topicDir(k)); err != nil {
		return fmt.Errorf("queueindex: remove topic %q: %w", k.Name, err)
	}
	s.markDirDirty(s.dir)
	return nil
}

// Prune deletes the directories of every topic not in live, closing every
// queue handed out that is not in keep.
func (s *Store) Prune(live []TopicKey, keep map[*Queue]bool) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for q := range s.open {
		if !keep[q] {
			q.closeLocked()
		}
	}
	want := map[string]bool{}
	for _, k := range live {
		want[k.dirName()] = true
	}
	names, err := s.fs.list(s.dir)
	if err != nil {
		return fmt.Errorf("queueindex: %w", err)
	}
	for _, n := range names {
		if !want[n] && isTopicDir(n) {
			if err := s.fs.removeAll(filepath.Join(s.dir, n)); err != nil {
				return fmt.Errorf("queueindex: %w", err)
			}
			s.markDirDirty(s.dir)
		}
	}
	return nil
}

func isTopicDir(name string) bool {
	created, hash, ok := strings.Cut(name, "-")
	return ok && len(created) == 20 && len(hash) == 16
}

// Flush writes every record buffered by any queue (no sync).
func (s *Store) Flush() error {
	for q := range s.open {
		if err := q.flush(); err != nil {
			return err
		}
	}
	return nil
}

// Sync makes every record written so far durable. It may run beside the
// writer (a snapshot persists while the state machine goes on applying):
// records appended meanwhile may or may not be synced too.
func (s *Store) Sync() error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	segs, dirs := s.dirty, s.dirtyDirs
	s.dirty, s.dirtyDirs = map[*segment]struct{}{}, map[string]struct{}{}
	var files []file
	for seg := range segs {
		for _, f := range []file{seg.f, seg.sf} {
			if f != nil {
				files = append(files, f)
			}
		}
	}
	s.mu.Unlock()
	// Only holders of syncMu close these files.
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("queueindex: sync: %w", err)
		}
	}
	for d := range dirs {
		// A directory removed since (a topic deleted, a rebuild dropped)
		// needs no sync: its parent's is.
		if err := s.fs.syncDir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("queueindex: sync %s: %w", d, err)
		}
	}
	// A sealed segment is not written again: its files close once synced.
	s.mu.Lock()
	defer s.mu.Unlock()
	for seg := range segs {
		if _, again := s.dirty[seg]; !again && seg.sealed {
			seg.closeFiles()
		}
	}
	return nil
}

// Close writes what is buffered and closes every file.
func (s *Store) Close() error {
	err := s.Flush()
	if serr := s.Sync(); err == nil {
		err = serr
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for q := range s.open {
		q.closeLocked()
	}
	return err
}

func (s *Store) markDirty(seg *segment) {
	s.mu.Lock()
	s.dirty[seg] = struct{}{}
	s.mu.Unlock()
}

func (s *Store) markDirDirty(dir string) {
	s.mu.Lock()
	s.dirtyDirs[dir] = struct{}{}
	s.mu.Unlock()
}
