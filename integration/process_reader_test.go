package integration

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strconv"
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
	// Input formats: NUL-delimited bodies with newlines, a key before a
	// separator, hex bodies.
	c.mustCLI("", "topic", "create", "in", "--queues", "1", "-s", s)
	c.mustCLI("k1|line one\nline two\x00k2|second", "produce", "-t", "in", "-D", `\0`, "-K", "|", "-s", s)
	c.mustCLI("00ff0a80\n", "produce", "-t", "in", "--body-format", "hex", "-s", s)
	type keyed struct {
		Key  string `json:"key"`
		Body string `json:"body"`
	}
	got := procJSONLines[keyed](t, c.mustCLI("", "consume", "-t", "in", "--format", "json", "--body-format", "hex", "-s", s))
	want := []keyed{{"k1", hex.EncodeToString([]byte("line one\nline two"))}, {"k2", hex.EncodeToString([]byte("second"))}, {"", "00ff0a80"}}
	if !slices.Equal(got, want) {
		t.Errorf("produced with -D '\\0' -K '|' and --body-format hex, read back %+v, want %+v", got, want)
	}
	if _, errOut, err := c.cli("zz\n", "produce", "-t", "in", "--body-format", "hex", "-s", s); err == nil || !strings.Contains(errOut, "not hex") {
		t.Errorf("produce of a bad hex body: %v %q, want a failure saying so", err, errOut)
	}
	// By time: messages stored after a moment, for a reader and a group.
	mark := time.Now()
	time.Sleep(20 * time.Millisecond)
	c.mustCLI("", "produce", "-t", "rd", "-q", "0", "-s", s, "late")
	if got := read("--offset", "@"+mark.UTC().Format(time.RFC3339Nano)); len(got) != 1 || got[0].Body != base64.StdEncoding.EncodeToString([]byte("late")) {
		t.Errorf("consume --offset @<before the last send>: %+v, want just the last message", got)
	}
	if got := read("--offset", "@-1h"); len(got) != 5 {
		t.Errorf("consume --offset @-1h: %d messages, want all 5", len(got))
	}
	at := "@" + strconv.FormatInt(mark.UnixMilli(), 10)
	if out := c.mustCLI("", "group", "reset", "gt", "-t", "rd", "--to", at, "--dry-run", "-s", s); !strings.Contains(out, "rd queue 0: none -> 2 (dry run") || !strings.Contains(out, "rd queue 1: none -> 2") {
		t.Errorf("group reset --dry-run by time said:\n%s", out)
	}
	if got := read("-g", "gt"); len(got) != 5 {
		t.Errorf("after a dry run group gt reads %d messages, want all 5 (nothing committed)", len(got))
	}
	c.mustCLI("", "group", "reset", "gt", "-t", "rd", "--to", "0", "--queue", "1", "-s", s)
	if got := read("-g", "gt"); len(got) != 2 {
		t.Errorf("after a reset of queue 1 to 0, group gt reads %d messages, want queue 1's 2", len(got))
	}
	// A group commits: its second run sees nothing new.
	if got := read("-g", "g1"); len(got) != 5 {
		t.Fatalf("group g1, first run: %d messages, want 5", len(got))
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
	type groupRow struct {
		Group string `json:"group"`
		Lag   int64  `json:"lag"`
	}
	var groups []groupRow
	if err := json.Unmarshal([]byte(c.mustCLI("", "group", "list", "--json", "-s", s)), &groups); err != nil ||
		!slices.ContainsFunc(groups, func(g groupRow) bool { return g.Group == "g1" && g.Lag >= 0 }) {
		t.Errorf("group list --json: %v %+v, want g1 with its lag in it", err, groups)
	}
	// g1 reads one topic: reset needs no --topic.
	if out, errOut, err := c.cli("", "group", "reset", "g1", "--dry-run", "-s", s); err != nil {
		t.Errorf("group reset g1 --dry-run without --topic: %v\n%s%s", err, out, errOut)
	}
	for _, args := range [][]string{{"-g", "g1", "--offset", "start"}, {"--offset", "soon"}, {"--body-format", "rot13"}, {"--broadcast"}} {
		_, errOut, err := c.cli("", append([]string{"consume", "-t", "rd", "-s", s}, args...)...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(errOut, "--help") {
			t.Errorf("consume %v: %v, stderr %q; want exit 2 with a hint", args, err, errOut)
		}
	}
}
