package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/store/queueindex"
)

// TestFollowerIndexDamageIsRebuiltUnderLoad damages a record of a running
// follower's queue index while producers write to the group. The follower
// never serves a message at an offset other than the one acknowledged for
// it: meanwhile it sends pulls of the queue elsewhere; it rebuilds the
// queue's index from its own log and then serves every offset itself.
func TestFollowerIndexDamageIsRebuiltUnderLoad(t *testing.T) {
	t.Run("record", func(t *testing.T) { followerIndexDamage(t, false) })
	// A file deleted under the node is found by the periodic check of the
	// files' sizes (reads of it go on through the open file meanwhile).
	t.Run("file deleted", func(t *testing.T) { followerIndexDamage(t, true) })
}

func followerIndexDamage(t *testing.T, remove bool) {
	c := newCluster(t, 3, nil)
	ctx := ctxT(t, 3*time.Minute)
	if _, err := c.Node(c.Leader()).Broker().CreateTopic(ctx, "t", 2, false); err != nil {
		t.Fatal(err)
	}

	// Load: one producer per queue, each message acknowledged at an offset.
	var mu sync.Mutex
	acked := [2]map[uint64]string{{}, {}}
	count := func(q int) int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked[q])
	}
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for q := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := uint64(1); lctx.Err() == nil; seq++ {
				body := fmt.Sprintf("q%d-%06d", q, seq)
				res, err := c.produce(lctx, broker.ProduceRequest{Topic: "t", ProducerID: fmt.Sprintf("load-%d", q), Seq: seq,
					Messages: []broker.ProduceMessage{{Body: []byte(body), Queue: int32(q), HasQueue: true}}})
				if err != nil {
					if lctx.Err() == nil {
						t.Errorf("produce %s: %v", body, err)
					}
					return
				}
				mu.Lock()
				acked[q][res.Acks[0].Offset] = body
				mu.Unlock()
			}
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()
	waitFor(t, time.Minute, "1,000 messages in queue 0", func() bool { return count(0) >= 1000 })

	l := c.Leader()
	f := (l + 1) % 3
	dir := c.Config(f).DataDir
	files, _ := filepath.Glob(filepath.Join(dir, "queueindex", "*", "0", "*.idx"))
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("no index file of queue 0 under %s", dir)
	}
	if remove {
		if err := os.Remove(files[0]); err != nil {
			t.Fatal(err)
		}
		t.Logf("deleted %s on follower %s", filepath.Base(files[0]), c.Config(f).Raft.ID)
	} else {
		// Record 300 of the first file: written out (records are written
		// 64 at a time), and read from disk, not from the tail in memory.
		fh, err := os.OpenFile(files[0], os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt([]byte{0xde, 0xad}, 300*queueindex.RecordLen+2); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		t.Logf("damaged record 300 of %s on follower %s", filepath.Base(files[0]), c.Config(f).Raft.ID)
	}

	// pullAll pulls every acknowledged offset of queue q from the
	// follower: it checks each message served and returns how many it
	// served itself.
	fb := c.Node(f).Broker()
	pullAll := func(q int) (served, total int) {
		mu.Lock()
		n := uint64(len(acked[q]))
		mu.Unlock()
		for off := uint64(0); off < n; {
			res, err := fb.Pull(ctx, broker.PullRequest{Topic: "t", Queue: int32(q), Offset: off, MaxMessages: 32})
			if err != nil && !errors.Is(err, broker.ErrUnavailable) {
				t.Fatalf("pull of offset %d from the follower: %v", off, err)
			}
			if err != nil || res.Status != broker.PullFound || len(res.Messages) == 0 {
				off++
				continue
			}
			for _, m := range res.Messages {
				mu.Lock()
				want, ok := acked[q][m.Offset]
				mu.Unlock()
				if ok && string(m.Body) != want {
					t.Fatalf("the follower serves %q at offset %d of queue %d, acknowledged there: %q", m.Body, m.Offset, q, want)
				}
				if m.Offset < n {
					served++
				}
			}
			off = res.Messages[len(res.Messages)-1].Offset + 1
		}
		return served, int(n)
	}
	// Reads meet the damage and the queue is rebuilt while the load goes on.
	waitFor(t, time.Minute, "the follower to rebuild the damaged index", func() bool {
		pullAll(0)
		rebuilt, _ := c.Node(f).Store().IndexRebuilds()
		return rebuilt >= 1
	})
	// The load goes on during and after the rebuild (generous: a loaded machine).
	waitFor(t, time.Minute, "1,000 more messages", func() bool { return count(0) >= 2000 })
	stopLoad()
	wg.Wait()
	for q := range 2 {
		waitFor(t, 30*time.Second, fmt.Sprintf("the follower to serve all of queue %d", q), func() bool {
			served, total := pullAll(q)
			return served == total
		})
	}
	if rebuilt, refused := c.Node(f).Store().IndexRebuilds(); rebuilt != 1 || refused != 0 {
		t.Errorf("%d rebuilds, %d ranges refused; want one rebuild", rebuilt, refused)
	}
}

// TestRestartedFollowerRebuildsLostIndex: a follower stopped after a
// snapshot loses its index files of a queue; started again, it serves the
// queue's new messages at once, sends older reads to peers, rebuilds what
// lies below from its log, and then serves the whole queue itself.
func TestRestartedFollowerRebuildsLostIndex(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := ctxT(t, 2*time.Minute)
	if _, err := c.Node(c.Leader()).Broker().CreateTopic(ctx, "t", 1, false); err != nil {
		t.Fatal(err)
	}
	const n = 600
	bodies := map[uint64]string{}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			body := fmt.Sprintf("m-%05d", i)
			res, err := c.produce(ctx, broker.ProduceRequest{Topic: "t", ProducerID: "p", Seq: uint64(i + 1),
				Messages: []broker.ProduceMessage{{Body: []byte(body)}}})
			if err != nil {
				t.Fatal(err)
			}
			bodies[res.Acks[0].Offset] = body
		}
	}
	produce(0, n)
	l := c.Leader()
	f := (l + 1) % 3
	waitFor(t, 30*time.Second, "the follower to apply everything", func() bool {
		return c.Node(f).Store().Applied() >= c.Node(l).Store().Applied()
	})
	if _, err := c.Node(f).Node().Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.Stop(f)
	dirs, _ := filepath.Glob(filepath.Join(c.Config(f).DataDir, "queueindex", "*", "0"))
	if len(dirs) != 1 {
		t.Fatalf("index directories of queue 0: %v", dirs)
	}
	if err := os.RemoveAll(dirs[0]); err != nil {
		t.Fatal(err)
	}
	c.Restart(f)
	produce(n, n+100)
	waitFor(t, 30*time.Second, "the follower to rebuild the lost index", func() bool {
		rebuilt, _ := c.Node(f).Store().IndexRebuilds()
		return rebuilt >= 1
	})
	waitFor(t, 30*time.Second, "the follower to apply everything", func() bool {
		return c.Node(f).Store().Applied() >= c.Node(c.Leader()).Store().Applied()
	})
	fb := c.Node(f).Broker()
	for off := uint64(0); off < n+100; {
		res, err := fb.Pull(ctx, broker.PullRequest{Topic: "t", Queue: 0, Offset: off, MaxMessages: 64})
		if err != nil || res.Status != broker.PullFound || len(res.Messages) == 0 {
			t.Fatalf("pull of offset %d from the follower: %+v, %v", off, res.Status, err)
		}
		for _, m := range res.Messages {
			if string(m.Body) != bodies[m.Offset] {
				t.Fatalf("offset %d: %q, acknowledged %q", m.Offset, m.Body, bodies[m.Offset])
			}
		}
		off = res.Messages[len(res.Messages)-1].Offset + 1
	}
}
