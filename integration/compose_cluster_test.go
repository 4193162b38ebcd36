package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/composegroup"
)

// composeClusterNodes are the node services of docker-compose.cluster.yml:
// group ga is a1..a3, gb is b1..b3.
var composeClusterNodes = []string{"a1", "a2", "a3", "b1", "b2", "b3"}

// TestComposeCluster: docker-compose.cluster.yml brings up two groups of
// three nodes and two name servers; `cluster health` through the name
// servers sees both healthy; a topic made through one name server spreads
// over both groups; the host CLI produces and consumes through the name
// servers, also after one group's leader container is killed and one name
// server is stopped, and every acknowledged message is read back. Inside
// a node's container the CLI reaches both groups through the name servers'
// in-network listeners (namesrv1:9876;namesrv2:9876): cluster status names
// the in-network client addresses, and one produce spreads over both
// groups.
func TestComposeCluster(t *testing.T) {
	cc := composeClusterUp(t)
	g, env, root, cli, project, nsBoth, ns1, ns2 := cc.g, cc.env, cc.root, cc.cli, cc.project, cc.nsBoth, cc.ns1, cc.ns2
	run, cliRun, start := cc.run, cc.cliRun, cc.start
	cliRun("", "cluster", "health", "--namesrv", nsBoth, "--groups", "2", "--wait", "180s")
	t.Logf("both groups healthy %v after compose up began", time.Since(start).Round(time.Millisecond))

	out := cliRun("", "topic", "create", "orders", "--queues", "4", "--namesrv", fmt.Sprintf("127.0.0.1:%d", ns2))
	if !strings.Contains(out, "2 queues on group ga") || !strings.Contains(out, "2 queues on group gb") {
		t.Fatalf("topic create through the second name server:\n%s", out)
	}
	// Each name server lists both groups' queues (the groups register the
	// topic with each on their own).
	for _, ns := range []int{ns1, ns2} {
		deadline := time.Now().Add(60 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			out, _, err := composeExec(ctx, nil, "", nil, cli, "topic", "describe", "orders", "--namesrv", fmt.Sprintf("127.0.0.1:%d", ns), "--json")
			cancel()
			var rows []struct {
				Group string `json:"group"`
			}
			if err == nil && json.Unmarshal(out, &rows) == nil && len(rows) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("name server 127.0.0.1:%d does not list orders on both groups: %v %s", ns, err, out)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	acked := map[string]string{}
	produce := func(prefix, namesrv string) map[string]int {
		t.Helper()
		var lines []string
		for i := 0; i < 20; i++ {
			lines = append(lines, fmt.Sprintf("%s-%d", prefix, i))
		}
		perGroup := map[string]int{}
		for _, a := range procJSONLines[struct {
			Group  string `json:"group"`
			Queue  int32  `json:"queue"`
			Offset uint64 `json:"offset"`
			Body   string `json:"body"`
		}](t, cliRun(strings.Join(lines, "\n")+"\n", "produce", "-t", "orders", "--namesrv", namesrv, "--batch", "1", "--format", "json")) {
			perGroup[a.Group]++
			acked[fmt.Sprintf("%s/%d/%d", a.Group, a.Queue, a.Offset)] = a.Body
		}
		return perGroup
	}
	if pg := produce("first", fmt.Sprintf("127.0.0.1:%d", ns1)); pg["ga"] == 0 || pg["gb"] == 0 || pg["ga"]+pg["gb"] != 20 {
		t.Fatalf("produce through the first name server: %v, want 20 over ga and gb", pg)
	}

	// Inside the network: a node's container reaches both groups through
	// the name servers' internal listeners, which name the in-network
	// addresses; one produce of 20 arguments spreads over both groups.
	cidOut, err := run(time.Minute, "ps", "-q", "b1")
	cid := strings.TrimSpace(cidOut)
	if err != nil || cid == "" {
		t.Fatalf("container of b1: %v %q", err, cidOut)
	}
	nsInside := "namesrv1:9876;namesrv2:9876"
	inside := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, errOut, err := composeExec(ctx, nil, "", nil, "docker", append([]string{"exec", cid, "/raftmq"}, args...)...)
		if err != nil {
			t.Fatalf("inside b1: raftmq %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, composeTail(out, 2000), composeTail(errOut, 2000))
		}
		return string(out)
	}
	var inSt []struct {
		Group string `json:"group"`
		Nodes []struct {
			ID     string `json:"id"`
			Client string `json:"client_address"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(inside("cluster", "status", "--namesrv", nsInside, "--json")), &inSt); err != nil || len(inSt) != 2 {
		t.Fatalf("cluster status inside b1: %v %+v", err, inSt)
	}
	for _, g := range inSt {
		for _, n := range g.Nodes {
			if n.Client != n.ID+":9000" {
				t.Errorf("cluster status inside b1: node %s of %s at %s, want %s:9000", n.ID, g.Group, n.Client, n.ID)
			}
		}
	}
	var args []string
	for i := 0; i < 20; i++ {
		args = append(args, fmt.Sprintf("inside-%d", i))
	}
	perGroup := map[string]int{}
	for _, a := range procJSONLines[struct {
		Group  string `json:"group"`
		Queue  int32  `json:"queue"`
		Offset uint64 `json:"offset"`
		Body   string `json:"body"`
	}](t, inside(append([]string{"produce", "-t", "orders", "--namesrv", nsInside, "--format", "json"}, args...)...)) {
		perGroup[a.Group]++
		acked[fmt.Sprintf("%s/%d/%d", a.Group, a.Queue, a.Offset)] = a.Body
	}
	if perGroup["ga"] != 10 || perGroup["gb"] != 10 {
		t.Fatalf("one produce of 20 inside b1 through %s: %v, want 10 on each group", nsInside, perGroup)
	}

	// The two-group demo against this cluster: producers through the name
	// servers, each group's leader container killed and started again.
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	dout, derr, err := composeExec(dctx, env, root, nil, cli, "demo", "--groups", "2", "--docker", "--kills", "2",
		"--compose-file", filepath.Join(root, "docker-compose.cluster.yml"), "--compose-project", project, "--namesrv", nsBoth, "--json")
	dcancel()
	var demo struct {
		OK     bool   `json:"ok"`
		Mode   string `json:"mode"`
		Error  string `json:"error"`
		Lost   int    `json:"lost"`
		Groups []struct {
			Name          string    `json:"name"`
			Acknowledged  int       `json:"acknowledged"`
			Consumed      int       `json:"consumed"`
			WindowMs      []float64 `json:"window_ms"`
			SurvivorGapMs []float64 `json:"survivor_gap_ms"`
		} `json:"groups"`
	}
	if jerr := json.Unmarshal(dout, &demo); jerr != nil || err != nil || !demo.OK || demo.Mode != "docker" || len(demo.Groups) != 2 {
		t.Fatalf("demo --groups 2 --docker: %v %v %+v\nstderr: %s", err, jerr, demo, composeTail(derr, 4000))
	}
	for _, g := range demo.Groups {
		if g.Acknowledged == 0 || g.Consumed != g.Acknowledged || len(g.WindowMs) != 1 || len(g.SurvivorGapMs) != 1 {
			t.Fatalf("demo --groups 2 --docker: group %+v\nstderr: %s", g, composeTail(derr, 4000))
		}
		t.Logf("demo --docker: group %s: %d acknowledged, window %v ms, longest gap while the other failed over %v ms", g.Name, g.Acknowledged, g.WindowMs, g.SurvivorGapMs)
	}

	// Kill ga's leader container; stop the first name server.
	var st []struct {
		Group  string `json:"group"`
		Leader string `json:"leader_id"`
	}
	if err := json.Unmarshal([]byte(cliRun("", "cluster", "status", "--namesrv", nsBoth, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	var leader string
	for _, s := range st {
		if s.Group == "ga" {
			leader = s.Leader
		}
	}
	if leader == "" {
		t.Fatalf("no leader of ga in %+v", st)
	}
	kctx, kcancel := context.WithTimeout(context.Background(), time.Minute)
	if out, err := g.Kill(kctx, leader); err != nil {
		t.Fatalf("kill %s: %v\n%s", leader, err, out)
	}
	kcancel()
	if out, err := run(time.Minute, "stop", "-t", "2", "namesrv1"); err != nil {
		t.Fatalf("stop namesrv1: %v\n%s", err, out)
	}
	t.Logf("killed ga's leader %s and stopped namesrv1", leader)
	if pg := produce("second", nsBoth); pg["ga"]+pg["gb"] != 20 {
		t.Fatalf("produce after the kill: %v, want 20", pg)
	}

	out = cliRun("", "consume", "-t", "orders", "--namesrv", nsBoth, "--group", "cg", "--format", "json")
	read := map[string]string{}
	for _, m := range procJSONLines[struct {
		Group  string `json:"group"`
		Queue  int32  `json:"queue"`
		Offset uint64 `json:"offset"`
		Body   string `json:"body"`
	}](t, out) {
		read[fmt.Sprintf("%s/%d/%d", m.Group, m.Queue, m.Offset)] = m.Body
	}
	for k, b := range acked {
		if read[k] != b {
			t.Fatalf("acked %s at %s, read %q there; %d acked, %d read:\n%s", b, k, read[k], len(acked), len(read), composeTail([]byte(out), 6000))
		}
	}
	t.Logf("%d acknowledged messages read back through the second name server", len(acked))
}

// composeClusterRun is docker-compose.cluster.yml (with more files layered
// over it) running under a project of its own with free published ports.
type composeClusterRun struct {
	t                  *testing.T
	g                  *composegroup.Group
	env                []string
	root, cli, project string
	nsBoth             string // both name servers' published addresses
	ns1, ns2           int
	start              time.Time // when compose up began
}

// composeClusterUp builds the image and brings the cluster up with more
// compose files layered over docker-compose.cluster.yml; its removal
// (volumes too) is registered with t.Cleanup, with the logs when t failed.
func composeClusterUp(t *testing.T, more ...string) *composeClusterRun {
	t.Helper()
	composeRequire(t)
	root := composeRepoRoot(t)
	cli, image := composeBuildImage(t, root)
	cmd, _ := composeCommand()
	project := "raftmq-it-cl-" + composeRandomHex(4)
	ports := composeFreePorts(t, 3*len(composeClusterNodes)+2)
	env := append(os.Environ(), "RAFTMQ_IMAGE="+image, "COMPOSE_PROJECT_NAME="+project)
	for i, n := range composeClusterNodes {
		up := strings.ToUpper(n)
		env = append(env, fmt.Sprintf("RAFTMQ_%s_PORT=%d", up, ports[i]),
			fmt.Sprintf("RAFTMQ_%s_HTTP_PORT=%d", up, ports[len(composeClusterNodes)+i]),
			fmt.Sprintf("RAFTMQ_%s_REMOTING_PORT=%d", up, ports[2*len(composeClusterNodes)+i]))
	}
	cc := &composeClusterRun{t: t, root: root, cli: cli, project: project, ns1: ports[3*len(composeClusterNodes)], ns2: ports[3*len(composeClusterNodes)+1]}
	env = append(env, fmt.Sprintf("RAFTMQ_NAMESRV1_PORT=%d", cc.ns1), fmt.Sprintf("RAFTMQ_NAMESRV2_PORT=%d", cc.ns2))
	cc.env, cc.nsBoth = env, fmt.Sprintf("127.0.0.1:%d;127.0.0.1:%d", cc.ns1, cc.ns2)
	var files []string
	for _, f := range more {
		files = append(files, filepath.Join(root, f))
	}
	g, err := composegroup.New(context.Background(), composegroup.Config{Command: cmd, File: filepath.Join(root, "docker-compose.cluster.yml"),
		Files: files, Project: project, Env: env, Dir: root, Services: composeClusterNodes})
	if err != nil {
		t.Fatal(err)
	}
	cc.g = g
	t.Cleanup(func() {
		if t.Failed() {
			if out, err := cc.run(2*time.Minute, "logs", "--no-color", "--tail=60"); err == nil {
				t.Logf("compose logs:\n%s", out)
			}
		}
		if out, err := cc.run(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	cc.start = time.Now()
	if out, err := cc.run(5*time.Minute, "up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	t.Logf("compose up -d took %v", time.Since(cc.start).Round(time.Millisecond))
	return cc
}

// run runs a compose command of the project.
func (cc *composeClusterRun) run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cc.g.RunLong(ctx, args...)
}

// cliRun runs the host CLI with stdin and fails the test when it fails.
func (cc *composeClusterRun) cliRun(stdin string, args ...string) string {
	cc.t.Helper()
	out, errOut, err := cc.cliOut(stdin, args...)
	if err != nil {
		cc.t.Fatalf("raftmq %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, composeTail([]byte(out), 2000), composeTail([]byte(errOut), 2000))
	}
	return out
}

// cliOut runs the host CLI with stdin: stdout, stderr and its error.
func (cc *composeClusterRun) cliOut(stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var in []byte
	if stdin != "" {
		in = []byte(stdin)
	}
	out, errOut, err := composeExec(ctx, nil, "", in, cc.cli, args...)
	return string(out), string(errOut), err
}
