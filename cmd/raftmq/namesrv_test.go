package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

func TestNamesrvRoutes(t *testing.T) {
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	out, _, code := runCLI("namesrv", "routes", "--namesrv", ns.Addr())
	if code != 0 || !strings.Contains(out, "no groups registered") {
		t.Fatalf("empty: exit %d, %q", code, out)
	}
	cl := remoting.NewClient()
	defer cl.Close()
	for _, reg := range []namesrv.Registration{
		{Cluster: "c", Group: "g1", Addr: "127.0.0.1:10911", BrokerID: 0, NodeID: "n1", Term: 3, Topics: map[string]int{"orders": 4}},
		{Cluster: "c", Group: "g1", Addr: "127.0.0.1:10921", BrokerID: 1, NodeID: "n2", Term: 3, Topics: map[string]int{"orders": 4}, WriteVia: true},
	} {
		req, _ := namesrv.RegisterRequest(reg)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cl.Invoke(ctx, ns.Addr(), req)
		cancel()
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("register: %v %+v", err, resp)
		}
	}
	out, _, code = runCLI("namesrv", "routes", "--namesrv", ns.Addr(), "--topic", "orders")
	if code != 0 || !strings.Contains(out, "leader    0: 127.0.0.1:10911 (n1)") || !strings.Contains(out, "follower  1: 127.0.0.1:10921 (n2)") || !strings.Contains(out, "orders(4)") ||
		!strings.Contains(out, "sends also via (write-only brokers): g1~n2 127.0.0.1:10921") {
		t.Fatalf("routes: exit %d\n%s", code, out)
	}
	out, _, code = runCLI("namesrv", "routes", "--namesrv", ns.Addr(), "--json")
	var groups []routeGroup
	if code != 0 || json.Unmarshal([]byte(out), &groups) != nil || len(groups) != 1 || groups[0].Leader != "127.0.0.1:10911" || groups[0].Term != 3 ||
		groups[0].WritePaths["g1~n2"] != "127.0.0.1:10921" {
		t.Fatalf("routes --json: exit %d %q", code, out)
	}
	// Several name servers, as the other commands take them: the first
	// that answers (here the second; nothing listens on the first).
	out, _, code = runCLI("namesrv", "routes", "--namesrv", "127.0.0.1:1;"+ns.Addr(), "--topic", "orders")
	if code != 0 || !strings.Contains(out, "leader    0: 127.0.0.1:10911 (n1)") {
		t.Fatalf("routes --namesrv \"A;B\": exit %d\n%s", code, out)
	}
	if err := runErr("namesrv", "routes", "--namesrv", "127.0.0.1:1;127.0.0.1:2"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:2") {
		t.Fatalf("routes with no name server answering: %v", err)
	}
	if err := runErr("namesrv", "routes", "--namesrv", ns.Addr(), "--topic", "nope"); exitCode(err) != 3 || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing topic: %v", err)
	}
}

func TestServerRemotingFlags(t *testing.T) {
	for _, args := range [][]string{
		{"server", "--id", "n1", "--data", t.TempDir(), "--remoting-advertise", "127.0.0.1:10911"},
		{"server", "--id", "n1", "--data", t.TempDir(), "--remoting-advertise-external", "127.0.0.1:10911"},
		{"server", "--id", "n1", "--data", t.TempDir(), "--remoting", "0.0.0.0:10911"},
		{"server", "--id", "n1", "--data", t.TempDir(), "--remoting", "nocolon"},
	} {
		if err := runErr(args...); err == nil || !strings.Contains(err.Error(), "remoting") {
			t.Errorf("%v: %v, want an error naming the remoting flags", args, err)
		}
	}
}

func runErr(args ...string) error {
	var out, errb strings.Builder
	return Run(context.Background(), append([]string{"raftmq"}, args...), strings.NewReader(""), &out, &errb)
}

// TestServerListenerFlags: an external address needs its listener, and a
// listener on every address needs the address clients are told.
func TestServerListenerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--advertise-external", "127.0.0.1:9101"}, "--listen-external"},
		{[]string{"--listen-external", "0.0.0.0:9100"}, "--advertise-external"},
		{[]string{"--listen-external", "nocolon"}, "--listen-external"},
	} {
		args := append([]string{"server", "--id", "n1", "--data", t.TempDir()}, tc.args...)
		if err := runErr(args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestServerRecoverAsNewGroupFlag: the flag is in server --help, and it is
// refused with --peers and on an empty data directory before any port opens.
func TestServerRecoverAsNewGroupFlag(t *testing.T) {
	out, _, code := runCLI("server", "--help")
	if code != 0 || !strings.Contains(out, "--recover-as-new-group") || !strings.Contains(out, "member add") {
		t.Errorf("server --help (exit %d) does not describe --recover-as-new-group:\n%s", code, out)
	}
	err := runErr("server", "--id", "n1", "--data", t.TempDir(), "--recover-as-new-group", "--peers", "n1@127.0.0.1:7001")
	if err == nil || !strings.Contains(err.Error(), "--recover-as-new-group") || !strings.Contains(err.Error(), "--peers") {
		t.Errorf("with --peers: %v, want a refusal naming both flags", err)
	}
	err = runErr("server", "--id", "n1", "--data", t.TempDir(), "--recover-as-new-group", "--raft", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--http", "")
	if err == nil || !strings.Contains(err.Error(), "nothing to recover") {
		t.Errorf("on an empty data directory: %v, want a refusal saying there is nothing to recover", err)
	}
}

// TestServerJoinFlag: --join is in server --help (and --single is called
// the default), reads RAFTMQ_SERVER_JOIN, and is refused with --peers,
// --single or --recover-as-new-group before any port opens.
func TestServerJoinFlag(t *testing.T) {
	out, _, code := runCLI("server", "--help")
	if code != 0 || !strings.Contains(out, "--join") || !strings.Contains(out, "the default without --peers and --join") {
		t.Errorf("server --help (exit %d) does not describe --join and the default:\n%s", code, out)
	}
	for _, extra := range [][]string{
		{"--peers", "n1@127.0.0.1:7001"},
		{"--single"},
		{"--recover-as-new-group"},
	} {
		args := append([]string{"server", "--id", "n1", "--data", t.TempDir(), "--join"}, extra...)
		err := runErr(args...)
		if err == nil || !strings.Contains(err.Error(), "--join") || !strings.Contains(err.Error(), extra[0]) {
			t.Errorf("--join %s: %v, want a refusal naming both flags", strings.Join(extra, " "), err)
		}
	}
	t.Setenv("RAFTMQ_SERVER_JOIN", "true")
	err := runErr("server", "--id", "n1", "--data", t.TempDir(), "--single")
	if err == nil || !strings.Contains(err.Error(), "--join") {
		t.Errorf("RAFTMQ_SERVER_JOIN=true with --single: %v, want the --join refusal", err)
	}
}
