package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/localgroup"
)

// TestProcessSecondServerOnADataDirectoryExits: a second `raftmq server`
// started on the data directory of a running node exits non-zero within its
// --lock-timeout, naming the running node's process, and the running node
// goes on serving: the second process must not bind its client port and
// then block, silently, ignoring SIGTERM.
func TestProcessSecondServerOnADataDirectoryExits(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 1)
	nd := c.node("n1")
	ports, err := localgroup.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBinary(t), "server", "--id", "n1", "--data", nd.Data,
		"--raft", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--listen", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--http", "",
		"--lock-timeout", "500ms")
	cmd.Env = localgroup.Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the second server did not exit within %v:\n%s", procCLITimeout, out.String())
	}
	if err == nil {
		t.Fatalf("the second server exited 0:\n%s", out.String())
	}
	want := fmt.Sprintf("data directory %s is in use by process %d (", nd.Data, nd.PID())
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "server --id n1 --data "+nd.Data) {
		t.Fatalf("the second server's output does not say %q and name the command line:\n%s", want, out.String())
	}
	t.Logf("second server exited after %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out.String()))
	if _, err := procStatusOf(nd.Client, 5*time.Second); err != nil {
		t.Fatalf("the running node stopped answering: %v", err)
	}
}
