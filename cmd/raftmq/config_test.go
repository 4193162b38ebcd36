package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServerConfigFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "raftmq.toml")
	os.WriteFile(file, []byte("id = \"n9\"\ndata = \"/var/lib/raftmq\"\nheartbeat-timeout = \"400ms\"\ndefault-queues = 8\nmax-delay = \"1h\"\nauto-create-topics = false\n"), 0o600)
	t.Setenv("RAFTMQ_SERVER_MAX_DELAY", "2h")
	out, errOut, code := runCLI("server", "--config", file, "--default-queues", "6", "--print-config")
	if code != 0 {
		t.Fatalf("print-config: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		`id = "n9"`, `data = "/var/lib/raftmq"`, `heartbeat-timeout = "400ms"`, `auto-create-topics = false`,
		`default-queues = 6`,         // the flag wins over the file
		`max-delay = "2h0m0s"`,       // the variable wins over the file
		`election-timeout = "250ms"`, // the default where nothing says otherwise
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("print-config lacks %q:\n%s", want, out)
		}
	}
	// What it prints is a configuration file that gives the same.
	again := filepath.Join(dir, "again.toml")
	os.WriteFile(again, []byte(out), 0o600)
	os.Unsetenv("RAFTMQ_SERVER_MAX_DELAY")
	out2, errOut, code := runCLI("server", "--config", again, "--print-config")
	if code != 0 || out2 != out {
		t.Errorf("printed configuration read back: exit %d, stderr %q, differs:\n%s\n---\n%s", code, errOut, out, out2)
	}

	os.WriteFile(file, []byte("hearbeat-timeout = \"1s\"\n"), 0o600)
	var sink strings.Builder
	err := Run(t.Context(), []string{"raftmq", "server", "--config", file, "--print-config"}, strings.NewReader(""), &sink, &sink)
	if err == nil || !strings.Contains(err.Error(), `unknown setting "hearbeat-timeout" (did you mean "heartbeat-timeout"?)`) {
		t.Errorf("a misspelt setting: %v", err)
	}
}
