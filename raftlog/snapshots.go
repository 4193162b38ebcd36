package raftlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// ErrDamagedSnapshot is returned by CheckSnapshots when a damaged snapshot
// holds state that no older snapshot and the log hold together.
var ErrDamagedSnapshot = errors.New("damaged snapshot")

// SnapshotState is one snapshot of the snapshot store as CheckSnapshots
// found it.
type SnapshotState struct {
	ID          string // its directory name: term-index-time
	Term, Index uint64 // the last log entry it covers
	Err         error  // why it is unusable; nil when raft can restore it
	MovedTo     string // where CheckSnapshots moved it aside ("": not moved)
}

// CheckSnapshots checks every snapshot in the snapshot store before raft
// opens it: its metadata, raft's CRC64 of its state, and checkState (when
// not nil: the FSM's own checks of the state, as its Restore makes them).
// Raft restores the newest snapshot it can and then replays the log from the
// entry after it, so a damaged snapshot is only harmless when the newest
// usable older snapshot (or none, from index 1) and the log together hold
// everything the damaged one summarised: the log starts no later than the
// entry after that older snapshot and ends no earlier than the damaged
// snapshot's index. Then CheckSnapshots moves every damaged snapshot aside
// into dir/damaged/ (never deleting one) and reports them with MovedTo set.
// Otherwise it moves nothing and returns an ErrDamagedSnapshot error naming
// the snapshot, or an ErrLostEntries error when the log does not continue
// from the newest snapshot (raft would fail to read the entries between).
// The states are returned newest first, in the order raft tries them.
func (s *Stores) CheckSnapshots(checkState func(io.Reader) error) ([]SnapshotState, error) {
	snaps, err := s.checkSnapshotFiles(checkState)
	if err != nil {
		return nil, err
	}
	first, err := s.raw.FirstIndex()
	if err != nil {
		return snaps, fmt.Errorf("check snapshots: first log index: %w", err)
	}
	last, err := s.raw.LastIndex()
	if err != nil {
		return snaps, fmt.Errorf("check snapshots: last log index: %w", err)
	}
	var restore *SnapshotState // what raft restores once the damaged ones are gone
	for i := range snaps {
		if snaps[i].Err == nil {
			restore = &snaps[i]
			break
		}
	}
	from, name := uint64(0), "no snapshot (the log from index 1)"
	if restore != nil {
		from, name = restore.Index, "snapshot "+restore.ID
	}
	var newest *SnapshotState // the newest damaged snapshot beyond what raft restores
	for i := range snaps {
		if snaps[i].Err != nil && snaps[i].Index > from && (newest == nil || snaps[i].Index > newest.Index) {
			newest = &snaps[i]
		}
	}
	held := fmt.Sprintf("the log holds %d..%d", first, last)
	if first == 0 {
		held = "the log is empty"
	}
	switch {
	case newest != nil && (first == 0 || first > from+1 || last < newest.Index):
		return snaps, fmt.Errorf("%w: snapshot %s (up to log index %d) in %s: %w; what is left to restore from is %s and %s, which do not hold everything the damaged snapshot summarised",
			ErrDamagedSnapshot, newest.ID, newest.Index, s.snapDir, newest.Err, name, held)
	case newest == nil && first > from+1:
		return snaps, fmt.Errorf("%w: %s, but raft would restore %s and then need log entries %d..%d, which are in neither",
			ErrLostEntries, held, name, from+1, first-1)
	}
	for i := range snaps {
		if snaps[i].Err == nil {
			continue
		}
		if snaps[i].MovedTo, err = s.moveAside(snaps[i].ID); err != nil {
			return snaps, err
		}
	}
	return snaps, nil
}

// checkSnapshotFiles checks every snapshot directory, newest first.
func (s *Stores) checkSnapshotFiles(checkState func(io.Reader) error) ([]SnapshotState, error) {
	ents, err := os.ReadDir(s.snapDir)
	if err != nil {
		return nil, fmt.Errorf("check snapshots: %w", err)
	}
	// A store of its own that logs nothing: raft's would log a damaged
	// snapshot at ERROR, also one that the node then moves aside and starts
	// without. The caller reports what was found.
	quiet, err := raft.NewFileSnapshotStoreWithLogger(filepath.Dir(s.snapDir), 1, hclog.NewNullLogger())
	if err != nil {
		return nil, fmt.Errorf("check snapshots: %w", err)
	}
	var snaps []SnapshotState
	for _, e := range ents {
		// raft's own listing skips files and unfinished snapshots too.
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		sn := SnapshotState{ID: e.Name()}
		var msec uint64
		named := false
		if n, err := fmt.Sscanf(sn.ID, "%d-%d-%d", &sn.Term, &sn.Index, &msec); n == 3 && err == nil {
			named = true
		}
		meta, err := checkSnapshot(quiet, sn.ID, checkState)
		switch {
		case err != nil && !named:
			// Neither a name nor metadata says what it covered: it is
			// not raft's (raft lists only directories with metadata).
			continue
		case err != nil:
			sn.Err = err
		case named && (meta.Term != sn.Term || meta.Index != sn.Index):
			sn.Err = fmt.Errorf("its metadata says term %d index %d, its name term %d index %d", meta.Term, meta.Index, sn.Term, sn.Index)
		default:
			sn.Term, sn.Index = meta.Term, meta.Index
		}
		snaps = append(snaps, sn)
	}
	// raft's order (FileSnapshotStore.List): newest term, then index, then id.
	sort.Slice(snaps, func(i, j int) bool {
		a, b := snaps[i], snaps[j]
		if a.Term != b.Term {
			return a.Term > b.Term
		}
		if a.Index != b.Index {
			return a.Index > b.Index
		}
		return a.ID > b.ID
	})
	return snaps, nil
}

// checkSnapshot opens one snapshot as raft does (metadata, CRC64) and reads
// its state through checkState.
func checkSnapshot(snaps raft.SnapshotStore, id string, checkState func(io.Reader) error) (*raft.SnapshotMeta, error) {
	meta, rc, err := snaps.Open(id)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer rc.Close()
	if meta.Version < raft.SnapshotVersionMin || meta.Version > raft.SnapshotVersionMax {
		return nil, fmt.Errorf("snapshot version %d, want %d..%d", meta.Version, raft.SnapshotVersionMin, raft.SnapshotVersionMax)
	}
	if checkState != nil {
		if err := checkState(rc); err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
	}
	return meta, nil
}

// moveAside renames the snapshot directory id into dir/damaged/ and syncs
// both directories.
func (s *Stores) moveAside(id string) (string, error) {
	damaged := filepath.Join(s.dir, "damaged")
	if err := os.MkdirAll(damaged, 0o755); err != nil {
		return "", fmt.Errorf("move damaged snapshot %s aside: %w", id, err)
	}
	to := filepath.Join(damaged, "snapshot-"+id)
	for n := 1; ; n++ {
		if _, err := os.Lstat(to); errors.Is(err, os.ErrNotExist) {
			break
		}
		to = filepath.Join(damaged, fmt.Sprintf("snapshot-%s.%d", id, n))
	}
	if err := os.Rename(filepath.Join(s.snapDir, id), to); err != nil {
		return "", fmt.Errorf("move damaged snapshot %s aside: %w", id, err)
	}
	for _, d := range []string{s.snapDir, damaged} {
		if err := fsyncPath(d); err != nil {
			return to, fmt.Errorf("move damaged snapshot %s aside: %w", id, err)
		}
	}
	return to, nil
}

// fsyncPath fsyncs the file or directory at path.
func fsyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
