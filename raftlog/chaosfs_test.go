package raftlog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The lazy file system keeps writes in memory until a sync (reads see
// them), so a process killed before its fsync loses them; the delay file
// slows every sync.
func TestChaosLazyFSLosesUnsyncedWrites(t *testing.T) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	os.MkdirAll(logDir, 0o755)
	t.Setenv(chaosFSEnv, "1")
	vfs := chaosVFS(logDir)
	if vfs == nil {
		t.Fatal("no lazy file system with the variable set")
	}
	f, err := vfs.Create(logDir, "seg", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("hello"), 10); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := f.ReadAt(buf, 8); err != nil || string(buf[2:7]) != "hello" {
		t.Fatalf("read through pending writes: %q %v", buf, err)
	}
	onDisk, _ := os.ReadFile(filepath.Join(logDir, "seg"))
	if string(onDisk[10:15]) == "hello" {
		t.Fatal("an unsynced write reached the file")
	}
	if err := os.WriteFile(filepath.Join(dir, chaosDelayFile), []byte("150ms"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond) // the delay is reread every 100 ms
	start := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("sync took %s with a 150ms delay", took)
	}
	onDisk, _ = os.ReadFile(filepath.Join(logDir, "seg"))
	if string(onDisk[10:15]) != "hello" {
		t.Fatal("a synced write is not in the file")
	}
	t.Setenv(chaosFSEnv, "")
	if chaosVFS(logDir) != nil {
		t.Fatal("lazy file system without the variable")
	}
}

// A store on the lazy file system works like any other.
func TestChaosLazyFSStoreRoundTrip(t *testing.T) {
	t.Setenv(chaosFSEnv, "1")
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := EncodeBatch(&Request{ProducerID: "p", Seq: 1, Topic: "t", Messages: []Message{{Body: []byte("b")}}})
	if err := s.Log.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: data}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Setenv(chaosFSEnv, "")
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Read(1); err != nil || string(got.Data) != string(data) {
		t.Fatalf("entry after reopen: %v", err)
	}
}

// In quorum-memory under the lazy file system, a write reaches the file
// only when the durability syncer fsyncs it: raft-wal's own Sync (which
// returns at once) must not flush the lazy file's pending writes, or a
// SIGKILL in the fault suite would lose less than a machine crash does.
func TestChaosLazyFSUnderQuorumMemory(t *testing.T) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	os.MkdirAll(logDir, 0o755)
	t.Setenv(chaosFSEnv, "1")
	d := DurabilityConfig{Mode: QuorumMemory, SyncInterval: 300 * time.Millisecond, SyncBytes: 1 << 20}
	vfs, _, sy := logFiles(logDir, d, nil)
	if sy == nil {
		t.Fatal("no syncer in quorum-memory")
	}
	defer sy.Close()
	sv, ok := vfs.(*syncVFS)
	if !ok {
		t.Fatalf("log file system is %T, want the durability wrapper", vfs)
	}
	if _, ok := sv.VFS.(*lazyFS); !ok {
		t.Fatalf("durability wrapper over %T, want the lazy file system", sv.VFS)
	}
	f, err := vfs.Create(logDir, "seg", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inFile := func() bool {
		b, _ := os.ReadFile(filepath.Join(logDir, "seg"))
		return len(b) >= 15 && string(b[10:15]) == "hello"
	}
	start := time.Now()
	if _, err := f.WriteAt([]byte("hello"), 10); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := f.ReadAt(buf, 10); err != nil || string(buf) != "hello" {
		t.Fatalf("read through pending writes: %q %v", buf, err)
	}
	if inFile() {
		t.Fatal("raft-wal's Sync flushed the lazy file: the write reached the file before the syncer's fsync")
	}
	if err := sy.Wait(); err != nil {
		t.Fatal(err)
	}
	if !inFile() {
		t.Fatal("the syncer's fsync did not reach the lazy file")
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Fatalf("written to the file %s after the write, before the 300ms sync interval", took)
	}

	// The slow-disk delay holds back the syncer's fsync as well.
	if err := os.WriteFile(filepath.Join(dir, chaosDelayFile), []byte("200ms"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(120 * time.Millisecond) // the delay is reread every 100 ms
	if _, err := f.WriteAt([]byte("world"), 20); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := sy.Flush(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("the syncer's fsync took %s with a 200ms delay", took)
	}
	if b, _ := os.ReadFile(filepath.Join(logDir, "seg")); string(b[20:25]) != "world" {
		t.Fatal("a flushed write is not in the file")
	}
}

// A read that races the fsync moving a pending write into the file still
// sees the write: the lazy file reads the file and its pending writes as
// one.
func TestChaosLazyFSReadDuringSync(t *testing.T) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	os.MkdirAll(logDir, 0o755)
	t.Setenv(chaosFSEnv, "1")
	vfs := chaosVFS(logDir)
	f, err := vfs.Create(logDir, "seg", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := []byte("0123456789abcdef")
	buf := make([]byte, len(want))
	for i := 0; i < 2000; i++ {
		off := int64(i * len(want))
		if _, err := f.WriteAt(want, off); err != nil {
			t.Fatal(err)
		}
		synced := make(chan error)
		go func() { synced <- f.Sync() }()
		for done := false; !done; {
			select {
			case err := <-synced:
				if err != nil {
					t.Fatal(err)
				}
				done = true
			default:
			}
			if _, err := f.ReadAt(buf, off); err != nil {
				t.Fatal(err)
			}
			if string(buf) != string(want) {
				t.Fatalf("write %d read back as %q while it was being synced", i, buf)
			}
		}
	}
}
