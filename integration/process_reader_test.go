package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestProcessConsumeAsReader: consume without --group reads everything and
// commits nothing, so a second run sees it all again; --offset positions
// each queue; --body-format base64 carries a binary body through JSON
// unchanged; --offset with --group is a usage error (exit 2).
func TestProcessConsumeAsReader(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 1)
	s := c.addrs()
	c.mustCLI("", "topic", "create", "rd", "--queues", "2", "-s", s)
	if out := c.mustCLI("", "topic", "create", "rd", "--queues", "2", "--if-not-exists", "-s", s); !strings.Contains(out, "topic rd exists with 2 queues") {
		t.Errorf("topic create --if-not-exists of an existing topic said %q", out)
	}
	if out := c.mustCLI("", "topic", "create", "one", "--queues", "1", "-s", s); !strings.Contains(out, "created topic one with 1 queue\n") {
		t.Errorf("topic create --queues 1 said %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	binary := []byte{0, 0xff, '\n', 0xc3, 0x28, '"', '\\', 0x80}
	p := c.client().NewProducer()
	for i, body := range [][]byte{[]byte("a0"), []byte("a1"), []byte("a2"), binary} {
		q := int32(i % 2)
		if _, err := p.Send(ctx, "rd", client.Message{Body: body, Queue: &q}); err != nil {
			t.Fatal(err)
		}
	}
	type line struct {
		Queue  int32  `json:"queue"`
		Offset uint64 `json:"offset"`
		Body   string `json:"body"`
	}
	read := func(args ...string) []line {
		t.Helper()
		return procJSONLines[line](t, c.mustCLI("", append([]string{"consume", "-t", "rd", "--format", "json", "--body-format", "base64", "-s", s}, args...)...))
	}
	for run := 1; run <= 2; run++ {
		got := read()
		if len(got) != 4 {
			t.Fatalf("reader run %d: %d messages, want all 4 every run: %+v", run, len(got), got)
		}
		for _, l := range got {
			b, err := base64.StdEncoding.DecodeString(l.Body)
			if err != nil {
				t.Fatalf("body %q is not base64: %v", l.Body, err)
			}
			if l.Queue == 1 && l.Offset == 1 && string(b) != string(binary) {
				t.Errorf("binary body came back as %x, want %x", b, binary)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--offset", "end"}, 0},
		{[]string{"--offset", "-1"}, 2},
		{[]string{"--offset", "+1", "--queue", "1"}, 1},
		{[]string{"--offset", "1"}, 2},
		{[]string{"--offset", "-9"}, 4},
	} {
		if got := read(tc.args...); len(got) != tc.want {
			t.Errorf("consume %v: %d messages, want %d: %+v", tc.args, len(got), tc.want, got)
		}
	}
	// A group commits: its second run sees nothing new.
	if got := read("-g", "g1"); len(got) != 4 {
		t.Fatalf("group g1, first run: %d messages, want 4", len(got))
	}
	if got := read("-g", "g1"); len(got) != 0 {
		t.Fatalf("group g1, second run: %d messages, want 0 (committed)", len(got))
	}
	// JSON keeps zero values: queue 0 is named, and group list has --json.
	var gd struct {
		Queues []map[string]any `json:"queues"`
	}
	if err := json.Unmarshal([]byte(c.mustCLI("", "group", "describe", "g1", "--json", "-s", s)), &gd); err != nil || len(gd.Queues) != 2 {
		t.Fatalf("group describe --json: %v %+v", err, gd)
	}
	if q, ok := gd.Queues[0]["queue"]; !ok || q != float64(0) {
		t.Errorf("group describe --json: first queue %v, want \"queue\": 0 present", gd.Queues[0])
	}
	var groups []string
	if err := json.Unmarshal([]byte(c.mustCLI("", "group", "list", "--json", "-s", s)), &groups); err != nil || !slices.Contains(groups, "g1") {
		t.Errorf("group list --json: %v %v, want g1 in it", err, groups)
	}
	for _, args := range [][]string{{"-g", "g1", "--offset", "start"}, {"--offset", "soon"}, {"--body-format", "rot13"}, {"--broadcast"}} {
		_, errOut, err := c.cli("", append([]string{"consume", "-t", "rd", "-s", s}, args...)...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(errOut, "--help") {
			t.Errorf("consume %v: %v, stderr %q; want exit 2 with a hint", args, err, errOut)
		}
	}
}
