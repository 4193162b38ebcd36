package store

import (
	"context"
	"fmt"
)

// The broker keeps orderly-consumption locks as the leader's soft state; the
// only replicated fact about them is the last term in which a leader granted
// one. A new leader that finds an earlier such term knows that members may
// still consume under locks it never saw, and waits them out; one that finds
// none (a new group, or one that never consumed in order) grants at once.

// opLockTerm records that the leader of a term grants orderly locks.
const opLockTerm = "lock_term"

// EncodeLockTerm encodes a command that records term as one in which a
// leader granted orderly-consumption locks.
func EncodeLockTerm(term uint64) []byte {
	return encodeMeta(&metaCmd{Op: opLockTerm, Term: term})
}

func (f *FSM) applyLockTermLocked(c *metaCmd) interface{} {
	f.lockTerm = max(f.lockTerm, c.Term)
	return nil
}

// LockTerm is the last term in which a leader granted orderly locks (0:
// none ever did).
func (f *FSM) LockTerm() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.lockTerm
}

// MarkLockTerm replicates that this term's leader grants orderly locks.
func (s *Store) MarkLockTerm(ctx context.Context, term uint64) error {
	if err := s.applyMeta(ctx, EncodeLockTerm(term)); err != nil {
		return fmt.Errorf("record lock term %d: %w", term, err)
	}
	return nil
}

// LockTerm is the last term in which a leader granted orderly locks.
func (s *Store) LockTerm() uint64 { return s.fsm.LockTerm() }
