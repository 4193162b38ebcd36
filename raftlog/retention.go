package raftlog

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// Segment is one raft-wal segment file: the index of its first entry and
// its size on disk (raft-wal preallocates whole segments).
type Segment struct {
	Base  uint64
	Bytes int64
}

// Segments lists the log's segment files, oldest first. A bolt log has no
// segments (nil): retention deletes whole segments and needs raft-wal.
func (s *Stores) Segments() ([]Segment, error) {
	if s.logDir == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(s.logDir)
	if err != nil {
		return nil, fmt.Errorf("list log segments: %w", err)
	}
	type seg struct {
		Segment
		id uint64
	}
	var segs []seg
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".wal") {
			continue
		}
		var sg seg
		if n, err := fmt.Sscanf(e.Name(), "%020d-%016x.wal", &sg.Base, &sg.id); n != 2 || err != nil {
			continue
		}
		if fi, err := e.Info(); err == nil {
			sg.Bytes = fi.Size()
		} else if errors.Is(err, os.ErrNotExist) {
			continue // deleted meanwhile
		}
		segs = append(segs, sg)
	}
	// IDs grow with every new segment, also across a reset of the base
	// index (raft installing a snapshot), so they give the order.
	sort.Slice(segs, func(i, j int) bool { return segs[i].id < segs[j].id })
	out := make([]Segment, len(segs))
	for i := range segs {
		out[i] = segs[i].Segment
	}
	return out, nil
}

// AppendedAt is when the leader appended entry idx (raft's timestamp on the
// entry; zero for entries raft did not stamp).
func (s *Stores) AppendedAt(idx uint64) (time.Time, error) {
	var l raft.Log
	if err := s.Log.GetLog(idx, &l); err != nil {
		return time.Time{}, fmt.Errorf("read index %d: %w", idx, err)
	}
	return l.AppendedAt, nil
}

// DeleteBelow makes idx the lowest index Read serves and deletes the log's
// entries below it; the last entry is never deleted (an empty log, as raft
// leaves it after installing a snapshot, only gets the floor). Raft must hold a
// snapshot covering idx-1 first: it sends that snapshot to a follower that
// needs a deleted entry.
func (s *Stores) DeleteBelow(idx uint64) error {
	last := s.LastIndex()
	if last != 0 && idx > last {
		return fmt.Errorf("delete the log below %d: it ends at %d", idx, last)
	}
	s.SetFloor(idx)
	if last == 0 { // emptied by raft installing a snapshot
		return nil
	}
	first, err := s.raw.FirstIndex()
	if err != nil {
		return fmt.Errorf("first index: %w", err)
	}
	if first == 0 || first >= idx {
		return nil
	}
	if err := s.Log.DeleteRange(first, idx-1); err != nil {
		return fmt.Errorf("delete log entries %d..%d: %w", first, idx-1, err)
	}
	return nil
}
