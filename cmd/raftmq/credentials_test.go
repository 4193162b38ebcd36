package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentialFlags: half a credential is a usage error that names what
// is missing, before any node is called; a context keeps the secret
// file's path, never the secret.
func TestCredentialFlags(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RAFTMQ_CONFIG", filepath.Join(dir, "contexts.json"))
	for _, v := range []string{"RAFTMQ_ACCESS_KEY", "RAFTMQ_SECRET_KEY", "RAFTMQ_SECRET_KEY_FILE"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	secret := filepath.Join(dir, "u1.secret")
	if err := os.WriteFile(secret, []byte("the-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "list", "-s", "127.0.0.1:1", "--access-key", "u1"}, "--access-key u1 needs --secret-key-file FILE (or RAFTMQ_SECRET_KEY)"},
		{[]string{"topic", "list", "-s", "127.0.0.1:1", "--secret-key-file", secret}, "--secret-key-file needs --access-key"},
		{[]string{"topic", "list", "-s", "127.0.0.1:1", "--access-key", "u1", "--secret-key-file", filepath.Join(dir, "missing")}, "secret key file"},
		{[]string{"topic", "list", "-s", "127.0.0.1:1", "--access-key", "u 1", "--secret-key-file", secret}, `access key "u 1"`},
		{[]string{"context", "add", "c", "-s", "127.0.0.1:1", "--access-key", "u1"}, "--access-key and --secret-key-file go together"},
	} {
		var out, errb bytes.Buffer
		err := Run(context.Background(), append([]string{"raftmq"}, tc.args...), strings.NewReader(""), &out, &errb)
		if err == nil || !strings.Contains(errb.String()+err.Error(), tc.want) {
			t.Errorf("%v: %v, stderr %q, want %q", tc.args, err, errb.String(), tc.want)
		}
	}
	if _, errOut, code := runCLI("context", "add", "c", "-s", "127.0.0.1:1", "--access-key", "u1", "--secret-key-file", secret); code != 0 {
		t.Fatalf("context add: %d %s", code, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "contexts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"access_key": "u1"`) || !strings.Contains(string(b), secret) || strings.Contains(string(b), "the-secret") {
		t.Errorf("saved context:\n%s", b)
	}
}
