package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestProcessStatusAndHealthSeeADownNode: with every node up, `health --all`
// and `status` exit 0; once a follower is killed, `status` shows it DOWN
// (no stale indexes) and exits 4, as `health --all` does; `health --all
// --wait` returns 0 once it is back.
func TestProcessStatusAndHealthSeeADownNode(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 3)
	s := c.addrs()
	c.mustCLI("", "health", "--all", "--wait", "60s", "-s", s)
	c.mustCLI("", "status", "-s", s)
	leader := c.waitLeader("")
	var down string
	for _, n := range c.all() {
		if n.ID != leader.ID {
			down = n.ID
			break
		}
	}
	c.kill(down)
	exitCode := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			return -1
		}
		return 0
	}
	procWaitFor(t, 60*time.Second, "status to show "+down+" down", func() (bool, string) {
		out, errOut, err := c.cli("", "status", "-s", s, "--json")
		var st struct {
			Nodes []struct {
				ID      string `json:"id"`
				Role    string `json:"role"`
				Applied uint64 `json:"applied_index"`
			} `json:"nodes"`
		}
		if json.Unmarshal([]byte(out), &st) != nil {
			return false, out + errOut
		}
		for _, n := range st.Nodes {
			if n.ID == down {
				return n.Role == "down" && n.Applied == 0 && exitCode(err) == 4 && strings.Contains(errOut, down+" is down"),
					fmt.Sprintf("exit %d: %s%s", exitCode(err), out, errOut)
			}
		}
		return false, out
	})
	out, errOut, err := c.cli("", "status", "-s", s)
	if exitCode(err) != 4 || !strings.Contains(out, "DOWN") {
		t.Errorf("status with %s down: exit %d, want 4 and DOWN in its row:\n%s%s", down, exitCode(err), out, errOut)
	}
	if _, errOut, err := c.cli("", "health", "--all", "-s", s); exitCode(err) != 4 || !strings.Contains(errOut, down) {
		t.Errorf("health --all with %s down: exit %d, stderr %q; want 4 naming it", down, exitCode(err), errOut)
	}
	c.start(down)
	c.mustCLI("", "health", "--all", "--wait", "60s", "-s", s)
}
