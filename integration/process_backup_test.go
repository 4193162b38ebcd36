package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// TestProcessBackupRestore follows docs/operations.md "Backup and restore".
// A 3-node group takes acknowledged messages and a consumer group commits
// offsets; a caught-up follower is stopped with SIGTERM, its data directory
// copied (the backup) and started again; more messages follow; then every
// node is SIGKILLed and their data is gone for the test. The copy is started
// with --recover-as-new-group at new raft and client addresses: it leads a
// group of its own, serves every message acknowledged before the backup
// exactly once at its queue and offset and nothing sent after it, and has
// the committed offsets; the old members are not members. Two fresh nodes join with `member add` and hold
// the same log; the restored node refuses the flag once they are members,
// and restarted without it rejoins.
func TestProcessBackupRestore(t *testing.T) {
	procRequire(t)
	const topic, cg = "backup", "backup-cg"
	c := procStartCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, topic, 4, false); err != nil {
		t.Fatal(err)
	}
	type sent struct {
		queue  int32
		offset uint64
		body   string
	}
	acked := map[string]sent{} // by message id
	send := func(prefix string, n int) []string {
		t.Helper()
		p := cl.NewProducer()
		var ids []string
		for i := 0; i < n; i += 10 {
			var msgs []client.Message
			for j := i; j < i+10 && j < n; j++ {
				msgs = append(msgs, client.Message{Key: fmt.Sprintf("k%d", j%7), Body: fmt.Appendf(nil, "%s-%d", prefix, j)})
			}
			acks, err := p.Send(ctx, topic, msgs...)
			if err != nil {
				t.Fatalf("send %s %d: %v", prefix, i, err)
			}
			for k, a := range acks {
				acked[a.Id] = sent{a.Queue, a.Offset, string(msgs[k].Body)}
				ids = append(ids, a.Id)
			}
		}
		return ids
	}
	before := send("before", 300)
	committed := []*api.QueueOffset{{Topic: topic, Queue: 0, Offset: 7}, {Topic: topic, Queue: 1, Offset: 19}, {Topic: topic, Queue: 3, Offset: 2}}
	if err := cl.CommitOffsets(ctx, cg, committed); err != nil {
		t.Fatal(err)
	}

	// Backup: a follower that has applied everything, stopped cleanly.
	leader := c.waitLeader("")
	var f *procNode
	for _, nd := range c.all() {
		if nd.ID != leader.ID {
			f = nd
			break
		}
	}
	procWaitFor(t, 30*time.Second, f.ID+" to catch up", func() (bool, string) {
		_, why := localgroup.FollowerCaughtUp(ctx, strings.Split(c.addrs(), ","), f.ID, f.Client, time.Second)
		return why == "", why
	})
	c.signal(f.ID, syscall.SIGTERM)
	if !f.Wait(25 * time.Second) {
		t.Fatalf("%s did not exit within 25s of SIGTERM", f.ID)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if out, err := exec.Command("cp", "-a", f.Data, backup).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v: %s", f.Data, err, out)
	}
	c.start(f.ID)
	after := send("after", 100)
	for _, nd := range c.all() {
		c.kill(nd.ID)
	}

	// Restore: the copy as a new one-node group at new addresses.
	g, err := localgroup.New(localgroup.Config{Exe: procBinary(t), Dir: t.TempDir(), Keep: true, StartTimeout: procStartTimeout})
	if err != nil {
		t.Fatal(err)
	}
	r := &procCluster{t: t, g: g}
	t.Cleanup(func() {
		g.Close()
		if t.Failed() {
			for _, nd := range g.Nodes() {
				t.Logf("log of %s (restored group):\n%s", nd.ID, nd.LogTail(40))
			}
		}
	})
	rn := r.addNode(f.ID)
	if rn.Raft == f.Raft || rn.Client == f.Client {
		t.Fatalf("restored node got the old addresses %s %s", rn.Raft, rn.Client)
	}
	if out, err := exec.Command("cp", "-a", backup, rn.Data).CombinedOutput(); err != nil {
		t.Fatalf("copy the backup: %v: %s", err, out)
	}
	g.SetServerArgs([]string{"--recover-as-new-group"})
	r.start(rn.ID)
	g.SetServerArgs(nil)
	if l := r.waitLeader(""); l.ID != rn.ID {
		t.Fatalf("leader of the restored group is %s, want %s", l.ID, rn.ID)
	}
	st, err := procStatusOf(rn.Client, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 1 || st.Nodes[0].Id != rn.ID || st.Nodes[0].RaftAddress != rn.Raft || !st.Nodes[0].Voter {
		t.Fatalf("restored group's members: %+v, want only %s at %s", st.Nodes, rn.ID, rn.Raft)
	}
	// Clients are sent to its new address, not the one of the old group.
	procWaitFor(t, 10*time.Second, "the restored node to register its new client address", func() (bool, string) {
		st, err := procStatusOf(rn.Client, time.Second)
		if err != nil {
			return false, err.Error()
		}
		return len(st.Nodes) == 1 && st.Nodes[0].ClientAddress == rn.Client, fmt.Sprintf("%+v", st.Nodes)
	})
	if log := rn.LogSinceStart(); !strings.Contains(log, "RECOVERED AS A NEW GROUP") {
		t.Errorf("the restored node did not log its recovery:\n%s", procCut(log, 3000))
	}

	check := func(nd *procNode) map[int32][]string {
		t.Helper()
		rcl := r.client()
		ti, err := rcl.DescribeTopic(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		end := map[int32]uint64{}
		total := uint64(0)
		for _, q := range ti.QueueInfo {
			end[q.Queue] = q.MaxOffset
			total += q.MaxOffset
		}
		logs := procReadNode(t, nd, topic, end)
		seen := map[string]bool{}
		byQueue := map[int32][]string{}
		for q, entries := range logs {
			for _, e := range entries {
				if seen[e.ID] {
					t.Errorf("%s: message %s read twice", nd.ID, e.ID)
				}
				seen[e.ID] = true
				byQueue[q] = append(byQueue[q], e.ID)
				a, ok := acked[e.ID]
				if !ok {
					t.Errorf("%s: message %s at %d/%d was never acknowledged", nd.ID, e.ID, q, e.Offset)
					continue
				}
				if a.queue != q || a.offset != e.Offset || a.body != string(e.Body) {
					t.Errorf("%s: message %s at %d/%d %q, acknowledged at %d/%d %q", nd.ID, e.ID, q, e.Offset, e.Body, a.queue, a.offset, a.body)
				}
			}
		}
		for _, id := range before {
			if !seen[id] {
				t.Errorf("%s: message %s, acknowledged before the backup, is missing", nd.ID, id)
			}
		}
		for _, id := range after {
			if seen[id] {
				t.Errorf("%s: message %s, sent after the backup, is in the restored group", nd.ID, id)
			}
		}
		if total != uint64(len(before)) {
			t.Errorf("%s: the queues hold %d messages, want the %d acknowledged before the backup", nd.ID, total, len(before))
		}
		return byQueue
	}
	want := check(rn)
	rcl := r.client()
	got, err := rcl.FetchOffsets(ctx, cg, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range committed {
		if got[o.Queue] != o.Offset {
			t.Errorf("committed offset of %s queue %d: %d after the restore, want %d (all: %v)", cg, o.Queue, got[o.Queue], o.Offset, got)
		}
	}

	// The old members are not members: member remove refuses them.
	for _, nd := range c.all() {
		if nd.ID == rn.ID {
			continue
		}
		_, errOut, err := r.cli("", "member", "remove", "--force", nd.ID, "-s", rn.Client)
		if err == nil || !strings.Contains(errOut, "no such server") {
			t.Errorf("member remove --force %s of the old group: %v, stderr %q; want a refusal saying no such server", nd.ID, err, errOut)
		}
	}

	// Grow it back to three voters.
	for _, id := range []string{"n4", "n5"} {
		nd := r.addNode(id)
		r.start(id)
		if out := r.mustCLI("", "member", "add", id+"@"+nd.Raft, "-s", rn.Client); !strings.Contains(out, id+" added (voter: true)") {
			t.Fatalf("member add %s printed %q", id, out)
		}
	}
	r.waitConverged(60 * time.Second)
	for _, id := range []string{"n4", "n5"} {
		if got := check(r.node(id)); !mapsEqual(got, want) {
			t.Errorf("%s holds %v, the restored node %v", id, got, want)
		}
	}
	st, err = procStatusOf(rn.Client, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range st.Nodes {
		if n.Voter {
			ids = append(ids, n.Id)
		}
	}
	slices.Sort(ids)
	wantIDs := []string{"n4", "n5", rn.ID}
	slices.Sort(wantIDs)
	if !slices.Equal(ids, wantIDs) {
		t.Errorf("voters after growing: %v, want %v", ids, wantIDs)
	}
	// The grown group takes writes with a quorum of the new members.
	r.kill(rn.ID)
	nl := r.waitLeader(rn.ID)
	// Started with the flag again, now that the group has other members,
	// it refuses instead of leaving them out.
	if _, err := os.Stat(filepath.Join(rn.Data, "RECOVERED_AS_NEW_GROUP")); err != nil {
		t.Errorf("the recovery is not recorded in the data directory: %v", err)
	}
	g.SetServerArgs([]string{"--recover-as-new-group"})
	if err := g.Start(ctx, rn.ID); err == nil {
		t.Fatalf("%s started with --recover-as-new-group again after members were added", rn.ID)
	}
	g.SetServerArgs(nil)
	if log := rn.LogSinceStart(); !strings.Contains(log, "recovered as a new group before") {
		t.Errorf("the refused start does not say why:\n%s", procCut(log, 3000))
	}
	// Restarted without the flag, the restored node rejoins as a member.
	r.start(rn.ID)
	r.waitConverged(60 * time.Second)
	if got := check(rn); !mapsEqual(got, want) {
		t.Errorf("%s after its restart holds %v, before %v", rn.ID, got, want)
	}
	if st, err := procStatusOf(rn.Client, 5*time.Second); err != nil || len(st.Nodes) != 3 {
		t.Errorf("status after the restart of %s: %v, %+v; want 3 members", rn.ID, err, st)
	}
	t.Logf("restored %d messages and %d committed offsets; grown to %v; %s leads after %s was killed", len(before), len(committed), ids, nl.ID, rn.ID)
}

func mapsEqual(a, b map[int32][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
