package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
