package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/localgroup"
)

// TestProcessDev: `raftmq dev` prints an export line whose addresses serve
// a produce and a consume, says when one of its nodes exits by itself, and
// on SIGINT stops its nodes, exits 0 and removes its directory.
func TestProcessDev(t *testing.T) {
	procRequire(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBinary(t), "dev")
	contexts := filepath.Join(t.TempDir(), "contexts.json")
	cmd.Env = append(localgroup.Env(), "RAFTMQ_CONFIG="+contexts)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb lockedBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var servers, dir string
	var rest bytes.Buffer
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "logs and data in "); ok {
			dir = d
		}
		if s, ok := strings.CutPrefix(line, "export RAFTMQ_SERVERS="); ok {
			servers = s
		}
		if strings.HasPrefix(line, "running;") {
			break
		}
	}
	if servers == "" || dir == "" {
		t.Fatalf("no export line or directory before 'running': stderr %s", errb.String())
	}
	go func() { rest.ReadFrom(stdout) }()
	// dev saved its group as the context dev.
	if b, err := os.ReadFile(contexts); err != nil || !strings.Contains(string(b), `"dev"`) || !strings.Contains(string(b), servers) {
		t.Errorf("contexts after dev: %q, %v; want a context dev with %s", b, err, servers)
	}
	c := &procCluster{t: t}
	c.mustCLI("", "produce", "-t", "dev", "-s", servers, "hello")
	if out := c.mustCLI("", "consume", "-t", "dev", "-s", servers); !strings.Contains(out, "hello") {
		t.Errorf("consume through the dev group printed %q", out)
	}
	// One of dev's nodes dies: dev says so, naming it.
	// Its children are listed under the thread that started each.
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cmd.Process.Pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 3 {
		t.Fatalf("dev's node processes: %q", kids)
	}
	victim, _ := strconv.Atoi(kids[0])
	syscall.Kill(victim, syscall.SIGKILL)
	procWaitFor(t, 30*time.Second, "dev to report the node that exited", func() (bool, string) {
		return strings.Contains(errb.String(), "exited (signal: killed)"), errb.String()
	})
	cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dev after SIGINT: %v, stderr %s", err, errb.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dev left %s behind (stat: %v)", dir, err)
	}
}

// TestProcessBenchE2E: `bench e2e` consumes live what it produces: every
// acknowledged message arrives, with an end-to-end latency for each.
func TestProcessBenchE2E(t *testing.T) {
	procRequire(t)
	c := &procCluster{t: t}
	out := c.mustCLI("", "bench", "e2e", "--local", "-d", "2s", "--size", "100", "--json")
	var r struct {
		Produce struct {
			Messages uint64 `json:"messages"`
		} `json:"produce"`
		Consume struct {
			Messages uint64 `json:"messages"`
			EndToEnd struct {
				Count uint64 `json:"count"`
				P50   int64  `json:"p50_ns"`
			} `json:"end_to_end_latency"`
		} `json:"consume"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench e2e --json: %v\n%s", err, out)
	}
	if r.Produce.Messages == 0 || r.Consume.Messages < r.Produce.Messages || r.Consume.EndToEnd.Count != r.Consume.Messages || r.Consume.EndToEnd.P50 <= 0 {
		t.Errorf("bench e2e: produced %d, consumed %d, end-to-end latencies %d (p50 %d ns); want every produced message consumed, each with a latency",
			r.Produce.Messages, r.Consume.Messages, r.Consume.EndToEnd.Count, r.Consume.EndToEnd.P50)
	}
}
