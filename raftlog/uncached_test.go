package raftlog

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// TestReadUncached: it reads and checks entries as Read does, and leaves
// the read cache as it was.
func TestReadUncached(t *testing.T) {
	s, err := Open(t.TempDir(), Options{Kind: KindBolt})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	good := EncodeBatch(&Request{Topic: "t", Messages: []Message{{Body: []byte("hello")}}})
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0x40
	if err := s.Log.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: good},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: bad}}); err != nil {
		t.Fatal(err)
	}
	if data, err := s.ReadUncached(1); err != nil || string(data.Data) != string(good) {
		t.Fatalf("good entry: %v", err)
	}
	if _, ok := s.reads.get(1); ok {
		t.Error("ReadUncached filled the read cache")
	}
	if _, err := s.ReadUncached(2); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a batch with a flipped byte: %v, want ErrCorrupt", err)
	}
	if _, err := s.ReadUncached(9); !errors.Is(err, ErrBelowFloor) {
		t.Errorf("an index the log does not hold: %v, want ErrBelowFloor", err)
	}
}
