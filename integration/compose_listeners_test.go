package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestComposeListenersInsideAndOutside: each node has an internal listener
// (nX:9000, the compose network) and an external one (published on the
// host). The CLI inside a follower's container (docker exec), the CLI in
// another container on the network and the CLI on the host all produce, and
// consume inside the container and on the host read everything back: each
// is told the addresses of the listener it connected through, so none
// waits on an address it cannot reach. The name server has both listeners
// too: `namesrv routes` in the network names nX:10911, on the host the
// published ports, and produce and status with --namesrv work from
// another container, inside a node's container and on the host.
func TestComposeListenersInsideAndOutside(t *testing.T) {
	c := composeUp(t)
	st := c.waitHealthy()
	var follower string
	for _, n := range composeNodes {
		if n != st.LeaderID {
			follower = n
			break
		}
	}
	cid := c.containerID(follower)
	docker := func(timeout time.Duration, stdin []byte, args ...string) ([]byte, []byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return composeExec(ctx, nil, "", stdin, "docker", args...)
	}

	// The host is told the published addresses, the container the
	// in-network ones; the nodes register them after they start: poll.
	c.composeWaitStatus("the host told every node's published address", composeWaitTimeout, nil, func(s *composeStatus) bool {
		for _, n := range s.Nodes {
			if n.ClientAddress != c.addrs(n.ID) {
				return false
			}
		}
		return len(s.Nodes) == len(composeNodes) && s.LeaderAddress == c.addrs(s.LeaderID)
	})
	deadline := time.Now().Add(composeWaitTimeout)
	for {
		out, stderr, err := docker(30*time.Second, nil, "exec", cid, "/raftmq", "status", "--json")
		var in composeStatus
		if err == nil && json.Unmarshal(bytes.TrimSpace(out), &in) == nil {
			ok := in.LeaderID != "" && in.LeaderAddress == in.LeaderID+":9000" && len(in.Nodes) == len(composeNodes)
			for _, n := range in.Nodes {
				ok = ok && n.ClientAddress == n.ID+":9000"
			}
			if ok {
				t.Logf("status inside %s: leader %s at %s", follower, in.LeaderID, in.LeaderAddress)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("status inside %s never named the in-network addresses: %v %s %s", follower, err, out, composeTail(stderr, 500))
		}
		time.Sleep(500 * time.Millisecond)
	}

	const topic = "it-listeners"
	prefix := "lis-" + composeRandomHex(3) + "-"
	c.createTopic(topic, 4)
	ledger := newComposeLedger()
	ledger.record(c.composeProduceAll(c.addrs(), topic, composeBodies(prefix, 0, 40)))

	timeoutFlag := []string{}
	if c.produceHasTimeout {
		timeoutFlag = []string{"--timeout", "20s"}
	}
	// Inside the follower's container: its own internal listener, the
	// image's default -s 127.0.0.1:9000. Before the nodes had an internal
	// listener this waited 30 s and failed ("outcome unknown").
	inside := composeBodies(prefix, 1000, 40)
	start := time.Now()
	out, stderr, err := docker(90*time.Second, []byte(strings.Join(inside, "\n")+"\n"),
		append([]string{"exec", "-i", cid, "/raftmq", "produce", "--topic", topic, "--format", "json"}, timeoutFlag...)...)
	r := composeProduceResult{Bodies: inside, Acks: composeParseAcks(out), Err: err, Stderr: composeTail(stderr, 500)}
	ledger.record(r)
	if !r.ok() {
		t.Fatalf("produce inside %s: %d of %d acknowledged, err %v\n%s", follower, len(r.Acks), len(inside), err, r.Stderr)
	}
	t.Logf("produce of %d messages inside %s took %v", len(inside), follower, time.Since(start).Round(time.Millisecond))

	// Another container on the compose network, given the in-network
	// addresses.
	network := c.dockerNetwork(cid)
	other := c.project + "-cli"
	t.Cleanup(func() { docker(30*time.Second, nil, "rm", "-f", other) })
	beside := composeBodies(prefix, 2000, 20)
	out, stderr, err = docker(90*time.Second, []byte(strings.Join(beside, "\n")+"\n"),
		append([]string{"run", "--rm", "-i", "--name", other, "--network", network, "--entrypoint", "/raftmq", c.image,
			"produce", "--topic", topic, "-s", "n1:9000,n2:9000,n3:9000", "--format", "json"}, timeoutFlag...)...)
	r = composeProduceResult{Bodies: beside, Acks: composeParseAcks(out), Err: err, Stderr: composeTail(stderr, 500)}
	ledger.record(r)
	if !r.ok() {
		t.Fatalf("produce from another container on %s: %d of %d acknowledged, err %v\n%s", network, len(r.Acks), len(beside), err, r.Stderr)
	}

	// The name server has an internal and an external listener too: in
	// the network (namesrv:9876) its routes name the nodes' in-network
	// remoting addresses, on the host (the published external listener)
	// their published ones; --namesrv works on both sides.
	routes := func(out []byte) map[string]bool {
		var rs []struct {
			Leader    string            `json:"leader_address"`
			Followers map[string]string `json:"followers"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &rs); err != nil || len(rs) != 1 {
			t.Fatalf("namesrv routes: %v %s", err, out)
		}
		addrs := map[string]bool{rs[0].Leader: true}
		for _, a := range rs[0].Followers {
			addrs[a] = true
		}
		return addrs
	}
	inNet := map[string]bool{"n1:10911": true, "n2:10911": true, "n3:10911": true}
	var got map[string]bool
	deadline = time.Now().Add(composeWaitTimeout)
	for {
		out, stderr, err = docker(30*time.Second, nil, "exec", cid, "/raftmq", "namesrv", "routes", "--namesrv", "namesrv:9876", "--json")
		if err == nil {
			if got = routes(out); fmt.Sprint(got) == fmt.Sprint(inNet) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("routes in the network: %v %v %s", got, err, composeTail(stderr, 300))
		}
		time.Sleep(time.Second)
	}
	out, stderr, err = c.cliRun(30*time.Second, nil, "namesrv", "routes", "--namesrv", fmt.Sprintf("127.0.0.1:%d", c.namesrvPort), "--json")
	if err != nil {
		t.Fatalf("routes on the host: %v %s", err, composeTail(stderr, 300))
	}
	for a := range routes(out) {
		if !strings.HasPrefix(a, "127.0.0.1:") || inNet[a] {
			t.Errorf("the host's name server route names %s, want published addresses only", a)
		}
	}
	viaNS := composeBodies(prefix, 3000, 20)
	out, stderr, err = docker(90*time.Second, []byte(strings.Join(viaNS, "\n")+"\n"),
		append([]string{"run", "--rm", "-i", "--name", other, "--network", network, "--entrypoint", "/raftmq", c.image,
			"produce", "--topic", topic, "--namesrv", "namesrv:9876", "--format", "json"}, timeoutFlag...)...)
	r = composeProduceResult{Bodies: viaNS, Acks: composeParseAcks(out), Err: err, Stderr: composeTail(stderr, 500)}
	ledger.record(r)
	if !r.ok() {
		t.Fatalf("produce --namesrv namesrv:9876 from another container: %d of %d acknowledged, err %v\n%s", len(r.Acks), len(viaNS), err, r.Stderr)
	}
	out, stderr, err = docker(30*time.Second, nil, "exec", cid, "/raftmq", "status", "--namesrv", "namesrv:9876", "--json")
	var nsSt composeStatus
	if err != nil || json.Unmarshal(bytes.TrimSpace(out), &nsSt) != nil || nsSt.LeaderAddress != nsSt.LeaderID+":9000" {
		t.Fatalf("status --namesrv namesrv:9876 inside %s: %v %s %s", follower, err, out, composeTail(stderr, 300))
	}
	hostNS := composeBodies(prefix, 4000, 20)
	out, stderr, err = c.cliRun(90*time.Second, []byte(strings.Join(hostNS, "\n")+"\n"),
		append([]string{"produce", "--topic", topic, "--namesrv", fmt.Sprintf("127.0.0.1:%d", c.namesrvPort), "--format", "json"}, timeoutFlag...)...)
	r = composeProduceResult{Bodies: hostNS, Acks: composeParseAcks(out), Err: err, Stderr: composeTail(stderr, 500)}
	ledger.record(r)
	if !r.ok() {
		t.Fatalf("produce --namesrv on the host: %d of %d acknowledged, err %v\n%s", len(r.Acks), len(hostNS), err, r.Stderr)
	}
	const total = 140

	// Consume inside the container, then on the host: both read all.
	out, stderr, err = docker(2*time.Minute, nil, "exec", cid, "/raftmq", "consume", "--topic", topic, "--group", "it-in-"+composeRandomHex(3),
		"--from", "earliest", "--max", strconv.Itoa(total), "--format", "json")
	if err != nil {
		t.Fatalf("consume inside %s: %v\n%s", follower, err, composeTail(stderr, 500))
	}
	var msgs []composeMessage
	for _, line := range bytes.Split(out, []byte("\n")) {
		var m composeMessage
		if json.Unmarshal(bytes.TrimSpace(line), &m) == nil && m.Topic == topic {
			msgs = append(msgs, m)
		}
	}
	ledger.check(t, prefix, msgs)
	if len(msgs) != total {
		t.Errorf("consumed %d messages inside %s, want %d", len(msgs), follower, total)
	}
	host := c.composeConsume(c.addrs(), topic, total, 2*time.Minute, 10*time.Second, ledger.allAckedSeen(prefix))
	ledger.check(t, prefix, host)
	if len(host) != total {
		t.Errorf("consumed %d messages on the host, want %d", len(host), total)
	}
}

// dockerNetwork is the (one) network the container is attached to.
func (c *composeCluster) dockerNetwork(cid string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, stderr, err := composeExec(ctx, nil, "", nil, "docker", "inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", cid)
	nets := strings.Fields(string(out))
	if err != nil || len(nets) != 1 {
		c.t.Fatalf("networks of %s: %v %q %s", cid, err, out, composeTail(stderr, 300))
	}
	return fmt.Sprint(nets[0])
}
