package main

import (
	"strings"
	"testing"
)

// Bad durability flags are refused with the flag and its value, before
// anything is opened; the variables set them as the flags do.
func TestServerDurabilityFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--durability", "async"}, `--durability: durability "async": want quorum-fsync or quorum-memory`},
		{[]string{"--durability", "quorum-memory", "--sync-interval", "0"}, "--sync-interval 0s: want more than 0"},
		{[]string{"--durability", "quorum-memory", "--sync-bytes", "-1"}, "--sync-bytes -1: want more than 0"},
		{[]string{"--durability", "quorum-memory", "--log-store", "bolt"}, "--durability quorum-memory: needs --log-store wal"},
	} {
		var sink strings.Builder
		err := Run(t.Context(), append([]string{"raftmq", "server", "--id", "n1", "--data", dir}, tc.args...), strings.NewReader(""), &sink, &sink)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	t.Setenv("RAFTMQ_SERVER_DURABILITY", "quorum-memory")
	t.Setenv("RAFTMQ_SERVER_SYNC_INTERVAL", "10ms")
	out, errOut, code := runCLI("server", "--print-config")
	if code != 0 {
		t.Fatalf("print-config: exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{`durability = "quorum-memory"`, `sync-interval = "10ms"`, `sync-bytes = 1048576`} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("print-config lacks %q:\n%s", want, out)
		}
	}
}
