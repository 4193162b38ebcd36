package raftlog

import "fmt"

// ReadUncached is Read for a reader that passes over every entry once (the
// key index): it neither takes from nor fills the read cache, so it does not
// evict what consumers read and does not keep a later damage on disk from
// being seen. The entry is checked as Read checks it.
func (s *Stores) ReadUncached(idx uint64) (Entry, error) {
	if idx < s.floor.Load() {
		return Entry{}, fmt.Errorf("read index %d: %w (floor %d)", idx, ErrBelowFloor, s.floor.Load())
	}
	return s.readChecked(idx)
}
