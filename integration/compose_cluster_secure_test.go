package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestComposeClusterSecure: docker-compose.cluster-secure.yml over
// docker-compose.cluster.yml (`make up-cluster-secure`) brings up two groups
// and two name servers with TLS and authentication enforced, the secrets
// made at first start. With the CA and the admin's secret the host CLI
// sees both groups healthy through the name servers, makes a topic over
// both, produces and reads it back; a plaintext client is told the servers
// may want TLS, an unsigned produce is refused and says why. Inside a node's
// container the CLI reaches both groups through the in-network name servers
// over TLS, signed as admin.
func TestComposeClusterSecure(t *testing.T) {
	cc := composeClusterUp(t, "docker-compose.cluster-secure.yml")
	ca, secret := composeSecrets(t, cc.run)
	admin := []string{"--tls-ca", ca, "--access-key", "admin", "--secret-key-file", secret}
	with := func(args ...string) []string { return append(args, admin...) }

	cc.cliRun("", with("cluster", "health", "--namesrv", cc.nsBoth, "--groups", "2", "--wait", "180s")...)
	t.Logf("both groups healthy over TLS %v after compose up began", time.Since(cc.start).Round(time.Millisecond))

	if out, errOut, err := cc.cliOut("", "cluster", "status", "--namesrv", cc.nsBoth, "--timeout", "3s"); err == nil {
		t.Fatalf("a plaintext cluster status was answered: %s", out)
	} else if !strings.Contains(errOut, "requires TLS") {
		t.Errorf("plaintext cluster status: refused without the TLS hint: %s", errOut)
	}
	out := cc.cliRun("", with("topic", "create", "orders", "--queues", "4", "--namesrv", cc.nsBoth)...)
	if !strings.Contains(out, "2 queues on group ga") || !strings.Contains(out, "2 queues on group gb") {
		t.Fatalf("topic create through the name servers:\n%s", out)
	}
	if out, errOut, err := cc.cliOut("", "produce", "-t", "orders", "--namesrv", cc.nsBoth, "--tls-ca", ca, "--timeout", "5s", "x"); err == nil {
		t.Fatalf("produce without credentials was taken: %s", out)
	} else if !strings.Contains(errOut, "authentication") {
		t.Errorf("produce without credentials: refused without saying why: %s", errOut)
	}

	type ack struct {
		Group  string `json:"group"`
		Queue  int32  `json:"queue"`
		Offset uint64 `json:"offset"`
		Body   string `json:"body"`
	}
	acked := map[string]string{}
	var lines []string
	for i := 0; i < 20; i++ {
		lines = append(lines, fmt.Sprintf("host-%d", i))
	}
	perGroup := map[string]int{}
	for _, a := range procJSONLines[ack](t, cc.cliRun(strings.Join(lines, "\n")+"\n", with("produce", "-t", "orders", "--namesrv", cc.nsBoth, "--batch", "1", "--format", "json")...)) {
		perGroup[a.Group]++
		acked[fmt.Sprintf("%s/%d/%d", a.Group, a.Queue, a.Offset)] = a.Body
	}
	if perGroup["ga"] == 0 || perGroup["gb"] == 0 || perGroup["ga"]+perGroup["gb"] != 20 {
		t.Fatalf("produce through the name servers as admin: %v, want 20 over ga and gb", perGroup)
	}

	// Inside the network: the node's container has the CA and the
	// secrets volume; through the name servers' internal listeners.
	cidOut, err := cc.run(time.Minute, "ps", "-q", "a1")
	cid := strings.TrimSpace(cidOut)
	if err != nil || cid == "" {
		t.Fatalf("container of a1: %v %q", err, cidOut)
	}
	inside := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		args = append(args, "--tls-ca", "/secure/ca.pem", "--access-key", "admin", "--secret-key-file", "/secure/admin.secret")
		out, errOut, err := composeExec(ctx, nil, "", nil, "docker", append([]string{"exec", cid, "/raftmq"}, args...)...)
		if err != nil {
			t.Fatalf("inside a1: raftmq %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, composeTail(out, 2000), composeTail(errOut, 2000))
		}
		return string(out)
	}
	const nsInside = "namesrv1:9876;namesrv2:9876"
	var st []struct {
		Group   string `json:"group"`
		Healthy bool   `json:"healthy"`
	}
	if err := json.Unmarshal([]byte(inside("cluster", "status", "--namesrv", nsInside, "--json")), &st); err != nil || len(st) != 2 || !st[0].Healthy || !st[1].Healthy {
		t.Fatalf("cluster status inside a1: %v %+v", err, st)
	}
	var args []string
	for i := 0; i < 20; i++ {
		args = append(args, fmt.Sprintf("inside-%d", i))
	}
	perGroup = map[string]int{}
	for _, a := range procJSONLines[ack](t, inside(append([]string{"produce", "-t", "orders", "--namesrv", nsInside, "--format", "json"}, args...)...)) {
		perGroup[a.Group]++
		acked[fmt.Sprintf("%s/%d/%d", a.Group, a.Queue, a.Offset)] = a.Body
	}
	if perGroup["ga"] != 10 || perGroup["gb"] != 10 {
		t.Fatalf("one produce of 20 inside a1 through %s: %v, want 10 on each group", nsInside, perGroup)
	}

	read := map[string]string{}
	out = cc.cliRun("", with("consume", "-t", "orders", "--namesrv", cc.nsBoth, "--group", "cg", "--format", "json")...)
	for _, m := range procJSONLines[ack](t, out) {
		read[fmt.Sprintf("%s/%d/%d", m.Group, m.Queue, m.Offset)] = m.Body
	}
	for k, b := range acked {
		if read[k] != b {
			t.Fatalf("acked %s at %s, read %q there; %d acked, %d read:\n%s", b, k, read[k], len(acked), len(read), composeTail([]byte(out), 6000))
		}
	}
	t.Logf("%d acknowledged messages read back over TLS as admin", len(acked))
}
