package store

import (
	"context"
	"fmt"
)

// A group's id is a random name its first ready leader writes into the log
// once: every node of the group holds the same, from the log or from a
// snapshot, and keeps it for the group's life. Clients learn it from the
// first node they reach and name it in every call, so that a node of
// another group at an address they knew refuses their calls instead of
// storing their messages.

// opSetGroupID sets the group's id unless it has one.
const opSetGroupID = "set_group_id"

// MaxGroupIDLen bounds a group id.
const MaxGroupIDLen = 64

// EncodeSetGroupID encodes a command that gives the group id id unless it
// has one already: the first such command applied wins on every node.
func EncodeSetGroupID(id string) []byte {
	return encodeMeta(&metaCmd{Op: opSetGroupID, GroupID: id})
}

func (f *FSM) applySetGroupIDLocked(c *metaCmd) interface{} {
	if c.GroupID == "" || len(c.GroupID) > MaxGroupIDLen {
		return fmt.Errorf("group id %q: want 1 to %d characters", c.GroupID, MaxGroupIDLen)
	}
	if f.GroupID() == "" {
		f.setGroupIDLocked(c.GroupID)
	}
	return nil
}

func (f *FSM) setGroupIDLocked(id string) {
	if id == "" {
		f.groupID.Store(nil)
		return
	}
	f.groupID.Store(&id)
}

// GroupID is the group's id ("" until its first leader set one). It takes
// no lock.
func (f *FSM) GroupID() string {
	if p := f.groupID.Load(); p != nil {
		return *p
	}
	return ""
}

// SetGroupID replicates id as the group's id; a group that has one keeps
// it (GroupID then tells which).
func (s *Store) SetGroupID(ctx context.Context, id string) error {
	if err := s.applyMeta(ctx, EncodeSetGroupID(id)); err != nil {
		return fmt.Errorf("set the group id: %w", err)
	}
	return nil
}

// GroupID is the group's id as this node applied it ("" until set).
func (s *Store) GroupID() string { return s.fsm.GroupID() }
