package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserAndACLUsageErrors: the user and acl commands refuse what they
// cannot send before dialing anything, exit 2 and say what is wanted; a
// secret never comes from the command line.
func TestUserAndACLUsageErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"user", "add", "u1"}, 2, "--secret-file"},
		{[]string{"user", "add"}, 2, "want exactly one USER"},
		{[]string{"user", "passwd", "u1", "u2"}, 2, "want exactly one USER"},
		{[]string{"user", "add", "u1", "--secret", "s"}, 2, "unknown flag --secret"},
		{[]string{"acl", "grant", "u1", "topic:x"}, 2, "want USER RESOURCE ACTIONS"},
		{[]string{"acl", "revoke"}, 2, "want USER RESOURCE ACTIONS"},
	} {
		_, errOut, code := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d saying %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	var out, errb bytes.Buffer
	err := Run(context.Background(), []string{"raftmq", "user", "add", "u1", "--secret-file", empty, "-s", "127.0.0.1:1"}, strings.NewReader(""), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty secret file: %v, want it refused as empty", err)
	}
}
