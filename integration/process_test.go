package integration

// Tests that run the raftmq binary as real processes on loopback: the CLI
// as a user types it, SIGKILL and SIGSTOP of the leader under load, planned
// leader transfer and the preferred leader, and membership changes. Each
// records what clients were told and checks it afterwards (procVerify).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

type procCLIAck struct {
	Queue  int32  `json:"queue"`
	Offset uint64 `json:"offset"`
	ID     string `json:"id"`
	Body   string `json:"body"`
}

type procCLIMessage struct {
	Topic  string `json:"topic"`
	Queue  int32  `json:"queue"`
	Offset uint64 `json:"offset"`
	ID     string `json:"id"`
	Body   string `json:"body"`
	Node   string `json:"node"`
}

type procCLIStatus struct {
	Group    string `json:"group"`
	Term     uint64 `json:"term"`
	LeaderID string `json:"leader_id"`
	Leader   string `json:"leader_address"`
	Nodes    []struct {
		ID      string `json:"id"`
		Role    string `json:"role"`
		Client  string `json:"client_address"`
		Applied uint64 `json:"applied_index"`
		Healthy bool   `json:"healthy"`
		Voter   bool   `json:"voter"`
	} `json:"nodes"`
}

func (c *procCluster) status(addrs string) procCLIStatus {
	c.t.Helper()
	out, errOut, err := c.cli("", "status", "-s", addrs, "--json")
	if !statusAnswered(err) {
		c.t.Fatalf("raftmq status: %v\n%s", err, errOut)
	}
	var st procCLIStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		c.t.Fatalf("status --json: %v\n%s", err, out)
	}
	return st
}

// statusAnswered: `raftmq status` printed the group's status, healthy (exit
// 0) or not (3: no leader, 4: a member down or not ready).
func statusAnswered(err error) bool {
	var ee *exec.ExitError
	return err == nil || errors.As(err, &ee) && (ee.ExitCode() == 3 || ee.ExitCode() == 4)
}

// procProduceCLI produces lines through the CLI and returns the acks as procAcks.
func procProduceCLI(t *testing.T, c *procCluster, topic, addrs string, lines []string) []procAck {
	t.Helper()
	out := c.mustCLI(strings.Join(lines, "\n")+"\n", "produce", "--topic", topic, "-s", addrs, "--format", "json")
	acks := procJSONLines[procCLIAck](t, out)
	if len(acks) != len(lines) {
		t.Fatalf("produce printed %d acks for %d lines:\n%s", len(acks), len(lines), procCut(out, 2000))
	}
	want := map[string]bool{}
	for _, l := range lines {
		want[l] = true
	}
	var res []procAck
	for _, a := range acks {
		if !want[a.Body] || a.ID == "" {
			t.Fatalf("unexpected ack %+v", a)
		}
		delete(want, a.Body)
		res = append(res, procAck{Body: a.Body, Queue: a.Queue, Offset: a.Offset, ID: a.ID, At: time.Now()})
	}
	return res
}

func procLines(prefix string, from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// TestProcessCLI drives the README's commands against three processes, then
// crashes and restarts a follower, and finally restarts the whole group.
func TestProcessCLI(t *testing.T) {
	procRequire(t)
	start := time.Now()
	c := procStartCluster(t, 3)
	leader := c.waitLeader("")
	var followers []*procNode
	for _, nd := range c.all() {
		if nd.ID != leader.ID {
			followers = append(followers, nd)
		}
	}
	f1, f2 := followers[0], followers[1]
	t.Logf("group up in %v: leader %s, followers %s %s", time.Since(start).Round(time.Millisecond), leader.ID, f1.ID, f2.ID)

	out := c.mustCLI("", "topic", "create", "orders", "--queues", "4", "-s", c.addrs())
	if !strings.Contains(out, "created topic orders with 4 queues") {
		t.Fatalf("topic create printed %q", out)
	}
	if _, errOut, err := c.cli("", "topic", "create", "orders", "--queues", "4", "-s", c.addrs()); err == nil {
		t.Errorf("creating topic orders twice succeeded")
	} else if !strings.Contains(errOut, "orders") {
		t.Errorf("second topic create: unclear error %q", errOut)
	}

	// Produce through a follower (it forwards), consume through the other.
	acks := procProduceCLI(t, c, "orders", f1.Client, procLines("order", 1, 50))
	out = c.mustCLI("", "consume", "--topic", "orders", "--group", "billing", "--from", "earliest", "--format", "json", "-s", f2.Client)
	msgs := procJSONLines[procCLIMessage](t, out)
	if len(msgs) != 50 {
		t.Fatalf("consume printed %d messages, want 50:\n%s", len(msgs), procCut(out, 2000))
	}
	at := map[procLoc]procCLIMessage{}
	for _, m := range msgs {
		if m.Topic != "orders" || m.Node == "" || m.ID == "" {
			t.Errorf("message lacks fields: %+v", m)
		}
		at[procLoc{m.Queue, m.Offset}] = m
	}
	for _, a := range acks {
		if m, ok := at[procLoc{a.Queue, a.Offset}]; !ok || m.Body != a.Body {
			t.Errorf("ack %s at %d:%d: consumed %+v", a.Body, a.Queue, a.Offset, m)
		}
	}
	// The group committed its offsets: nothing new for it.
	if out := c.mustCLI("", "consume", "--topic", "orders", "--group", "billing", "--format", "json", "-s", leader.Client); strings.TrimSpace(out) != "" {
		t.Errorf("billing consumed again after committing:\n%s", procCut(out, 500))
	}

	// Nodes hear from each other a few times a second: wait until the answering
	// node has heard from everyone.
	st := c.status(c.addrs())
	procWaitFor(t, 20*time.Second, "status to show three healthy nodes", func() (bool, string) {
		st = c.status(c.addrs())
		for _, n := range st.Nodes {
			if !n.Healthy || n.Applied == 0 || n.Client == "" {
				return false, fmt.Sprintf("%+v", n)
			}
		}
		return len(st.Nodes) == 3, fmt.Sprintf("%d nodes", len(st.Nodes))
	})
	if st.LeaderID == "" || st.Leader == "" || len(st.Nodes) != 3 {
		t.Fatalf("status: %+v", st)
	}
	leaders := 0
	for _, n := range st.Nodes {
		if !n.Healthy || !n.Voter || n.Applied == 0 || n.Client == "" {
			t.Errorf("status: node %+v", n)
		}
		if n.Role == "leader" {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("status: %d leaders: %+v", leaders, st.Nodes)
	}

	// Crash a follower, write without it, bring it back, write through it.
	pid := c.kill(f1.ID)
	t.Logf("SIGKILL %s (pid %d)", f1.ID, pid)
	acks = append(acks, procProduceCLI(t, c, "orders", c.addrs(leader.ID, f2.ID), procLines("order", 51, 50))...)
	c.start(f1.ID)
	c.waitFollower(f1.ID, 60*time.Second)
	acks = append(acks, procProduceCLI(t, c, "orders", f1.Client, procLines("order", 101, 50))...)
	c.waitConverged(30 * time.Second)
	cl := c.client()
	if n := procVerify(t, c, cl, "orders", procOps("cli", acks)); n != 150 {
		t.Errorf("topic holds %d messages, want 150", n)
	}
	out = c.mustCLI("", "consume", "--topic", "orders", "--group", "audit", "--format", "json", "-s", f1.Client)
	if n := len(procJSONLines[procCLIMessage](t, out)); n != 150 {
		t.Errorf("consume via restarted %s: %d messages, want 150", f1.ID, n)
	}

	// Stop the whole group gracefully and start it again.
	c.stopAll()
	c.startAll()
	c.waitLeader("")
	c.waitConverged(30 * time.Second)
	procVerify(t, c, c.client(), "orders", procOps("cli", acks))
	// billing resumes where it committed (after the first 50).
	out = c.mustCLI("", "consume", "--topic", "orders", "--group", "billing", "--format", "json", "-s", c.addrs())
	if n := len(procJSONLines[procCLIMessage](t, out)); n != 100 {
		t.Errorf("billing after a full restart: %d messages, want the 100 it had not consumed", n)
	}
	t.Logf("TestProcessCLI took %v", time.Since(start).Round(time.Millisecond))
}

// TestProcessKillLeaderRepeatedly SIGKILLs the leader five times under
// continuous load, restarting it each time.
func TestProcessKillLeaderRepeatedly(t *testing.T) {
	procRequire(t)
	start := time.Now()
	c, cl, load := procClusterUnderLoad(t, "kills", 4, 5*time.Millisecond)
	var pauses []time.Duration
	for i := 1; i <= 5; i++ {
		l := c.waitLeader("")
		t0 := time.Now()
		pid := c.kill(l.ID)
		nl := c.waitLeader(l.ID)
		elected := time.Since(t0)
		load.waitAcks(20, 60*time.Second)
		gap := load.gapAfter(t0)
		pauses = append(pauses, gap)
		t.Logf("kill %d: SIGKILL leader %s (pid %d); %s leads (seen after %v); longest write pause %v",
			i, l.ID, pid, nl.ID, elected.Round(time.Millisecond), gap.Round(time.Millisecond))
		c.start(l.ID)
		c.waitFollower(l.ID, 60*time.Second)
	}
	load.waitAcks(20, 30*time.Second)
	load.stop()
	load.checkNoFailures()
	idx := c.waitConverged(30 * time.Second)
	procVerify(t, c, cl, "kills", load.sends())
	t.Logf("write pauses %v; every node applied index %d; took %v", pauses, idx, time.Since(start).Round(time.Millisecond))
}

// TestProcessPauseLeader freezes the leader with SIGSTOP under load: the
// others elect a leader; after SIGCONT the old one rejoins as a follower.
func TestProcessPauseLeader(t *testing.T) {
	procRequire(t)
	start := time.Now()
	c, cl, load := procClusterUnderLoad(t, "pause", 4, 5*time.Millisecond)

	l := c.waitLeader("")
	t0 := time.Now()
	pid := c.pause(l.ID)
	nl := c.waitLeader(l.ID)
	t.Logf("SIGSTOP leader %s (pid %d); %s leads after %v", l.ID, pid, nl.ID, time.Since(t0).Round(time.Millisecond))
	load.waitAcks(50, 60*time.Second)
	t.Logf("writes resumed; longest write pause %v", load.gapAfter(t0).Round(time.Millisecond))
	time.Sleep(500 * time.Millisecond)
	c.resume(l.ID)
	c.waitFollower(l.ID, 60*time.Second)
	t.Logf("%s rejoined as a follower %v after SIGSTOP", l.ID, time.Since(t0).Round(time.Millisecond))
	load.waitAcks(50, 30*time.Second)
	load.stop()
	load.checkNoFailures()
	c.waitConverged(30 * time.Second)
	procVerify(t, c, cl, "pause", load.sends())
	t.Logf("TestProcessPauseLeader took %v", time.Since(start).Round(time.Millisecond))
}

// TestProcessLeaderTransfer moves leadership with the CLI under load, then
// restarts the group with --preferred-leader n1 and checks leadership comes
// back to n1 after n1 is killed and restarted.
func TestProcessLeaderTransfer(t *testing.T) {
	procRequire(t)
	start := time.Now()
	c, cl, load := procClusterUnderLoad(t, "transfer", 4, 2*time.Millisecond)
	for i := 0; i < 2; i++ {
		l := c.waitLeader("")
		var to string
		for _, nd := range c.all() {
			if nd.ID != l.ID {
				to = nd.ID
			}
		}
		t0 := time.Now()
		out := c.mustCLI("", "leader", "transfer", "--to", to, "-s", c.addrs())
		if !strings.Contains(out, "leader is now "+to) {
			t.Fatalf("leader transfer printed %q", out)
		}
		procWaitFor(t, 10*time.Second, "every node to see "+to+" lead", func() (bool, string) {
			nd, st := c.leaderNow()
			if nd == nil || nd.ID != to {
				return false, fmt.Sprintf("leader %v", st)
			}
			return true, ""
		})
		load.waitAcks(100, 30*time.Second)
		t.Logf("transfer %s -> %s: CLI says %q; longest write pause %v", l.ID, to, strings.TrimSpace(out), load.gapAfter(t0).Round(time.Microsecond))
	}
	load.stop()
	load.checkNoFailures()
	sends := load.sends()

	// Preferred leader n1 on every server.
	c.stopAll()
	c.g.AddServerArgs("--preferred-leader", "n1")
	c.startAll()
	waitN1 := func(what string) {
		t0 := time.Now()
		procWaitFor(t, 60*time.Second, "n1 to lead "+what, func() (bool, string) {
			nd, st := c.leaderNow()
			if nd == nil || nd.ID != "n1" {
				return false, fmt.Sprintf("leader %v", st.GetLeaderId())
			}
			return true, ""
		})
		t.Logf("n1 leads %s (after %v)", what, time.Since(t0).Round(time.Millisecond))
	}
	waitN1("after a restart with --preferred-leader n1")
	load2 := procStartLoad(t, cl, "transfer", "b-", 2, 5*time.Millisecond, 20000)
	load2.waitAcks(50, 30*time.Second)
	c.kill("n1")
	nl := c.waitLeader("n1")
	t.Logf("killed n1; %s leads", nl.ID)
	load2.waitAcks(50, 60*time.Second)
	c.start("n1")
	waitN1("again after its restart")
	load2.waitAcks(50, 30*time.Second)
	load2.stop()
	load2.checkNoFailures()
	c.waitConverged(30 * time.Second)
	procVerify(t, c, cl, "transfer", append(sends, load2.sends()...))
	t.Logf("TestProcessLeaderTransfer took %v", time.Since(start).Round(time.Millisecond))
}

// TestProcessMembership adds a fourth node with `member add`, checks it
// becomes a voter holding all data, removes it, and checks that unsafe
// removals are refused without --force.
func TestProcessMembership(t *testing.T) {
	procRequire(t)
	start := time.Now()
	c := procStartCluster(t, 3)
	voters := c.addrs("n1", "n2", "n3")
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, "members", 4, false); err != nil {
		t.Fatal(err)
	}
	load := procStartLoad(t, cl, "members", "", 2, 2*time.Millisecond, 20000)
	load.waitAcks(300, 30*time.Second)

	n4 := c.addNode("n4")
	// A bad address, or one where nothing listens yet, is refused at once
	// and leaves the configuration as it was.
	for addr, want := range map[string]string{"not-an-address": "want HOST:PORT", n4.Raft: "nothing answers at raft address " + n4.Raft} {
		_, errOut, err := c.cli("", "member", "add", "n4@"+addr, "-s", voters, "--timeout", "20s")
		if err == nil || !strings.Contains(errOut, want) {
			t.Fatalf("member add n4@%s: %v, stderr %q, want a refusal saying %q", addr, err, errOut, want)
		}
	}
	if st := c.status(voters); len(st.Nodes) != 3 {
		t.Fatalf("refused member adds changed the members: %+v", st.Nodes)
	}
	c.start("n4")
	out := c.mustCLI("", "member", "add", "n4@"+n4.Raft, "-s", voters)
	if !strings.Contains(out, "n4 added (voter: true)") {
		t.Fatalf("member add printed %q", out)
	}
	st := c.status(voters)
	found := false
	for _, n := range st.Nodes {
		if n.ID == "n4" {
			found = true
			if !n.Voter {
				t.Errorf("status after member add: n4 is not a voter: %+v", n)
			}
		}
	}
	if !found || len(st.Nodes) != 4 {
		t.Fatalf("status after member add: %+v", st.Nodes)
	}
	load.waitAcks(100, 30*time.Second)
	load.stop()
	load.checkNoFailures()
	c.waitConverged(30 * time.Second) // n4 included
	procVerify(t, c, cl, "members", load.sends())

	// Remove n4 (moving leadership away first should it lead).
	if l := c.waitLeader(""); l.ID == "n4" {
		c.mustCLI("", "leader", "transfer", "--to", "n1", "-s", voters)
	}
	out = c.mustCLI("", "member", "remove", "n4", "-s", voters)
	if !strings.Contains(out, "n4 removed") {
		t.Fatalf("member remove printed %q", out)
	}
	procWaitFor(t, 10*time.Second, "status without n4", func() (bool, string) {
		st := c.status(voters)
		for _, n := range st.Nodes {
			if n.ID == "n4" {
				return false, fmt.Sprintf("%+v", st.Nodes)
			}
		}
		return len(st.Nodes) == 3, fmt.Sprintf("%+v", st.Nodes)
	})
	c.kill("n4")

	// Unsafe removals are refused without --force.
	l := c.waitLeader("")
	_, errOut, err := c.cli("", "member", "remove", l.ID, "-s", voters)
	if err == nil {
		t.Fatalf("removing the leader %s without --force succeeded", l.ID)
	}
	if !strings.Contains(errOut, "leader") || !strings.Contains(errOut, "--force") {
		t.Errorf("removing the leader: unclear message %q", errOut)
	}
	var follower string
	for _, nd := range c.runningNodes() {
		if nd.ID != l.ID {
			follower = nd.ID
		}
	}
	_, errOut, err = c.cli("", "member", "remove", follower, "-s", voters)
	if err == nil {
		t.Errorf("removing follower %s (leaving 2 voters) without --force succeeded", follower)
	} else if !strings.Contains(errOut, "--force") {
		t.Errorf("removing a follower leaving 2 voters: unclear message %q", errOut)
	} else {
		t.Logf("refused as it should be: %s", strings.TrimSpace(errOut))
	}
	st = c.status(voters)
	if len(st.Nodes) != 3 {
		t.Errorf("after the refused removals: %d members, want 3: %+v", len(st.Nodes), st.Nodes)
	}
	t.Logf("TestProcessMembership took %v", time.Since(start).Round(time.Millisecond))
}
