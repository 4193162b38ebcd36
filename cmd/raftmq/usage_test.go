package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

func runCLI(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	err := Run(context.Background(), append([]string{"raftmq"}, args...), strings.NewReader(""), &out, &errb)
	if err != nil {
		code = exitCode(err)
	}
	return out.String(), errb.String(), code
}

func TestUsageErrorsExitTwoWithOneLineHint(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		hint string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`, "raftmq --help"},
		{[]string{"topic", "frob"}, `unknown command "frob"`, "raftmq topic --help"},
		{[]string{"topic", "create", "--bogus", "x"}, "unknown flag --bogus", "raftmq topic create --help"},
		{[]string{"produce", "-t"}, "flag needs an argument", "raftmq produce --help"},
	} {
		out, errOut, code := runCLI(tc.args...)
		if code != 2 {
			t.Errorf("%v: exit code %d, want 2 (stderr %q)", tc.args, code, errOut)
		}
		if out != "" {
			t.Errorf("%v: wrote %d bytes of stdout, want none (help must not flood stdout): %q", tc.args, len(out), out)
		}
		if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, tc.hint) {
			t.Errorf("%v: stderr %q, want it to say %q and point to %q", tc.args, errOut, tc.want, tc.hint)
		}
		if n := strings.Count(errOut, "\n"); n > 2 {
			t.Errorf("%v: %d lines on stderr, want a short message: %q", tc.args, n, errOut)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errOut, code := runCLI(args...)
		if code != 0 || !strings.HasPrefix(out, "raftmq ") || !strings.Contains(out, "commit ") || !strings.Contains(out, "go1.") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want raftmq VERSION (commit C, goX ...)", args, code, out, errOut)
		}
	}
}

func TestGroupingCommandWithoutArgumentsShowsHelp(t *testing.T) {
	out, _, code := runCLI("topic")
	if code != 0 || !strings.Contains(out, "create") {
		t.Errorf("raftmq topic: exit %d, stdout %q; want its help with exit 0", code, out)
	}
}

func TestHelpAnywhereOnTheLine(t *testing.T) {
	for _, args := range [][]string{
		{"help", "topic", "create"},
		{"topic", "create", "--help"},
		{"topic", "create", "foo", "--help"},
		{"topic", "create", "foo", "-h", "--queues", "4"},
	} {
		out, errOut, code := runCLI(args...)
		if code != 0 || !strings.Contains(out, "raftmq topic create - ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want topic create's help", args, code, out, errOut)
		}
	}
	if out, _, code := runCLI("help"); code != 0 || !strings.Contains(out, "COMMANDS:") {
		t.Errorf("raftmq help: exit %d, stdout %q; want the command list", code, out)
	}
}

func TestMisspeltCommandsAndFlagsGetASuggestion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"statsu"}, `did you mean "status"?`},
		{[]string{"topic", "creat"}, `did you mean "create"?`},
		{[]string{"status", "--servrs", "x"}, "did you mean --servers?"},
	} {
		_, errOut, code := runCLI(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if _, errOut, _ := runCLI("zzzzzz"); strings.Contains(errOut, "did you mean") {
		t.Errorf("a word like no command got a suggestion: %q", errOut)
	}
}

func TestCompletionScripts(t *testing.T) {
	for sh, want := range map[string]string{"bash": "complete -o bashdefault", "zsh": "compdef _raftmq raftmq", "fish": "complete -c raftmq"} {
		out, errOut, code := runCLI("completion", sh)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, stderr %q; want a script with %q", sh, code, errOut, want)
		}
	}
	if _, _, code := runCLI("completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
	// What the scripts ask the binary for (urfave/cli reads the word
	// before the last from os.Args).
	defer func(a []string) { os.Args = a }(os.Args)
	os.Args = []string{"raftmq", "topic", "--generate-bash-completion"}
	out, _, code := runCLI("topic", "--generate-bash-completion")
	if code != 0 || !strings.Contains(out, "create") || !strings.Contains(out, "delete") {
		t.Errorf("topic --generate-bash-completion: exit %d, stdout %q; want its subcommands", code, out)
	}
}

func TestMissingRequiredFlagIsAUsageError(t *testing.T) {
	for _, args := range [][]string{{"produce", "x"}, {"consume"}} {
		_, errOut, code := runCLI(args...)
		if code != 2 || !strings.Contains(errOut, "--topic is required") || !strings.Contains(errOut, "--help") {
			t.Errorf("%v: exit %d, stderr %q; want 2, the missing flag and the hint", args, code, errOut)
		}
	}
}

func TestFormatAndJSONAreOneChoice(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, args := range [][]string{{"context", "list", "--json"}, {"context", "list", "--format", "json"}, {"context", "list", "--format=json"}} {
		out, errOut, code := runCLI(args...)
		if code != 0 || !strings.HasPrefix(out, "{") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want JSON", args, code, out, errOut)
		}
	}
	if out, _, code := runCLI("context", "list", "--format", "text"); code != 0 || strings.HasPrefix(out, "{") {
		t.Errorf("context list --format text: exit %d, stdout %q; want the table", code, out)
	}
	if _, errOut, code := runCLI("topic", "list", "--format", "yaml"); code != 2 || !strings.Contains(errOut, "want text or json") {
		t.Errorf("--format yaml: exit %d, stderr %q; want a usage error", code, errOut)
	}
	// The commands that gained JSON take it (the request then fails: no node).
	for _, args := range [][]string{{"topic", "create", "x"}, {"leader", "transfer"}, {"health"}} {
		args = append(args, "--json", "-s", "127.0.0.1:1")
		if args[0] != "health" {
			args = append(args, "--timeout", "1s")
		}
		if _, errOut, code := runCLI(args...); code == 2 {
			t.Errorf("%v: a usage error (%q); want --json accepted", args, errOut)
		}
	}
	// Every command that prints JSON takes both spellings.
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := strings.TrimSpace(path + " " + c.Name)
			names := map[string]bool{}
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					names[n] = true
				}
			}
			if names["json"] != names["format"] {
				t.Errorf("raftmq %s has --json %v but --format %v; want both or neither", p, names["json"], names["format"])
			}
			walk(p, c.Subcommands)
		}
	}
	walk("", commands())
}

func TestEmptyJSONListIsBrackets(t *testing.T) {
	var out bytes.Buffer
	var none []string
	if err := printJSON(&out, none); err != nil || strings.TrimSpace(out.String()) != "[]" {
		t.Errorf("printJSON(nil slice) = %q, %v; want []", out.String(), err)
	}
}

func TestProduceToNoNodeIsFailedNotUnknown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, errOut, code := runCLI("produce", "-t", "x", "-s", addr, "--timeout", "1s", "m1", "m2")
	if code != 1 || !strings.Contains(errOut, "failed, not stored (safe to send again)") || !strings.Contains(errOut, "failed 2, outcome unknown 0") ||
		!strings.Contains(errOut, addr) {
		t.Errorf("produce to a closed port: exit %d, stderr %q; want both failed, not stored, naming %s", code, errOut, addr)
	}
}

func TestLogFormats(t *testing.T) {
	var sink bytes.Buffer
	if err := Run(context.Background(), []string{"raftmq", "namesrv", "--listen", "127.0.0.1:0", "--log-format", "xml"}, strings.NewReader(""), &sink, &sink); err == nil || !strings.Contains(err.Error(), "want text or json") {
		t.Errorf("--log-format xml: %v", err)
	}
	for _, f := range []string{"text", "json"} {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		var out, errb bytes.Buffer
		Run(ctx, []string{"raftmq", "namesrv", "--listen", "127.0.0.1:0", "--log-format", f}, strings.NewReader(""), &out, &errb)
		cancel()
		line, _, _ := strings.Cut(errb.String(), "\n")
		var ts string
		if f == "json" {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("json log line %q: %v", line, err)
			}
			ts, _ = m["@timestamp"].(string)
		} else {
			ts, _, _ = strings.Cut(line, " ")
		}
		if _, err := time.Parse(time.RFC3339, ts); err != nil || !strings.Contains(ts, "T") {
			t.Errorf("%s log: time %q of %q is not RFC 3339 with a zone: %v", f, ts, line, err)
		}
	}
}

func TestStatusNamesOneLeader(t *testing.T) {
	st := &api.StatusResponse{Group: "g", Term: 7, LeaderId: "n1", AnsweredBy: "n1", Nodes: []*api.NodeStatus{
		{Id: "n1", Role: "leader", Term: 7}, {Id: "n2", Role: "leader", Term: 8}, {Id: "n3", Role: "follower", Term: 8}}}
	stale := settleLeader(st)
	if st.LeaderId != "n2" || st.Term != 8 || !stale["n1"] || stale["n2"] || stale["n3"] {
		t.Errorf("leader %s term %d, stale %v; want n2 of term 8, n1 stale", st.LeaderId, st.Term, stale)
	}
}

func TestJSONBodyKeepsBinary(t *testing.T) {
	for _, tc := range []struct {
		format, body, want, enc string
	}{
		{"text", "héllo", "héllo", ""},
		{"text", "\xff\x00\xfe", "/wD+", "base64"},
		{"base64", "hi", "aGk=", "base64"},
		{"hex", "hi", "6869", "hex"},
	} {
		set := flag.NewFlagSet("t", flag.ContinueOnError)
		set.String("body-format", tc.format, "")
		body, enc := jsonBody(cli.NewContext(cli.NewApp(), set, nil), []byte(tc.body))
		if body != tc.want || enc != tc.enc {
			t.Errorf("%s %q: %q %q, want %q %q", tc.format, tc.body, body, enc, tc.want, tc.enc)
		}
	}
}

// An address that accepts connections and never answers (a paused process,
// a blackhole) fails within about --timeout, naming it; before, produce
// waited out --timeout twice.
// TestUnansweredProbeFailsEveryMessageUnsent: a topic probe that got no
// answer in time, whether or not the SDK could tell its attempts never
// reached a node, fails every message as not stored without sending it;
// any answer, even an error, lets the sends go.
func TestUnansweredProbeFailsEveryMessageUnsent(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("%w: %w: %w (last error ...)", client.ErrNotSent, client.ErrNoConnection, context.DeadlineExceeded),
		fmt.Errorf("%w (last error, from 127.0.0.1:1: context deadline exceeded)", context.DeadlineExceeded),
		status.Error(codes.DeadlineExceeded, "context deadline exceeded"),
	} {
		got := unanswered(err)
		if got == nil || client.Classify(got) != client.Failed || !errors.Is(got, client.ErrNoConnection) {
			t.Errorf("probe error %q: messages fail with %v (%v), want failed, not sent", err, got, client.Classify(got))
		}
	}
	for _, err := range []error{nil, status.Error(codes.NotFound, "no topic x"), status.Error(codes.PermissionDenied, "denied")} {
		if got := unanswered(err); got != nil {
			t.Errorf("probe error %v: messages fail unsent with %v, want them sent", err, got)
		}
	}
}

func TestProduceToSilentAddressFailsWithinTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0") // never accepted: the kernel completes connections
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	start := time.Now()
	_, errOut, code := runCLI("produce", "-t", "x", "-s", addr, "--timeout", "3s", "m1", "m2")
	took := time.Since(start)
	if code != 1 || !strings.Contains(errOut, "failed 2, outcome unknown 0") || !strings.Contains(errOut, addr+": accepts connections but answers nothing") {
		t.Errorf("produce to a silent address: exit %d, stderr %q; want both failed, not stored, naming %s and why", code, errOut, addr)
	}
	if took > 6*time.Second {
		t.Errorf("produce to a silent address took %s with --timeout 3s; want about 3s", took)
	}
}
