package server_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
)

// TestOldLogDamageFoundInTheBackground (issue 19): start-up checks only the
// log after the snapshot it restores (and what could be torn), so a node
// whose log is damaged in an older part starts, and is then marked damaged
// (serving nothing, as when a read meets the damage) once the background
// check reaches the entry. --verify-log sync still refuses to start, and a
// damaged entry in the range start-up replays still refuses in the default
// mode, both with the repair steps.
func TestOldLogDamageFoundInTheBackground(t *testing.T) {
	cfg, logs := singleNode(t)
	cfg.SegmentMB = 1 // entries soon sit in sealed segments
	cfg.HTTP = freeAddr(t)
	cfg.VerifyLogMBps = 1 // about 1.2 s to reach the damaged entry
	s, err := server.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s != nil {
			s.Kill()
		}
	})
	ctx := ctxT(t, 3*time.Minute)
	waitFor(t, 30*time.Second, "a leader that takes writes", func() bool {
		_, err := s.Broker().CreateTopic(ctx, "t", 1, false)
		return err == nil
	})
	pad := strings.Repeat("p", 8<<10)
	body := func(kind string, i int) string { return fmt.Sprintf("%s-%05d-%s", kind, i, pad) }
	const old, late = 300, 150 // 2.4 MB before the snapshot, 1.2 MB after it
	// The key index reads every entry once to index it, and would find
	// the damage first if it read the old entries again after the
	// restart (before keyindex recorded how far it got in a log without
	// keys, it did, from index 1 at every start). Keys make it index.
	send := func(kind string, i int) {
		t.Helper()
		if _, err := s.Broker().Produce(ctx, broker.ProduceRequest{Topic: "t", Messages: []broker.ProduceMessage{
			{Key: fmt.Sprintf("%s-%d", kind, i), Body: []byte(body(kind, i)), Queue: 0, HasQueue: true}}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < old; i++ {
		send("old", i)
	}
	if _, err := s.Node().Snapshot(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < late; i++ {
		send("late", i)
	}
	logIndex := func(offset uint64) uint64 {
		t.Helper()
		locs, _, err := s.Store().Locate("t", 0, offset, 1)
		if err != nil || len(locs) == 0 {
			t.Fatalf("locate offset %d: %v", offset, err)
		}
		return locs[0].LogIndex
	}
	const badOld, badLate = 150, 5
	oldIdx, lateIdx, snap := logIndex(badOld), logIndex(old+badLate), s.Node().LastSnapshotIndex()
	if oldIdx >= snap || lateIdx <= snap {
		t.Fatalf("entries %d and %d around snapshot %d: want one before and one after it", oldIdx, lateIdx, snap)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = nil
	flipSealedBody(t, cfg.DataDir, fmt.Sprintf("old-%05d-", badOld))

	// The whole log before start: refused, naming the entry.
	sync := cfg
	sync.VerifyLog = server.VerifySync
	if n, err := server.Start(sync); err == nil {
		n.Kill()
		t.Fatal("a node with a damaged log started with --verify-log sync")
	} else if want := fmt.Sprintf("log index %d", oldIdx); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "member remove n1 --force") {
		t.Fatalf("sync start of the damaged node: %v\nwant it to name %q and the repair steps", err, want)
	}

	// The default: it starts, and the background check finds the entry.
	started := time.Now()
	if s, err = server.Start(cfg); err != nil {
		t.Fatalf("a node whose damage is below its snapshot did not start: %v", err)
	}
	if d, ok := s.Broker().Damaged(); ok {
		t.Fatalf("damaged right after start, before the background check could reach the entry: %+v", d)
	}
	if p, ok := s.RaftLog().BackgroundProgress(); !ok || p.From > oldIdx || p.To < oldIdx {
		t.Fatalf("background check %+v (started %v): want it to cover entry %d", p, ok, oldIdx)
	}
	waitFor(t, 30*time.Second, "the restarted node to lead", func() bool { return s.Node().Ready() })
	if _, ok := s.Broker().Damaged(); !ok { // still ahead of the damaged entry: it serves
		if r, err := s.Broker().Pull(ctx, broker.PullRequest{Topic: "t", Queue: 0, Offset: 0, MaxMessages: 1}); err != nil || len(r.Messages) != 1 {
			t.Fatalf("pull before the check reached the damage: %+v, %v", r, err)
		}
	}
	waitFor(t, 90*time.Second, "the background check to mark the node damaged", func() bool {
		_, ok := s.Broker().Damaged()
		return ok
	})
	t.Logf("marked damaged %s after start", time.Since(started).Round(time.Millisecond))
	if d, _ := s.Broker().Damaged(); d.Index != oldIdx || d.Source != "log" {
		t.Errorf("damage %+v, want log index %d found in the log", d, oldIdx)
	}
	if p, _ := s.RaftLog().BackgroundProgress(); !p.Done || p.Damaged != oldIdx {
		t.Errorf("background progress %+v, want done at the damaged entry %d", p, oldIdx)
	}
	if !strings.Contains(logs.String(), "background log check found a damaged entry") {
		t.Error("no log line says the background check found the damage")
	}
	// It serves nothing now, from an intact entry either.
	for _, off := range []uint64{0, old + late - 1} {
		r, err := s.Broker().Pull(ctx, broker.PullRequest{Topic: "t", Queue: 0, Offset: off, MaxMessages: 1})
		if err == nil && len(r.Messages) > 0 {
			t.Errorf("the damaged node served offset %d", off)
		} else if err != nil && !errors.Is(err, broker.ErrUnavailable) {
			t.Errorf("pull of offset %d on the damaged node: %v, want a suggestion or ErrUnavailable", off, err)
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + cfg.HTTP + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "damaged") {
		t.Errorf("/readyz of the damaged node: %d %q", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{"\nraftmq_damaged 1\n", "\nraftmq_log_verify_done 1\n", "\nraftmq_log_verify_progress 1\n", "\nraftmq_log_verify_entries_total "} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", strings.TrimSpace(want))
		}
	}
	if err := s.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	s = nil

	// Damage after the snapshot, in what start-up replays: refused.
	flipSealedBody(t, cfg.DataDir, fmt.Sprintf("late-%05d-", badLate))
	if n, err := server.Start(cfg); err == nil {
		n.Kill()
		t.Fatal("a node whose log is damaged after its snapshot started")
	} else if want := fmt.Sprintf("log index %d", lateIdx); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "member remove n1 --force") {
		t.Fatalf("start with damage in the replayed range: %v\nwant it to name %q and the repair steps", err, want)
	}
}
