package mq

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCallCredential(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	v := SignCall("u1", []byte("s"), "/raftmq.v1.Broker/Produce", now)
	c, err := ParseCallCredential(v)
	if err != nil {
		t.Fatal(err)
	}
	if c.AccessKey != "u1" || c.UnixMilli != now.UnixMilli() || len(c.Nonce) != 16 {
		t.Fatalf("parsed %+v", c)
	}
	if !c.Verify([]byte("s"), "/raftmq.v1.Broker/Produce") || c.Verify([]byte("t"), "/raftmq.v1.Broker/Produce") || c.Verify([]byte("s"), "/raftmq.v1.Broker/Pull") {
		t.Fatal("verify: binds neither secret nor method")
	}
	// Changing any signed field breaks the signature.
	for _, m := range []func(*CallCredential){
		func(c *CallCredential) { c.AccessKey = "u2" },
		func(c *CallCredential) { c.UnixMilli++ },
		func(c *CallCredential) { c.Nonce = strings.Repeat("0", 16) },
	} {
		x := c
		m(&x)
		if x.Verify([]byte("s"), "/raftmq.v1.Broker/Produce") {
			t.Errorf("changed credential %+v verifies", x)
		}
	}
	if !c.Fresh(now.Add(CallWindow)) || c.Fresh(now.Add(CallWindow+time.Millisecond)) || !c.Fresh(now.Add(-CallWindow)) || c.Fresh(now.Add(-CallWindow-time.Millisecond)) {
		t.Fatal("window")
	}
	first, second := SignCall("u1", []byte("s"), "/m", now), SignCall("u1", []byte("s"), "/m", now)
	if first == second {
		t.Fatal("two credentials of the same millisecond are equal (no nonce)")
	}
	for _, bad := range []string{"", "v1", "v2 u1 1 n s", "v1 u1 x n s", "v1 u1 -1 n s", "v1  1 n s", "v1 u1 1 n s extra", "v1 u1 1 n " + strings.Repeat("s", 300)} {
		if _, err := ParseCallCredential(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseCallCredential: any value parses or is refused without a
// panic, and what parses prints back to the same fields.
func FuzzParseCallCredential(f *testing.F) {
	f.Add(SignCall("u1", []byte("s"), "/raftmq.v1.Broker/Produce", time.UnixMilli(1_700_000_000_000)))
	f.Add(SignCall(NodeAccessKey, []byte("n"), "/raftmq.v1.Peer/NodeState", time.UnixMilli(0)))
	f.Add("v1 u1 1 n s")
	f.Add("v1 u1 99999999999999999999 n s")
	f.Fuzz(func(t *testing.T, v string) {
		c, err := ParseCallCredential(v)
		if err != nil {
			return
		}
		if c.AccessKey == "" || c.Nonce == "" || c.Signature == "" || c.UnixMilli < 0 || strings.Contains(c.AccessKey, " ") {
			t.Fatalf("%q parsed to %+v", v, c)
		}
		again, err := ParseCallCredential(strings.Join([]string{"v1", c.AccessKey, strconv.FormatInt(c.UnixMilli, 10), c.Nonce, c.Signature}, " "))
		if err != nil || again != c {
			t.Fatalf("%q: reparse %+v %v, want %+v", v, again, err, c)
		}
		_ = c.Verify([]byte("k"), "/m")
	})
}

// BenchmarkSignCall is a client's cost of one call's credential.
func BenchmarkSignCall(b *testing.B) {
	b.ReportAllocs()
	now := time.Now()
	for b.Loop() {
		_ = SignCall("u1", []byte("secret-1"), "/raftmq.v1.Broker/Produce", now)
	}
}
