package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/localgroup"
)

// `raftmq server --single` on an empty data directory begins a group of
// one node, says how to grow it, takes writes, and restarts with its data
// (without --single, the default); a second node started with --join is
// added with member add. --single with --peers is refused.
func TestProcessSingleNodeGroup(t *testing.T) {
	procRequire(t)
	dir := t.TempDir()
	ports, err := localgroup.FreePorts(4)
	if err != nil {
		t.Fatal(err)
	}
	raft1, api1 := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	raft2, api2 := fmt.Sprintf("127.0.0.1:%d", ports[2]), fmt.Sprintf("127.0.0.1:%d", ports[3])
	c := &procCluster{t: t}
	if _, errOut, err := c.cli("", "server", "--id", "n1", "--data", filepath.Join(dir, "x"), "--single", "--peers", "n1@"+raft1); err == nil || !strings.Contains(errOut, "--single") {
		t.Fatalf("--single with --peers: %v, stderr %q; want it refused", err, errOut)
	}

	start := func(p *localgroup.Process, id, raft, api string, extra ...string) string {
		log := filepath.Join(dir, id+".log")
		args := append([]string{"server", "--id", id, "--data", filepath.Join(dir, id), "--raft", raft, "--listen", api, "--http", ""}, extra...)
		if _, err := p.Launch(procBinary(t), args, log); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.SignalAndWait(syscall.SIGKILL, 10*time.Second) })
		return log
	}
	var n1, n2 localgroup.Process
	log1 := start(&n1, "n1", raft1, api1, "--single")
	leaderIs := func(want string, addrs ...string) func() (bool, string) {
		return func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			st, err := localgroup.LeaderStatus(ctx, addrs, time.Second)
			if err != nil {
				return false, err.Error()
			}
			return st.LeaderId == want, "leader " + st.LeaderId
		}
	}
	procWaitFor(t, 60*time.Second, "n1 leading its one-node group", leaderIs("n1", api1))
	b, _ := os.ReadFile(log1)
	if !strings.Contains(string(b), "member add") || !strings.Contains(string(b), "--join") {
		t.Errorf("the log of a one-node group does not say how to grow it:\n%s", procCut(string(b), 3000))
	}
	c.mustCLI("", "produce", "-t", "solo", "-s", api1, "m1")

	// Restarted without --single, it keeps its data.
	if _, err := n1.SignalAndWait(syscall.SIGTERM, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	start(&n1, "n1", raft1, api1)
	procWaitFor(t, 60*time.Second, "n1 leading again", leaderIs("n1", api1))

	// Grown by a node started with --join.
	start(&n2, "n2", raft2, api2, "--join")
	procWaitFor(t, 60*time.Second, "n2 answering", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := localgroup.StatusOnce(ctx, api2, time.Second)
		return err == nil, fmt.Sprint(err)
	})
	c.mustCLI("", "member", "add", "n2@"+raft2, "-s", api1, "--timeout", "60s")
	procWaitFor(t, 60*time.Second, "n2 following n1", leaderIs("n1", api2))
	out := c.mustCLI("", "consume", "-t", "solo", "-s", api2, "--group", "g", "--timeout", "10s")
	if !strings.Contains(out, "m1") {
		t.Fatalf("consume from the grown group: %q, want m1", out)
	}
}
