package election

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParsePeers(t *testing.T) {
	ps, err := ParsePeers(" n1@127.0.0.1:7001, n2@h:7002 ,")
	if err != nil || len(ps) != 2 || ps[1] != (Peer{ID: "n2", Addr: "h:7002"}) {
		t.Fatalf("%v %v", ps, err)
	}
	for _, bad := range []string{"n1", "@h:1", "n1@", "n1@nohostport", "n1@h:1,n1@h:2"} {
		if _, err := ParsePeers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseDialOverrides(t *testing.T) {
	m, err := ParseDialOverrides("n2=127.0.0.1:9,n3=127.0.0.1:10")
	if err != nil || m["n2"] != "127.0.0.1:9" || len(m) != 2 {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := ParseDialOverrides("n2"); err == nil {
		t.Fatal("missing address accepted")
	}
}

func TestValidateNamesTheField(t *testing.T) {
	ok := DefaultConfig()
	ok.ID, ok.BindAddr = "n1", "127.0.0.1:7001"
	ok.Peers = []Peer{{ID: "n1", Addr: "127.0.0.1:7001"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Config){
		"id":                                    func(c *Config) { c.ID = "" },
		"raft address":                          func(c *Config) { c.BindAddr = "nope" },
		"heartbeat-timeout":                     func(c *Config) { c.HeartbeatTimeout = time.Millisecond },
		"election-timeout":                      func(c *Config) { c.ElectionTimeout = c.HeartbeatTimeout / 2 },
		"leader lease":                          func(c *Config) { c.LeaderLeaseTimeout = 2 * c.HeartbeatTimeout },
		"commit-timeout":                        func(c *Config) { c.CommitTimeout = 0 },
		"max-append-entries":                    func(c *Config) { c.MaxAppendEntries = 5000 },
		"is not in it":                          func(c *Config) { c.Peers = []Peer{{ID: "n2", Addr: "h:1"}} },
		"--join with --peers n1@127.0.0.1:7001": func(c *Config) { c.Join = true },
		"--join with --recover-as-new-group":    func(c *Config) { c.Join, c.Peers, c.NewGroup = true, nil, true },
	}
	join := ok
	join.Peers, join.Join = nil, true
	if err := join.Validate(); err != nil {
		t.Errorf("Join alone: %v", err)
	}
	for want, mod := range cases {
		c := ok
		mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

// TestCheckAddrRefusesWhatCannotBeDialed: `member add ID@not-an-address`
// left a member raft could never reach; the address is checked first.
func TestCheckAddrRefusesWhatCannotBeDialed(t *testing.T) {
	ctx := context.Background()
	for _, ok := range []string{"127.0.0.1:7001", "localhost:7001", "[::1]:7001"} {
		if err := CheckAddr(ctx, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"not-an-address":           "HOST:PORT",
		":7001":                    "no host",
		"127.0.0.1:0":              "1 to 65535",
		"127.0.0.1:99999":          "1 to 65535",
		"127.0.0.1:http":           "1 to 65535",
		"no-such-host.invalid:700": "does not resolve",
	} {
		err := CheckAddr(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v, want an error naming the address and %q", bad, err, want)
		}
	}
}
