package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestProcessRetention runs a group with --retention-mb: each node's log
// stays within the limit while messages keep coming; a follower that was
// down while the entries it lacked were deleted gets the leader's snapshot,
// drops its old log and catches up; and a consumer starting at offset 0
// continues at each queue's new minimum and reads exactly the retained
// messages, each with the body that was acknowledged at its offset.
func TestProcessRetention(t *testing.T) {
	procRequire(t)
	const segMB, limitMB = 1, 3
	c := procStartCluster(t, 3, "--segment-mb", fmt.Sprint(segMB), "--retention-mb", fmt.Sprint(limitMB),
		"--retention-check", "200ms")
	cl := c.client()
	const topic = "retained"
	acked := map[procLoc]string{}
	produce := func(phase string, n int) {
		t.Helper()
		p := cl.NewProducer()
		for i := 0; i < n; i += 50 {
			msgs := make([]client.Message, 50)
			bodies := make([]string, 50)
			for j := range msgs {
				bodies[j] = fmt.Sprintf("%s-%06d-%s", phase, i+j, strings.Repeat("x", 1000))
				msgs[j] = client.Message{Body: []byte(bodies[j])}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			acks, err := p.Send(ctx, topic, msgs...)
			cancel()
			if err != nil {
				t.Fatalf("send %s %d: %v", phase, i, err)
			}
			for j, a := range acks {
				acked[procLoc{a.Queue, a.Offset}] = bodies[j]
			}
		}
	}
	segments := func(nd *procNode) int {
		ents, _ := os.ReadDir(filepath.Join(nd.Data, "log"))
		n := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".wal") {
				n++
			}
		}
		return n
	}
	// Retention keeps whole segments: at most limit/segment of them, plus
	// the tail while it fills, plus one being deleted.
	maxSegments := limitMB/segMB + 2
	waitWithinLimit := func() {
		t.Helper()
		procWaitFor(t, 60*time.Second, "every node's log within the retention limit", func() (bool, string) {
			var parts []string
			ok := true
			for _, nd := range c.runningNodes() {
				n := segments(nd)
				parts = append(parts, fmt.Sprintf("%s %d segments", nd.ID, n))
				ok = ok && n <= maxSegments
			}
			return ok, strings.Join(parts, ", ")
		})
	}

	produce("a", 6000) // about 6 MiB: twice the limit
	waitWithinLimit()

	leader := c.waitLeader("")
	var down *procNode
	for _, nd := range c.all() {
		if nd.ID != leader.ID {
			down = nd
			break
		}
	}
	c.kill(down.ID)
	produce("b", 6000) // everything the stopped follower lacks is deleted meanwhile
	waitWithinLimit()
	c.start(down.ID)
	produce("c", 500) // appended after the snapshot: the rejoined log must take them
	procWaitFor(t, 60*time.Second, down.ID+" to catch up", func() (bool, string) {
		if !down.Running() {
			t.Fatalf("%s exited after rejoining: %v\n%s", down.ID, down.WaitErr(), down.LogTail(20))
		}
		want := c.waitConverged(60 * time.Second)
		st, err := procStatusOf(down.Client, time.Second)
		if err != nil {
			return false, err.Error()
		}
		self := procSelf(st)
		return self != nil && self.AppliedIndex >= want, fmt.Sprintf("%s applied %v, the others %d", down.ID, self, want)
	})
	waitWithinLimit()
	if log, _ := os.ReadFile(down.Log); !strings.Contains(string(log), "Installed remote snapshot") {
		t.Errorf("%s rejoined without installing the leader's snapshot", down.ID)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ti, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, retained := map[int32]uint64{}, 0
	for _, q := range ti.QueueInfo {
		if q.MinOffset == 0 {
			t.Errorf("queue %d: min offset still 0 after 12 MiB through a %d MiB limit", q.Queue, limitMB)
		}
		end[q.Queue] = q.MaxOffset
		retained += int(q.MaxOffset - q.MinOffset)
		for off := q.MinOffset; off < q.MaxOffset; off++ {
			if _, ok := acked[procLoc{q.Queue, off}]; !ok {
				t.Fatalf("queue %d offset %d: retained but never acknowledged", q.Queue, off)
			}
		}
	}
	if retained == 0 || retained > limitMB<<20/1000 {
		t.Fatalf("%d messages retained, want some and at most about %d MiB of them", retained, limitMB)
	}
	cons, err := cl.NewConsumer(client.DefaultConsumerConfig(topic, "from-the-start"))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close(context.Background())
	got := map[procLoc]bool{}
	for !cons.CaughtUp(end) {
		recs, err := cons.Poll(ctx)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("consume: %d of %d retained messages read: %v", len(got), retained, err)
			}
			continue
		}
		for _, r := range recs {
			l := procLoc{r.Queue, r.Offset}
			if want := acked[l]; string(r.Body) != want {
				t.Fatalf("queue %d offset %d: body %q, acknowledged %q", r.Queue, r.Offset, procCut(string(r.Body), 20), procCut(want, 20))
			}
			got[l] = true
		}
	}
	if len(got) != retained {
		t.Fatalf("consumer read %d messages, %d are retained", len(got), retained)
	}
	t.Logf("%d of %d acknowledged messages retained; segments per node at most %d", retained, len(acked), maxSegments)
}
