package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContexts: the current context's servers become -s's default; -s and
// RAFTMQ_SERVERS still win; a damaged file is named, not fatal.
func TestContexts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "contexts.json")
	t.Setenv("RAFTMQ_CONFIG", path)
	t.Setenv("RAFTMQ_SERVERS", "") // restored after the test
	os.Unsetenv("RAFTMQ_SERVERS")
	serversDefault := func() string {
		out, _, _ := runCLI("status", "--help")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "--servers") {
				return l
			}
		}
		return ""
	}
	if l := serversDefault(); !strings.Contains(l, `"127.0.0.1:9001"`) {
		t.Fatalf("without contexts: %q", l)
	}
	if _, errOut, code := runCLI("context", "add", "a", "-s", "127.0.0.1:9101"); code != 0 {
		t.Fatalf("context add: %d %s", code, errOut)
	}
	runCLI("context", "add", "b", "-s", "127.0.0.1:9201")
	if l := serversDefault(); !strings.Contains(l, `"127.0.0.1:9101"`) {
		t.Errorf("first context added is current: -s default %q", l)
	}
	runCLI("context", "use", "b")
	if l := serversDefault(); !strings.Contains(l, `"127.0.0.1:9201"`) {
		t.Errorf("after use b: -s default %q", l)
	}
	if out, _, _ := runCLI("context", "list"); !strings.Contains(out, "*  b") {
		t.Errorf("list does not mark b current:\n%s", out)
	}
	if _, _, code := runCLI("context", "use", "nope"); code != 1 {
		t.Errorf("use of a missing context: exit %d, want 1", code)
	}
	runCLI("context", "remove", "b")
	if l := serversDefault(); !strings.Contains(l, `"127.0.0.1:9001"`) {
		t.Errorf("after removing the current context: -s default %q", l)
	}
	os.WriteFile(path, []byte("{"), 0o644)
	if _, errOut, _ := runCLI("status", "--help"); !strings.Contains(errOut, path) {
		t.Errorf("a damaged contexts file is not named: %q", errOut)
	}
}
