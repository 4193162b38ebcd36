package election

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// testFSM is the state machine of this package's tests: it remembers the
// commands it applied and the index of the last entry.
type testFSM struct {
	mu      sync.Mutex
	applied uint64
	cmds    map[string]bool
	closed  bool
}

var _ StateMachine = (*testFSM)(nil)

func newTestFSM() *testFSM { return &testFSM{cmds: map[string]bool{}} }

func (f *testFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.Type == raft.LogCommand {
		f.cmds[string(l.Data)] = true
	}
	f.applied = l.Index
	return nil
}

// Applied is the index of the last entry applied.
func (f *testFSM) Applied() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// Has reports whether cmd was applied.
func (f *testFSM) Has(cmd string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cmds[cmd]
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(f.cmds)
	return testSnapshot(b), err
}

func (f *testFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	cmds := map[string]bool{}
	if err := json.NewDecoder(rc).Decode(&cmds); err != nil {
		return err
	}
	f.mu.Lock()
	f.cmds = cmds
	f.mu.Unlock()
	return nil
}

func (f *testFSM) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}

type testSnapshot []byte

func (s testSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (testSnapshot) Release() {}
