package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/raftlog"
)

const retSegMB, retLimitMB = 1, 3

// retentionGroup is a 3-node group that keeps at most retLimitMB of log per
// node in retSegMB segments, with what its producers were told.
type retentionGroup struct {
	*procCluster
	cl    *client.Client
	topic string

	mu  sync.Mutex
	ops []history.Op // every request sent and what its producer was told
}

func newRetentionGroup(t *testing.T) *retentionGroup {
	// No grace: a stopped follower does not hold cuts back, so it rejoins
	// through the leader's snapshot.
	c := procStartCluster(t, 3, "--segment-mb", fmt.Sprint(retSegMB), "--retention-mb", fmt.Sprint(retLimitMB),
		"--retention-check", "200ms", "--retention-grace", "0s")
	return &retentionGroup{procCluster: c, cl: c.client(), topic: "retained"}
}

// produce sends n 1 KB messages, 50 per request, and records the acks. With
// tolerate, a failed request is skipped (a leader was killed under it).
func (g *retentionGroup) produce(phase string, n int, tolerate bool) {
	g.t.Helper()
	p := g.cl.NewProducer()
	for i := 0; i < n; i += 50 {
		msgs := make([]client.Message, 50)
		for j := range msgs {
			msgs[j] = client.Message{Body: []byte(fmt.Sprintf("%s-%06d-%s", phase, i+j, strings.Repeat("x", 1000)))}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		invoke := procNow()
		acks, err := p.Send(ctx, g.topic, msgs...)
		cancel()
		g.mu.Lock()
		g.ops = append(g.ops, history.Sent(phase, uint64(i), msgs, invoke, procNow(), acks, err))
		g.mu.Unlock()
		if err != nil && !tolerate {
			g.t.Fatalf("send %s %d: %v", phase, i, err)
		}
	}
}

func (g *retentionGroup) segments(nd *procNode) int {
	ents, _ := os.ReadDir(filepath.Join(nd.Data, "log"))
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".wal") {
			n++
		}
	}
	return n
}

// waitWithinLimit waits until every running node keeps at most
// limit/segment whole segments, plus the tail while it fills, plus one
// being deleted.
func (g *retentionGroup) waitWithinLimit() {
	g.t.Helper()
	limit := retLimitMB/retSegMB + 2
	procWaitFor(g.t, 60*time.Second, "every node's log within the retention limit", func() (bool, string) {
		var parts []string
		ok := true
		for _, nd := range g.runningNodes() {
			n := g.segments(nd)
			parts = append(parts, fmt.Sprintf("%s %d segments", nd.ID, n))
			ok = ok && n <= limit
		}
		return ok, strings.Join(parts, ", ")
	})
}

// settled waits until retention has made its last cut (nothing is written
// any more: the queues' minimums stay put for a second) and returns the
// topic as it then is.
func (g *retentionGroup) settled(ctx context.Context) *api.TopicInfo {
	g.t.Helper()
	var ti *api.TopicInfo
	same := 0
	procWaitFor(g.t, 60*time.Second, "retention to settle", func() (bool, string) {
		cur, err := g.cl.DescribeTopic(ctx, g.topic)
		if err != nil {
			return false, err.Error()
		}
		if ti != nil && fmt.Sprint(cur.QueueInfo) == fmt.Sprint(ti.QueueInfo) {
			same++
		} else {
			same = 0
		}
		ti = cur
		if same < 4 {
			time.Sleep(250 * time.Millisecond)
		}
		return same >= 4, fmt.Sprint(cur.QueueInfo)
	})
	return ti
}

// waitCaughtUp waits until nd runs and has applied what the others had
// applied when the wait began. A producer may still be writing: the others
// move on meanwhile, and all nodes at one index may never be seen at once.
func (g *retentionGroup) waitCaughtUp(nd *procNode) {
	g.t.Helper()
	var want uint64
	procWaitFor(g.t, 60*time.Second, "the nodes beside "+nd.ID+" to answer", func() (bool, string) {
		want = 0
		for _, o := range g.runningNodes() {
			if o == nd {
				continue
			}
			applied, err := procApplied(o)
			if err != nil {
				return false, err.Error()
			}
			want = max(want, applied)
		}
		return true, ""
	})
	procWaitFor(g.t, 60*time.Second, nd.ID+" to catch up", func() (bool, string) {
		if !nd.Running() {
			g.t.Fatalf("%s exited after rejoining: %v\n%s", nd.ID, nd.WaitErr(), nd.LogTail(20))
		}
		applied, err := procApplied(nd)
		if err != nil {
			return false, err.Error()
		}
		return applied >= want, fmt.Sprintf("%s applied %d, the others %d", nd.ID, applied, want)
	})
}

// verify reads the topic from offset 0 with a new consumer group: every
// queue's minimum has moved past deleted messages, the consumer gets
// exactly the retained range, and internal/history finds every acknowledged
// message of the entries above the retention cut where its ack said, and
// nothing that was not sent. The cut is the one retention must have made
// to drop what the group reports dropped: past the last log entry of every
// acknowledged message below its queue's minimum.
func (g *retentionGroup) verify() {
	t := g.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ti := g.settled(ctx)
	h := &history.History{Topic: g.topic, Retention: true, Min: map[int32]uint64{}}
	end, retained := map[int32]uint64{}, 0
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range ti.QueueInfo {
		if q.MinOffset == 0 {
			t.Errorf("queue %d: min offset still 0 after more than %d MiB through a %d MiB limit", q.Queue, 2*retLimitMB, retLimitMB)
		}
		end[q.Queue] = q.MaxOffset
		h.Min[q.Queue] = q.MinOffset
		retained += int(q.MaxOffset - q.MinOffset)
	}
	// At most the limit, plus the segment being written (whole segments
	// count, a partly written one too).
	if retained == 0 || retained > (retLimitMB+retSegMB)<<20/1000 {
		t.Fatalf("%d messages retained, want some and at most about %d MiB of them", retained, retLimitMB+retSegMB)
	}
	cfg := client.DefaultConsumerConfig(g.topic, fmt.Sprintf("verify-%d", time.Now().UnixNano()))
	cfg.OnSkipped = func(q int32, from, to uint64) {
		t.Errorf("queue %d: offsets %d..%d deleted while the group was quiet", q, from, to-1)
	}
	cons, err := g.cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	var read []client.Record
	for !cons.CaughtUp(end) {
		recs, err := cons.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("consume: %d of %d retained messages read: %v", len(read), retained, err)
			}
			continue
		}
		read = append(read, recs...)
	}
	if len(read) != retained {
		t.Fatalf("consumer read %d messages, %d are retained", len(read), retained)
	}
	h.Ops = g.ops
	h.Final = history.LogOf(history.Records(read))
	acked := 0
	for _, op := range g.ops {
		if op.Outcome != history.OutcomeOK {
			continue
		}
		for _, a := range op.Acks {
			acked++
			if a.Offset >= h.Min[a.Queue] {
				continue
			}
			if idx, err := raftlog.MessageIndex(a.ID); err == nil && idx+1 > h.Cut {
				h.Cut = idx + 1
			}
		}
	}
	r := history.Check(h)
	if !r.OK() {
		t.Fatalf("the retained log does not match what producers were told: %s", r.Errors())
	}
	t.Logf("%d of %d acknowledged messages retained (%d below the cut at log index %d)", retained, acked, r.Retained, h.Cut)
}

// TestProcessRetention: each node's log stays within --retention-mb while
// messages keep coming; a follower that was down while the entries it lacked
// were deleted gets the leader's snapshot, drops its old log and catches up
// (and takes new entries after it); a consumer starting at offset 0 reads
// exactly the retained messages.
func TestProcessRetention(t *testing.T) {
	procRequire(t)
	g := newRetentionGroup(t)
	g.produce("a", 6000, false) // about 6 MiB: twice the limit
	g.waitWithinLimit()

	leader := g.waitLeader("")
	var down *procNode
	for _, nd := range g.all() {
		if nd.ID != leader.ID {
			down = nd
			break
		}
	}
	g.kill(down.ID)
	g.produce("b", 6000, false) // everything the stopped follower lacks is deleted meanwhile
	g.waitWithinLimit()
	g.start(down.ID)
	g.produce("c", 500, false) // appended after the snapshot: the rejoined log must take them
	g.waitCaughtUp(down)
	g.waitWithinLimit()
	if log, _ := os.ReadFile(down.Log); !strings.Contains(string(log), "Installed remote snapshot") {
		t.Errorf("%s rejoined without installing the leader's snapshot", down.ID)
	}
	g.verify()

	// A new member starts from the leader's snapshot: it holds no body below
	// it, answers RETRY_ELSEWHERE there and serves what came after.
	n4 := g.addNode("n4")
	g.start("n4")
	if out := g.mustCLI("", "member", "add", "n4@"+n4.Raft, "-s", g.addrs("n1", "n2", "n3")); !strings.Contains(out, "n4 added (voter: true)") {
		t.Fatalf("member add printed %q", out)
	}
	g.produce("d", 500, false)
	g.waitCaughtUp(n4)
	if log, _ := os.ReadFile(n4.Log); !strings.Contains(string(log), "Installed remote snapshot") {
		t.Errorf("n4 joined without installing the leader's snapshot")
	}
	// For the oldest retained message of every queue: n4 serves it if its
	// log reaches that far back, and otherwise sends the reader elsewhere.
	g.waitWithinLimit()
	pullFrom := func(nd *procNode, q int32, off uint64) (*api.PullResponse, error) {
		conn, err := grpc.NewClient(nd.Client, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return api.NewBrokerClient(conn).Pull(ctx, &api.PullRequest{Topic: g.topic, Queue: q, Offset: off, MaxMessages: 1})
	}
	leader = g.waitLeader("")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ti := g.settled(ctx)
	st, err := procStatusOf(n4.Client, time.Second)
	if err != nil || procSelf(st) == nil {
		t.Fatalf("n4 status: %v", err)
	}
	n4First := procSelf(st).FirstIndex
	lacking := 0
	for _, q := range ti.QueueInfo {
		ref, err := pullFrom(leader, q.Queue, q.MinOffset)
		if err != nil || ref.Status != api.PullStatus_PULL_STATUS_FOUND {
			t.Fatalf("leader, queue %d at the minimum %d: %v %v", q.Queue, q.MinOffset, ref, err)
		}
		idx, err := raftlog.MessageIndex(ref.Messages[0].Id) // the log index of the entry
		if err != nil {
			t.Fatal(err)
		}
		got, err := pullFrom(n4, q.Queue, q.MinOffset)
		switch {
		case err != nil:
			t.Errorf("n4, queue %d at %d: %v", q.Queue, q.MinOffset, err)
		case idx < n4First:
			lacking++
			if got.Status != api.PullStatus_PULL_STATUS_RETRY_ELSEWHERE || got.GetSuggestion().GetNodeId() == "n4" {
				t.Errorf("n4 (log from index %d), queue %d at %d (index %d): %v", n4First, q.Queue, q.MinOffset, idx, got)
			}
		case got.Status != api.PullStatus_PULL_STATUS_FOUND || got.ServedBy != "n4" || got.Messages[0].Id != ref.Messages[0].Id:
			t.Errorf("n4 (log from index %d), queue %d at %d (index %d): %v", n4First, q.Queue, q.MinOffset, idx, got)
		}
	}
	t.Logf("n4's log starts at index %d; it lacks the oldest retained message of %d of %d queues", n4First, lacking, len(ti.QueueInfo))
	g.verify()
}

// TestProcessRetentionKillLeader: retention cuts and snapshot installs while
// the leader is SIGKILLed and restarted three times under load lose nothing
// that is still retained.
func TestProcessRetentionKillLeader(t *testing.T) {
	procRequire(t)
	g := newRetentionGroup(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			g.produce(fmt.Sprintf("k%d", i), 500, true)
		}
	}()
	for i := 0; i < 3; i++ {
		time.Sleep(1500 * time.Millisecond) // a few MiB: cuts happen between kills
		l := g.waitLeader("")
		g.kill(l.ID)
		g.waitLeader(l.ID)
		time.Sleep(time.Second)
		g.start(l.ID)
		g.waitCaughtUp(l)
	}
	close(stop)
	<-done
	g.produce("end", 500, false)
	g.waitConverged(60 * time.Second)
	g.waitWithinLimit()
	g.verify()
}
