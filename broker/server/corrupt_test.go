package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/raftlog"
)

// flipSealedBody flips one byte of the message body that starts with mark
// in the sealed raft-wal segment of dataDir holding it, under the running
// node. It fails when the body is only in the tail segment.
func flipSealedBody(t *testing.T, dataDir, mark string) string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dataDir, "log", "*.wal"))
	sort.Strings(segs)
	for i, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		pos := bytes.Index(b, []byte(mark))
		if pos < 0 {
			continue
		}
		if i == len(segs)-1 {
			t.Fatalf("%q is in the tail segment %s, not a sealed one", mark, seg)
		}
		pos += len(mark) + 100
		f, err := os.OpenFile(seg, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{b[pos] ^ 0x20}, int64(pos)); err != nil {
			t.Fatal(err)
		}
		return seg
	}
	t.Fatalf("%q not found in any segment of %s", mark, dataDir)
	return ""
}

// TestCorruptLeaderSegmentIsNotReplicated reproduces the data-safety issue
// "corruption on a running node spreads and moves acknowledged messages":
// one body byte flipped in a sealed segment of the running leader, after
// the entry left its caches; then a follower is removed, wiped and added
// again, so the leader must replicate the damaged entry to it. The leader
// read entries for replication without checking their checksum, the new
// follower's FSM skipped the corrupt batch and shifted every later offset,
// and leader-only consumers stopped with Internal.
//
// Now: the damaged entry never reaches the new follower, the leader is
// marked damaged and hands leadership to a healthy node, every node that
// serves an offset serves the message acknowledged there, and a pull of
// any offset from any node gets that message, a suggestion or Unavailable,
// never Internal.
func TestCorruptLeaderSegmentIsNotReplicated(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.SegmentMB = 1 // entries soon sit in sealed segments
	})
	ctx := ctxT(t, 4*time.Minute)
	l := c.Leader()
	if _, err := c.Node(l).Broker().CreateTopic(ctx, "t", 1, false); err != nil {
		t.Fatal(err)
	}
	// 400 entries of 8 KiB: more than raft's cache of 256 entries, over
	// three 1 MiB segments. Nothing has pulled them: no read cache holds them.
	const n = 400
	pad := strings.Repeat("p", 8<<10)
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("msg-%05d-%s", i, pad)
		res, err := c.produce(ctx, broker.ProduceRequest{Topic: "t", ProducerID: "corrupt-test", Seq: uint64(i + 1),
			Messages: []broker.ProduceMessage{{Body: []byte(bodies[i])}}})
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		if a := res.Acks[0]; a.Offset != uint64(i) {
			t.Fatalf("message %d acknowledged at offset %d", i, a.Offset)
		}
	}
	const bad = 5
	l = c.Leader()
	seg := flipSealedBody(t, c.Config(l).DataDir, fmt.Sprintf("msg-%05d-", bad))
	t.Logf("flipped a body byte of offset %d in %s of leader %s", bad, filepath.Base(seg), c.Config(l).Raft.ID)

	// Remove a follower, wipe it and add it back empty.
	f := (l + 1) % 3
	fid := c.Config(f).Raft.ID
	if err := c.Node(l).Broker().RemoveMember(ctx, fid, true); err != nil {
		t.Fatalf("remove %s: %v", fid, err)
	}
	c.Kill(f)
	c.Reconfigure(f, func(cfg *server.Config) { cfg.DataDir, cfg.Raft.Peers, cfg.Raft.Join = t.TempDir(), nil, true })
	c.Restart(f)
	for {
		ld := c.Node(c.Leader()).Broker()
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := ld.AddMember(actx, fid, c.Config(f).Raft.BindAddr)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("member add %s: %v", fid, err)
		}
		t.Logf("member add %s through %s: %v; retrying", fid, ld.ID(), err)
		time.Sleep(200 * time.Millisecond)
	}

	// The damaged leader stopped leading and is marked damaged.
	waitFor(t, 30*time.Second, "the damaged node to be marked and to hand leadership over", func() bool {
		d, ok := c.Node(l).Broker().Damaged()
		return ok && d.Index > 0 && c.Node(l).Node().Role() != election.Leader
	})
	if d, _ := c.Node(l).Broker().Damaged(); d.Source != "log" {
		t.Errorf("damage %+v, want found in the log", d)
	}
	nl := c.LeaderExcept(l)
	t.Logf("new leader %s", c.Config(nl).Raft.ID)
	waitFor(t, 30*time.Second, "the new follower to apply everything", func() bool {
		return c.Node(f).Store().Applied() >= c.Node(nl).Store().Applied()
	})
	waitFor(t, 10*time.Second, "status on the new leader to show the damaged node", func() bool {
		st, err := c.Node(nl).Broker().Status()
		if err != nil {
			return false
		}
		for _, ns := range st.Nodes {
			if ns.ID == c.Config(l).Raft.ID {
				return ns.Damaged && !ns.Healthy && strings.Contains(ns.DamagedReason, "member remove")
			}
		}
		return false
	})

	// Pinned pulls of every offset from every node, over the wire.
	for i, cfg := range c.Configs() {
		conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		bc := api.NewBrokerClient(conn)
		served := 0
		for off := 0; off < n; off++ {
			r, err := bc.Pull(ctx, &api.PullRequest{Topic: "t", Queue: 0, Offset: uint64(off), MaxMessages: 1})
			if err != nil {
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("node %s offset %d: %v (want the message, a suggestion or Unavailable)", cfg.Raft.ID, off, err)
				}
				continue
			}
			switch r.Status {
			case api.PullStatus_PULL_STATUS_FOUND:
				if len(r.Messages) != 1 || string(r.Messages[0].Body) != bodies[off] {
					got := ""
					if len(r.Messages) > 0 {
						got = string(r.Messages[0].Body)[:9]
					}
					t.Fatalf("node %s serves %q at offset %d, acknowledged %q", cfg.Raft.ID, got, off, bodies[off][:9])
				}
				served++
			case api.PullStatus_PULL_STATUS_RETRY_ELSEWHERE:
				if r.Suggestion == nil || r.Suggestion.NodeId == cfg.Raft.ID || r.Suggestion.NodeId == c.Config(l).Raft.ID {
					t.Fatalf("node %s offset %d: retry elsewhere with suggestion %v", cfg.Raft.ID, off, r.Suggestion)
				}
			default:
				t.Fatalf("node %s offset %d: status %v", cfg.Raft.ID, off, r.Status)
			}
		}
		t.Logf("node %s served %d of %d offsets itself", cfg.Raft.ID, served, n)
		if i != l && i == nl && served != n {
			t.Errorf("leader %s served %d of %d offsets", cfg.Raft.ID, served, n)
		}
		if i == l && served != 0 {
			t.Errorf("damaged node %s served %d offsets", cfg.Raft.ID, served)
		}
	}
	// The re-added follower holds the good entry: its log was never sent
	// the damaged one.
	idx := func(i int) uint64 {
		locs, _, err := c.Node(i).Store().Locate("t", 0, bad, 1)
		if err != nil || len(locs) == 0 {
			t.Fatalf("locate offset %d on node %d: %v", bad, i, err)
		}
		return locs[0].LogIndex
	}
	if e, err := c.Node(f).RaftLog().Read(idx(f)); err != nil || !bytes.Contains(e.Data, []byte(bodies[bad])) {
		t.Fatalf("re-added follower's entry for offset %d: %v", bad, err)
	}
	if _, err := c.Node(l).RaftLog().Read(idx(l)); !errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("damaged node's entry: %v, want ErrCorrupt", err)
	}

	// The damaged node still counts for a quorum and never campaigns:
	// stop the healthy node that is not the leader, and the group still
	// commits with the leader and the damaged node.
	other := 3 - l - nl
	c.Kill(other)
	if _, err := c.produce(ctx, broker.ProduceRequest{Topic: "t", ProducerID: "corrupt-test", Seq: n + 1,
		Messages: []broker.ProduceMessage{{Body: []byte("after")}}}); err != nil {
		t.Fatalf("produce with the damaged node as the second voter: %v", err)
	}
	if c.Node(l).Node().Role() == election.Leader {
		t.Fatal("the damaged node leads")
	}

	// Restarted, the damaged node refuses to start, naming the entry and
	// the repair steps.
	c.Stop(l)
	if s, err := server.Start(c.Config(l)); err == nil {
		s.Kill()
		t.Fatal("the damaged node started")
	} else if want := fmt.Sprintf("log index %d", idx(nl)); !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "member remove "+c.Config(l).Raft.ID+" --force") || !strings.Contains(err.Error(), "member add") {
		t.Fatalf("start of the damaged node: %v\nwant it to name %q and the repair steps", err, want)
	}
}

// TestDamagedNodeVotesButNeverLeads: a node that stopped campaigning (a
// damaged node) still votes, so when the leader of a 3-node group dies the
// other healthy node is elected with its vote, and it never leads itself.
// The leader dies once both followers hold its whole log (when the damaged
// node holds more, it has to lead first: the test below).
func TestDamagedNodeVotesButNeverLeads(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	d := (l + 1) % 3
	c.Node(d).Node().NeverCampaign()
	last := c.Node(l).Node().Stats().LastIndex
	waitFor(t, 30*time.Second, "both followers to hold the leader's log", func() bool {
		for i := range c.Nodes() {
			if c.Node(i).Node().Stats().LastIndex < last {
				return false
			}
		}
		return true
	})
	c.Kill(l)
	nl := c.LeaderExcept(l)
	if nl == d {
		t.Fatal("the node that does not campaign was elected")
	}
	// Without the old leader, the new one needs the damaged node's acks.
	ctx := ctxT(t, time.Minute)
	if _, err := c.Node(nl).Broker().CreateTopic(ctx, "t", 1, false); err != nil {
		t.Fatal(err)
	}
	// Kill the new leader too: the damaged node alone never takes over.
	c.Kill(nl)
	time.Sleep(2 * time.Second)
	if r := c.Node(d).Node().Role(); r == election.Leader {
		t.Fatalf("the node that does not campaign became %s", r)
	}
	if term := c.Node(d).Node().Stats().Term; term > 10 {
		t.Errorf("term rose to %d: failed campaigns must not raise it (pre-vote)", term)
	}
}

// TestDamagedNodeWithTheLongerLogHandsOver: when the leader dies while a
// damaged follower holds entries the healthy one lacks, the damaged node
// refuses the healthy one its vote (raft's rule) and cannot be elected
// itself; once the group has been leaderless for a while it campaigns
// anyway, wins, and hands leadership to the healthy node as soon as that
// node holds its log. Every acknowledged message is then served there.
func TestDamagedNodeWithTheLongerLogHandsOver(t *testing.T) {
	c := servertest.New(t, 3)
	ctx := ctxT(t, 3*time.Minute)
	l := c.Leader()
	d, h := (l+1)%3, (l+2)%3
	if _, err := c.Node(l).Broker().CreateTopic(ctx, "t", 1, false); err != nil {
		t.Fatal(err)
	}
	send := func(i int) {
		t.Helper()
		if _, err := produceTo(ctx, t, c, broker.ProduceRequest{Topic: "t", ProducerID: "p", Seq: uint64(i + 1),
			Messages: []broker.ProduceMessage{{Body: []byte(fmt.Sprintf("m%d", i))}}}); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	send(0)
	waitFor(t, 30*time.Second, "every node to apply the first message", func() bool {
		for i := range c.Nodes() {
			if c.Node(i).Store().Applied() < c.Node(l).Store().Applied() {
				return false
			}
		}
		return true
	})
	// Follower d's state machine meets a damaged batch: it stops applying
	// and campaigning, and keeps acknowledging appends.
	bad := raftlog.EncodeBatch(&raftlog.Request{Topic: "t", Messages: []raftlog.Message{{Body: []byte("rotten")}}})
	bad[len(bad)-1] ^= 0x01
	fsm := c.Node(d).Store()
	fsm.ApplyUnreplicated(fsm.Applied()+1, bad)
	waitFor(t, 20*time.Second, "node d to be marked damaged", func() bool {
		_, ok := c.Node(d).Broker().Damaged()
		return ok
	})
	// h falls behind: the messages are committed on l and d only.
	c.Partition(h)
	const n = 20
	for i := 1; i <= n; i++ {
		send(i)
	}
	last := c.Node(l).Node().Stats().LastIndex
	waitFor(t, 30*time.Second, "d to hold the leader's log", func() bool { return c.Node(d).Node().Stats().LastIndex >= last })
	c.Kill(l)
	c.Heal()
	if got := c.Node(h).Node().Stats().LastIndex; got >= last {
		t.Fatalf("h holds index %d, the dead leader's last was %d: the test needs h behind", got, last)
	}

	waitFor(t, time.Minute, "the healthy node to lead", func() bool { return c.Node(h).Node().Role() == election.Leader })
	if r := c.Node(d).Node().Role(); r == election.Leader {
		t.Fatalf("the damaged node is %s", r)
	}
	// Every acknowledged message is on the new leader, once, in order.
	var got []string
	waitFor(t, 30*time.Second, "the new leader to serve every message", func() bool {
		r, err := c.Node(h).Broker().Pull(ctx, broker.PullRequest{Topic: "t", Queue: 0, MaxMessages: 100})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, m := range r.Messages {
			got = append(got, string(m.Body))
		}
		return len(got) >= n+1
	})
	for i, b := range got {
		if want := fmt.Sprintf("m%d", i); b != want || len(got) != n+1 {
			t.Fatalf("the new leader serves %q, want m0..m%d", got, n)
		}
	}
	// And it takes writes, acknowledged by the damaged node.
	send(n + 1)
}

// TestDamagedStateMachineHandsOverLeadership: a leader whose FSM met a
// damaged entry stops applying, hands leadership to a healthy node at
// once, serves no pulls, takes no snapshot, and as a damaged follower does
// not hold back the group's retention (it would wait for it forever: it
// answers, but never applies again).
func TestDamagedStateMachineHandsOverLeadership(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.SegmentMB = 1
		cfg.HTTP = freeAddr(t)
		cfg.Broker.RetentionBytes = 1 << 20
		cfg.Broker.RetentionCheck = 200 * time.Millisecond
	})
	ctx := ctxT(t, 3*time.Minute)
	l := c.Leader()
	if _, err := c.Node(l).Broker().CreateTopic(ctx, "t", 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.produce(ctx, broker.ProduceRequest{Topic: "t", Messages: []broker.ProduceMessage{{Body: []byte("first")}}}); err != nil {
		t.Fatal(err)
	}
	// The leader's FSM meets a batch whose CRC does not match (rot in
	// memory, say), as if raft handed it the next entry.
	bad := raftlog.EncodeBatch(&raftlog.Request{Topic: "t", Messages: []raftlog.Message{{Body: []byte("rotten")}}})
	bad[len(bad)-1] ^= 0x01
	fsm := c.Node(l).Store()
	fsm.ApplyUnreplicated(fsm.Applied()+1, bad)
	frozen := fsm.Applied()

	waitFor(t, 20*time.Second, "the damaged leader to be marked and hand leadership over", func() bool {
		d, ok := c.Node(l).Broker().Damaged()
		return ok && d.Source == "state machine" && c.Node(l).Node().Role() != election.Leader
	})
	nl := c.LeaderExcept(l)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + c.Config(l).HTTP + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "damaged") || !strings.Contains(body, "member remove") {
		t.Errorf("/readyz of the damaged node: %d %q", code, body)
	}
	if _, body := get("/metrics"); !strings.Contains(body, "\nraftmq_damaged 1\n") {
		t.Error("/metrics of the damaged node lacks raftmq_damaged 1")
	}
	pad := strings.Repeat("p", 8<<10)
	for i := 0; i < 300; i++ { // about 2.4 MiB: retention cuts below 1 MiB
		if _, err := c.produce(ctx, broker.ProduceRequest{Topic: "t", ProducerID: "p", Seq: uint64(i + 1),
			Messages: []broker.ProduceMessage{{Body: []byte(pad)}}}); err != nil {
			t.Fatalf("produce %d on the new leader: %v", i, err)
		}
	}
	if got := fsm.Applied(); got != frozen {
		t.Errorf("the damaged FSM went on applying: %d, stopped at %d", got, frozen)
	}
	if _, err := c.Node(l).Node().Snapshot(); err == nil {
		t.Error("the damaged node took a snapshot")
	}
	res, err := c.Node(l).Broker().Pull(ctx, broker.PullRequest{Topic: "t", Queue: 0, Offset: 0})
	if err != nil && !errors.Is(err, broker.ErrUnavailable) {
		t.Fatalf("pull on the damaged node: %v, want a suggestion or ErrUnavailable", err)
	}
	if err == nil && (res.Status != broker.PullRetryElsewhere || len(res.Messages) > 0 || res.Suggestion.NodeID != c.Config(nl).Raft.ID) {
		t.Fatalf("pull on the damaged node: %+v, want a suggestion to the leader %s", res, c.Config(nl).Raft.ID)
	}
	waitFor(t, 30*time.Second, "retention on the new leader despite the damaged follower", func() bool {
		return c.Node(nl).Store().LogFloor() > 0
	})
}
