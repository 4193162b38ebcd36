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
	if got, err := s.Read(1); err != nil || string(got) != string(data) {
		t.Fatalf("entry after reopen: %v", err)
	}
}
