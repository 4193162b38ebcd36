package store

import "github.com/hashicorp/raft"

// ApplyUnreplicated hands data to this node's state machine as if raft had
// committed it at index, bypassing raft. Fault tests use it to simulate an
// entry that rots in memory between raft and the state machine; nothing
// else may call it. It returns the state machine's error for the entry.
func (s *Store) ApplyUnreplicated(index uint64, data []byte) error {
	if err, ok := s.fsm.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(error); ok {
		return err
	}
	return nil
}
