package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
)

// logBuffer keeps what a node logs, for tests that look for a line.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// singleNode is the config of a one-node group in a temp dir whose log
// goes to t.Log and to the returned buffer.
func singleNode(t *testing.T) (server.Config, *logBuffer) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = freeAddr(t)
	cfg.Raft.ID = "n1"
	cfg.Raft.BindAddr = freeAddr(t)
	cfg.Raft.Peers = []election.Peer{{ID: "n1", Addr: cfg.Raft.BindAddr}}
	cfg.Broker.StatePeriod = 50 * time.Millisecond
	logs := &logBuffer{}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "n1", Level: hclog.Info, Output: io.MultiWriter(testWriter{t}, logs)})
	return cfg, logs
}

// snapshotIndexes lists the snapshots in dataDir as directory name by the
// index it covers.
func snapshotIndexes(t *testing.T, dataDir string) map[uint64]string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dataDir, "snapshots", "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]string{}
	for _, e := range ents {
		var term, idx, ms uint64
		if n, _ := fmt.Sscanf(e.Name(), "%d-%d-%d", &term, &idx, &ms); n == 3 && e.IsDir() && !strings.HasSuffix(e.Name(), ".tmp") {
			out[idx] = e.Name()
		}
	}
	return out
}

func sortedIndexes(m map[uint64]string) []uint64 {
	var out []uint64
	for i := range m {
		out = append(out, i)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// damageSnapshot flips a byte in the middle of a snapshot's state, as the
// fault suite's corrupt-snapshot does.
func damageSnapshot(t *testing.T, dataDir, id string) {
	t.Helper()
	p := filepath.Join(dataDir, "snapshots", "snapshots", id, "state.bin")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// sendBodies produces one message per body to queue 0 of topic.
func sendBodies(t *testing.T, ctx context.Context, s *server.Server, topic string, bodies []string) {
	t.Helper()
	for _, body := range bodies {
		if _, err := s.Broker().Produce(ctx, broker.ProduceRequest{Topic: topic,
			Messages: []broker.ProduceMessage{{Body: []byte(body), Queue: 0, HasQueue: true}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDamagedNewestSnapshotFallsBackWhenLogCovers reproduces "a node whose
// newest snapshot is damaged refuses to start with raft's 'failed to load
// any existing snapshots', without repair steps; a damaged older snapshot
// goes unnoticed": without retention the log still starts at index 1, so an
// older snapshot (or none) and the log hold everything a damaged snapshot
// summarised. The node moves the damaged snapshot into DATA/damaged/, says
// so at WARN, starts, and serves every message at its offset.
func TestDamagedNewestSnapshotFallsBackWhenLogCovers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(idx []uint64) []uint64 // which snapshots (by ascending index) to damage
	}{
		{"newest", func(idx []uint64) []uint64 { return idx[len(idx)-1:] }},
		{"older", func(idx []uint64) []uint64 { return idx[:1] }},
		{"all, log from index 1", func(idx []uint64) []uint64 { return idx }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, logs := singleNode(t)
			s, err := server.Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if s != nil {
					s.Kill()
				}
			})
			ctx := ctxT(t, 90*time.Second)
			waitFor(t, 30*time.Second, "a leader that takes writes", func() bool {
				_, err := s.Broker().CreateTopic(ctx, "t", 1, false)
				return err == nil
			})
			var want []string
			for round := 0; round < 3; round++ {
				var bodies []string
				for i := 0; i < 20; i++ {
					bodies = append(bodies, fmt.Sprintf("round %d message %d", round, i))
				}
				sendBodies(t, ctx, s, "t", bodies)
				want = append(want, bodies...)
				if round < 2 {
					if _, err := s.Node().Snapshot(); err != nil {
						t.Fatal(err)
					}
				}
			}
			s.Kill()
			snaps := snapshotIndexes(t, cfg.DataDir)
			idx := sortedIndexes(snaps)
			if len(idx) != 2 {
				t.Fatalf("snapshots %v, want 2", snaps)
			}
			damaged := tc.damage(idx)
			for _, i := range damaged {
				damageSnapshot(t, cfg.DataDir, snaps[i])
			}

			s, err = server.Start(cfg)
			if err != nil {
				t.Fatalf("a node whose damaged snapshots its log covers did not start: %v", err)
			}
			left := snapshotIndexes(t, cfg.DataDir)
			for _, i := range damaged {
				if _, ok := left[i]; ok {
					t.Errorf("damaged snapshot %s is still in the snapshot store", snaps[i])
				}
				if _, err := os.Stat(filepath.Join(cfg.DataDir, "damaged", "snapshot-"+snaps[i], "state.bin")); err != nil {
					t.Errorf("damaged snapshot not kept in DATA/damaged: %v", err)
				}
				line := ""
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l, "damaged snapshot moved aside") && strings.Contains(l, snaps[i]) {
						line = l
					}
				}
				if !strings.Contains(line, "[WARN]") {
					t.Errorf("no WARN line names damaged snapshot %s", snaps[i])
				}
			}
			if len(left) != len(idx)-len(damaged) {
				t.Errorf("snapshots left %v", left)
			}
			var got []string
			waitFor(t, 30*time.Second, "every message served again", func() bool {
				got = got[:0]
				r, err := s.Broker().Pull(ctx, broker.PullRequest{Topic: "t", Queue: 0, MaxMessages: 100})
				if err != nil {
					return false
				}
				for i, m := range r.Messages {
					if m.Offset != uint64(i) {
						return false
					}
					got = append(got, string(m.Body))
				}
				return len(got) == len(want)
			})
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Fatalf("served %q, want %q", got, want)
			}
			// It keeps working, and a new snapshot replaces what was moved.
			sendBodies(t, ctx, s, "t", []string{"after"})
			if _, err := s.Node().Snapshot(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDamagedSnapshotWithRetentionGapRefuses reproduces "with retention, a
// node whose newest snapshot is damaged crashes at start with 'panic: log
// not found'": retention deleted the log below the newest snapshot, so
// raft, falling back to the older one, replayed entries that are gone. The
// node now refuses to start, naming the damaged snapshot, with the numbered
// repair steps, and moves nothing.
func TestDamagedSnapshotWithRetentionGapRefuses(t *testing.T) {
	cfg, _ := singleNode(t)
	cfg.SegmentMB = 1
	cfg.Broker.RetentionBytes = 2 << 20
	cfg.Broker.RetentionCheck = 50 * time.Millisecond
	s, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := s
	t.Cleanup(func() { first.Kill() })
	ctx := ctxT(t, 120*time.Second)
	waitFor(t, 30*time.Second, "a leader that takes writes", func() bool {
		_, err := s.Broker().CreateTopic(ctx, "t", 1, false)
		return err == nil
	})
	body := strings.Repeat("r", 4000)
	// Two retention cuts, each with its snapshot: the log then starts past
	// the entry after the older snapshot.
	var snaps map[uint64]string
	var idx []uint64
	deadline := time.Now().Add(90 * time.Second)
	for {
		bodies := make([]string, 200)
		for i := range bodies {
			bodies[i] = body
		}
		sendBodies(t, ctx, s, "t", bodies)
		snaps = snapshotIndexes(t, cfg.DataDir)
		idx = sortedIndexes(snaps)
		if logFrom := s.RaftLog().FirstIndex(); len(idx) >= 2 && logFrom > idx[len(idx)-2]+1 {
			// A snapshot may complete between the look and the kill: look
			// again at what the stopped node left (its log only shrinks).
			s.Kill()
			snaps = snapshotIndexes(t, cfg.DataDir)
			idx = sortedIndexes(snaps)
			if logFrom > idx[len(idx)-2]+1 {
				break
			}
			if s, err = server.Start(cfg); err != nil {
				t.Fatal(err)
			}
			first = s
			waitFor(t, 30*time.Second, "the restarted node to lead", func() bool {
				_, err := s.Broker().ListTopics(ctx)
				return err == nil
			})
		}
		if time.Now().After(deadline) {
			t.Fatalf("no retention gap: snapshots %v, log from %d", idx, s.RaftLog().FirstIndex())
		}
	}
	newest := snaps[idx[len(idx)-1]]
	damageSnapshot(t, cfg.DataDir, newest)

	s, err = server.Start(cfg) // a panic here fails the whole test binary
	if err == nil {
		s.Kill()
		t.Fatal("a node whose damaged snapshot its log does not cover started")
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"damaged snapshot", newest, "data directory " + cfg.DataDir + " is damaged",
		"1. keep this node stopped", "raftmq member remove n1 --force", "mv " + cfg.DataDir, "and --join",
		"5. raftmq member add n1@" + cfg.Raft.BindAddr} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not say %q:\n%s", want, msg)
		}
	}
	if _, ok := snapshotIndexes(t, cfg.DataDir)[idx[len(idx)-1]]; !ok {
		t.Error("a refusing node moved its damaged snapshot")
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "damaged")); err == nil {
		t.Error("a refusing node moved something into DATA/damaged")
	}
}
