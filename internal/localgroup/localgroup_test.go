package localgroup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/faultproxy"
)

// fakeServer is an executable that prints its arguments, one a line, then
// "args-end", and then sleeps: a stand-in for `raftmq server` that never
// answers.
func fakeServer(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-raftmq")
	script := "#!/bin/sh\nfor a in \"$@\"; do echo \"arg:$a\"; done\necho args-end\nexec sleep 60\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// argsOf waits for the fake server of n to print its arguments and returns
// them as flag -> value ("true" for a flag followed by another flag).
func argsOf(t *testing.T, n *Node) map[string]string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := n.LogSinceStart()
		var args []string
		for _, l := range strings.Split(out, "\n") {
			if a, ok := strings.CutPrefix(l, "arg:"); ok {
				args = append(args, a)
			}
		}
		if strings.Contains(out, "args-end") {
			m := map[string]string{}
			for i := 1; i < len(args); i++ { // args[0] is the command
				if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
					m[args[i]] = args[i+1]
					i++
				} else {
					m[args[i]] = "true"
				}
			}
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no arguments: %q", n.ID, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With PeerLinks, NodeDirs and NoHTTP every node gets the chaos suite's
// layout and one proxy per directed pair for Raft and for the node-to-node
// API, and Wipe makes it start with --join instead of --peers.
func TestGroupPeerLinksArgsAndWipe(t *testing.T) {
	dir := t.TempDir()
	g, err := New(Config{Exe: fakeServer(t), Dir: dir, Nodes: 3, PeerLinks: true, NodeDirs: true, NoHTTP: true,
		ServerArgs: []string{"--log-level", "info"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	n1, n2 := g.Node("n1"), g.Node("n2")
	if n1.Data != filepath.Join(dir, "n1", "data") || n1.Log != filepath.Join(dir, "n1", "server.log") {
		t.Fatalf("layout: data %s log %s", n1.Data, n1.Log)
	}
	if st, err := os.Stat(n1.Data); err != nil || !st.IsDir() {
		t.Fatalf("data directory not made: %v", err)
	}
	if len(g.Links("n1", "n2")) != 2 || len(g.Proxies()) != 12 {
		t.Fatalf("links n1->n2: %d, proxies %d; want 2 and 12", len(g.Links("n1", "n2")), len(g.Proxies()))
	}
	if err := g.Launch("n1"); err != nil {
		t.Fatal(err)
	}
	args := argsOf(t, n1)
	want := map[string]string{"--id": "n1", "--data": n1.Data, "--raft": n1.Raft, "--listen": n1.Listen, "--http": "",
		"--log-level": "info", "--peers": n1.Peers()}
	for k, v := range want {
		if args[k] != v {
			t.Errorf("%s = %q, want %q (args %v)", k, args[k], v, args)
		}
	}
	if _, ok := args["--advertise"]; ok {
		t.Errorf("--advertise with PeerLinks: %v", args)
	}
	raftTo2 := g.Links("n1", "n2")[0].Addr()
	if !strings.Contains(args["--raft-dial"], "n2="+raftTo2) {
		t.Errorf("--raft-dial %q lacks n2=%s", args["--raft-dial"], raftTo2)
	}
	apiTo2 := g.Links("n1", "n2")[1].Addr()
	if !strings.Contains(args["--peer-dial"], n2.Listen+"="+apiTo2) {
		t.Errorf("--peer-dial %q lacks %s=%s", args["--peer-dial"], n2.Listen, apiTo2)
	}

	if err := g.Wipe("n1"); err == nil {
		t.Fatal("wiped a running node")
	}
	if _, err := g.Kill("n1"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(n1.Data, "state"), []byte("x"), 0o644)
	if err := g.Wipe("n1"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(n1.Data); len(ents) != 0 {
		t.Fatalf("wipe left %v", ents)
	}
	if err := g.Launch("n1"); err != nil {
		t.Fatal(err)
	}
	if args := argsOf(t, n1); args["--peers"] != "" || args["--id"] != "n1" || args["--join"] != "true" {
		t.Fatalf("after a wipe: %v, want --join and no --peers", args)
	}
}

// A Partitionable group proxies every client connection (--advertise)
// and Cut blackholes a node's links both ways.
func TestGroupCut(t *testing.T) {
	g, err := New(Config{Exe: fakeServer(t), Dir: t.TempDir(), Nodes: 2, Partitionable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Launch("n1"); err != nil {
		t.Fatal(err)
	}
	n1 := g.Node("n1")
	if args := argsOf(t, n1); args["--advertise"] != n1.Client || n1.Client == n1.Listen {
		t.Fatalf("--advertise %q, client %s, listen %s", args["--advertise"], n1.Client, n1.Listen)
	}
	if err := g.Cut("n1"); err != nil {
		t.Fatal(err)
	}
	if !g.IsCut("n1") {
		t.Fatal("n1 not cut")
	}
	for _, p := range append(g.Links("n1", "n2"), g.Links("n2", "n1")...) {
		if m, _, _ := p.State(); m != faultproxy.Blackhole {
			t.Errorf("%s: %s while n1 is cut", p.Name, m)
		}
	}
	if err := g.Heal("n1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range g.Proxies() {
		if m, _, _ := p.State(); m != faultproxy.Pass {
			t.Errorf("%s: %s after heal", p.Name, m)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, _, err := g.Leader(ctx); err == nil {
		t.Error("a leader among servers that never answer")
	}
}
