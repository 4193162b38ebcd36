package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
)

// TestRecoverAsNewGroupRefusesNothingToRecover: a node told to recover as a
// new group refuses to start on a missing or empty data directory, and on
// one that holds no log, and leaves a missing or empty one as it was.
func TestRecoverAsNewGroupRefusesNothingToRecover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(dir string) string
	}{
		{"missing", func(dir string) string { return filepath.Join(dir, "none") }},
		{"empty", func(dir string) string { return dir }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := singleNode(t)
			cfg.Raft.Peers = nil
			cfg.Raft.NewGroup = true
			cfg.DataDir = tc.setup(t.TempDir())
			s, err := server.Start(cfg)
			if err == nil {
				s.Kill()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), "holds nothing to recover") {
				t.Errorf("error %q does not say there is nothing to recover", err)
			}
			if ents, _ := os.ReadDir(cfg.DataDir); len(ents) != 0 {
				t.Errorf("the refused start left %d files in %s", len(ents), cfg.DataDir)
			}
		})
	}
	t.Run("no log", func(t *testing.T) {
		cfg, _ := singleNode(t)
		cfg.Raft.Peers = nil
		cfg.Raft.NewGroup = true
		if err := os.WriteFile(filepath.Join(cfg.DataDir, "NODE_ID"), []byte("n1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := server.Start(cfg)
		if err == nil {
			s.Kill()
			t.Fatal("started")
		}
		if !errors.Is(err, election.ErrNothingToRecover) {
			t.Errorf("error %v, want ErrNothingToRecover", err)
		}
	})
}
