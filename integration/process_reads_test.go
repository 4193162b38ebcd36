package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/route"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// TestProcessDemoReadOffload runs `raftmq demo --json` as a new user would
// (three co-located server processes, default flags): in its read act the
// producers load the leader and a consumer of older messages is moved to
// the followers (a generous share); the follower serving most is killed
// mid-read and its queues come back; nothing is lost or duplicated.
func TestProcessDemoReadOffload(t *testing.T) {
	procRequire(t)
	var res struct {
		Lost       int `json:"lost"`
		Duplicated int `json:"duplicated"`
		Reads      *struct {
			Leader          string         `json:"leader"`
			Consumed        int            `json:"consumed"`
			ServedBy        map[string]int `json:"served_by"`
			FollowerShare   float64        `json:"follower_share"`
			Reasons         map[string]int `json:"reasons"`
			StoppedFollower string         `json:"stopped_follower"`
			ReturnedMs      float64        `json:"returned_ms"`
			Duplicated      int            `json:"duplicated"`
			Gaps            int            `json:"gaps"`
		} `json:"reads"`
	}
	runDemoJSON(t, &res)
	r := res.Reads
	if r == nil {
		t.Fatal("no reads object in the demo's JSON")
	}
	if res.Lost+res.Duplicated+r.Duplicated+r.Gaps != 0 {
		t.Fatalf("lost %d, duplicated %d; read act: %d duplicated, %d skipped", res.Lost, res.Duplicated, r.Duplicated, r.Gaps)
	}
	sum := 0
	for _, n := range r.ServedBy {
		sum += n
	}
	if r.Consumed == 0 || sum != r.Consumed {
		t.Fatalf("read act: consumed %d, served_by %v", r.Consumed, r.ServedBy)
	}
	if r.FollowerShare < 0.3 {
		t.Errorf("a loaded leader kept most readers: follower share %.2f (served %v, reasons %v)", r.FollowerShare, r.ServedBy, r.Reasons)
	}
	if r.StoppedFollower == "" || r.StoppedFollower == r.Leader {
		t.Errorf("stopped follower %q (leader %s)", r.StoppedFollower, r.Leader)
	}
	if r.ReturnedMs < 0 || r.ReturnedMs > 10000 {
		t.Errorf("the stopped follower's readers came back after %.0f ms (-1: never)", r.ReturnedMs)
	}
	for why := range r.Reasons {
		if !knownReason(why) {
			t.Errorf("unknown reason %q", why)
		}
	}
}

// TestProcessConsumeJSONShowsNodeAndReason: `consume --format json` names
// the serving node and the routing reason of every message.
func TestProcessConsumeJSONShowsNodeAndReason(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := cl.NewProducer().Send(ctx, "cj", client.Message{Body: []byte("a")}, client.Message{Body: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	out := c.mustCLI("", "consume", "-s", c.addrs(), "-t", "cj", "-n", "2", "--format", "json")
	type line struct {
		Node   string `json:"node"`
		Reason string `json:"reason"`
	}
	lines := procJSONLines[line](t, out)
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), out)
	}
	for _, l := range lines {
		if l.Node == "" || !knownReason(l.Reason) {
			t.Errorf("line without a node or a known reason: %+v", l)
		}
	}
}

func knownReason(s string) bool {
	for _, r := range route.Reasons() {
		if r.String() == s {
			return true
		}
	}
	return false
}

// runDemoJSON runs `raftmq demo --json` with args as a user would (its
// nodes in a temporary directory), logs its narration and decodes its
// result into res; the test fails when the demo fails or prints no JSON.
func runDemoJSON(t *testing.T, res any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBinary(t), append(append([]string{"demo"}, args...), "--json", "--dir", t.TempDir())...)
	cmd.Env = localgroup.Env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var verdict struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	for _, v := range []any{res, &verdict} {
		if jerr := json.Unmarshal(out.Bytes(), v); jerr != nil {
			t.Fatalf("demo --json: %v (%v)\nstdout: %s\nstderr: %s", jerr, err, procCut(out.String(), 2000), procCut(errb.String(), 4000))
		}
	}
	t.Logf("demo log:\n%s", procCut(errb.String(), 6000))
	if err != nil || !verdict.OK {
		t.Fatalf("demo failed: %v %s", err, verdict.Error)
	}
}
