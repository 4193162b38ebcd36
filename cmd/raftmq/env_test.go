package main

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestEnvScoping: the server's flags read RAFTMQ_SERVER_<FLAG>, the shared
// connection flags RAFTMQ_<FLAG> everywhere, and a client command's other
// flags no variable (RAFTMQ_GROUP must not reach the server or consume).
func TestEnvScoping(t *testing.T) {
	cmds := map[string]*cli.Command{}
	for _, c := range []*cli.Command{serverCommand(), consumeCommand(), benchCommand()} {
		addEnv(c, envPrefix[c.Name])
		cmds[c.Name] = c
	}
	env := func(cmd *cli.Command, flag string) []string {
		for _, f := range cmd.Flags {
			if f.Names()[0] == flag {
				if e, ok := f.(interface{ GetEnvVars() []string }); ok {
					return e.GetEnvVars()
				}
			}
		}
		t.Fatalf("%s has no flag --%s", cmd.Name, flag)
		return nil
	}
	for _, tc := range []struct {
		cmd, flag string
		want      []string
	}{
		{"server", "data", []string{"RAFTMQ_SERVER_DATA"}},
		{"server", "heartbeat-timeout", []string{"RAFTMQ_SERVER_HEARTBEAT_TIMEOUT"}},
		{"server", "join", []string{"RAFTMQ_SERVER_JOIN"}},
		{"server", "namesrv", []string{"RAFTMQ_NAMESRV"}},
		{"consume", "servers", []string{"RAFTMQ_SERVERS"}},
		{"consume", "group", nil},
		{"consume", "tls-ca", []string{"RAFTMQ_TLS_CA"}},
		{"consume", "tls-server-name", []string{"RAFTMQ_TLS_SERVER_NAME"}},
		{"server", "tls-ca", []string{"RAFTMQ_SERVER_TLS_CA"}},
		{"server", "tls-mode", []string{"RAFTMQ_SERVER_TLS_MODE"}},
		{"consume", "topic", nil},
	} {
		if got := env(cmds[tc.cmd], tc.flag); !slices.Equal(got, tc.want) {
			t.Errorf("%s --%s reads %v, want %v", tc.cmd, tc.flag, got, tc.want)
		}
	}
	for _, sc := range cmds["bench"].Subcommands {
		for _, f := range sc.Flags {
			if e, ok := f.(interface{ GetEnvVars() []string }); ok && f.Names()[0] == "topic" && len(e.GetEnvVars()) > 0 {
				t.Errorf("bench %s --topic reads %v: a variable set for another command would send load to a real topic", sc.Name, e.GetEnvVars())
			}
		}
	}
}

// TestNamesrvEnv: the name server's own TLS flags read RAFTMQ_NAMESRV_TLS_*,
// not the clients' RAFTMQ_TLS_* (which its routes subcommand reads), so a
// container can set both.
func TestNamesrvEnv(t *testing.T) {
	c := namesrvCommand()
	addEnv(c, envPrefix[c.Name])
	want := map[string]string{"tls-mode": "RAFTMQ_NAMESRV_TLS_MODE", "tls-ca": "RAFTMQ_NAMESRV_TLS_CA", "auth": "RAFTMQ_NAMESRV_AUTH",
		"auth-key-file": "RAFTMQ_NAMESRV_AUTH_KEY_FILE"}
	for _, f := range c.Flags {
		if w, ok := want[f.Names()[0]]; ok {
			if got := f.(interface{ GetEnvVars() []string }).GetEnvVars(); !slices.Equal(got, []string{w}) {
				t.Errorf("namesrv --%s reads %v, want %s", f.Names()[0], got, w)
			}
			delete(want, f.Names()[0])
		}
	}
	for f := range want {
		t.Errorf("namesrv has no --%s", f)
	}
	for _, f := range c.Subcommands[0].Flags {
		if f.Names()[0] == "tls-ca" {
			if got := f.(interface{ GetEnvVars() []string }).GetEnvVars(); !slices.Equal(got, []string{"RAFTMQ_TLS_CA"}) {
				t.Errorf("namesrv routes --tls-ca reads %v", got)
			}
		}
	}
}
