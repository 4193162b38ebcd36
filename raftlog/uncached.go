package raftlog

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// ReadUncached is Read for a reader that passes over every entry once (the
// key index): it neither takes from nor fills the read cache, so it does not
// evict what consumers read and does not keep a later damage on disk from
// being seen. The entry is checked as Read checks it.
func (s *Stores) ReadUncached(idx uint64) ([]byte, error) {
	if idx < s.floor.Load() {
		return nil, fmt.Errorf("read index %d: %w (floor %d)", idx, ErrBelowFloor, s.floor.Load())
	}
	var l raft.Log
	if err := s.Log.GetLog(idx, &l); err != nil {
		if errors.Is(err, raft.ErrLogNotFound) {
			return nil, fmt.Errorf("read index %d: %w", idx, ErrBelowFloor)
		}
		return nil, fmt.Errorf("read index %d: %w", idx, err)
	}
	if len(l.Data) > 0 && CommandType(l.Data[0]) == CmdBatch {
		if _, err := ParseBatch(l.Data); err != nil {
			err = fmt.Errorf("read index %d: %w", idx, err)
			s.guard.damage.report(idx, err)
			return nil, err
		}
	}
	return l.Data, nil
}
