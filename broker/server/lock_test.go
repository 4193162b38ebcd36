package server_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
)

// TestSecondNodeOnADataDirectoryRefusesToStart: a second node started on a
// data directory that a running node holds gives up after LockTimeout,
// naming the holder, without binding its client port; before, it bound the
// port and waited forever on the stable store's lock. Once the holder
// stops, the directory can be used again.
func TestSecondNodeOnADataDirectoryRefusesToStart(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = freeAddr(t)
	cfg.Raft.ID = "n1"
	cfg.Raft.BindAddr = freeAddr(t)
	cfg.Raft.Peers = []election.Peer{{ID: "n1", Addr: cfg.Raft.BindAddr}}
	first, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Kill() })

	second := cfg
	second.Listen = freeAddr(t)
	second.Raft.BindAddr = freeAddr(t)
	second.Raft.Peers = []election.Peer{{ID: "n1", Addr: second.Raft.BindAddr}}
	second.LockTimeout = 300 * time.Millisecond
	start := time.Now()
	s, err := server.Start(second)
	if err == nil {
		s.Kill()
		t.Fatal("a second node started on a data directory in use")
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the refusal took %v", took)
	}
	want := fmt.Sprintf("data directory %s is in use by process %d (", cfg.DataDir, os.Getpid())
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("refusal %q does not say %q", err, want)
	}
	l, lerr := net.Listen("tcp", second.Listen)
	if lerr != nil {
		t.Fatalf("the refused node left its client port bound: %v", lerr)
	}
	l.Close()

	first.Kill()
	s, err = server.Start(second)
	if err != nil {
		t.Fatalf("start after the holder stopped: %v", err)
	}
	s.Kill()
}
