package integration

import (
	"sort"
	"strings"
	"testing"
)

func procBodies(t *testing.T, out string) string {
	t.Helper()
	var b []string
	for _, m := range procJSONLines[procCLIMessage](t, out) {
		b = append(b, m.Body)
	}
	sort.Strings(b)
	return strings.Join(b, ",")
}

// TestProcessFiltersBroadcastLifecycle drives the CLI of issue 16's
// filters, broadcast groups, permissions, lookup by key and deletion against
// a group of real processes.
func TestProcessFiltersBroadcastLifecycle(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 3)
	c.waitLeader("")
	s := c.addrs()
	c.mustCLI("", "topic", "create", "shop", "--queues", "2", "-s", s)
	c.mustCLI("a1\na2\n", "produce", "-t", "shop", "--tag", "A", "--key", "cust-1", "-s", s)
	c.mustCLI("b1\n", "produce", "-t", "shop", "--tag", "B", "-p", "amount=50", "-s", s)
	c.mustCLI("c1\n", "produce", "-t", "shop", "--tag", "C", "-p", "amount=500", "--key", "cust-1 vip", "-s", s)

	if got := procBodies(t, c.mustCLI("", "consume", "-t", "shop", "-g", "only-ac", "--tag", "A || C", "--format", "json", "-s", s)); got != "a1,a2,c1" {
		t.Errorf("consume --tag 'A || C': %s", got)
	}
	if got := procBodies(t, c.mustCLI("", "consume", "-t", "shop", "-g", "big", "--sql", "amount > 100", "--format", "json", "-s", s)); got != "c1" {
		t.Errorf("consume --sql 'amount > 100': %s", got)
	}
	_, errOut, err := c.cli("", "consume", "-t", "shop", "-g", "bad", "--sql", "amount >", "-s", s)
	if err == nil || !strings.Contains(errOut, "at position 9: expected a value after '>'") {
		t.Errorf("consume with a bad SQL expression: %v %q", err, errOut)
	}

	// A broadcasting member reads everything, then only what is new.
	if got := procBodies(t, c.mustCLI("", "consume", "-t", "shop", "-g", "fleet", "--broadcast", "--member", "m1", "--format", "json", "-s", s)); got != "a1,a2,b1,c1" {
		t.Errorf("broadcast m1: %s", got)
	}
	if got := procBodies(t, c.mustCLI("", "consume", "-t", "shop", "-g", "fleet", "--broadcast", "--member", "m2", "--format", "json", "-s", s)); got != "a1,a2,b1,c1" {
		t.Errorf("broadcast m2: %s", got)
	}
	c.mustCLI("d1\n", "produce", "-t", "shop", "-s", s)
	if got := procBodies(t, c.mustCLI("", "consume", "-t", "shop", "-g", "fleet", "--broadcast", "--member", "m1", "--format", "json", "-s", s)); got != "d1" {
		t.Errorf("broadcast m1 again: %s, want only d1", got)
	}

	out := c.mustCLI("", "message", "find", "--topic", "shop", "--key", "cust-1", "-s", s)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.Contains(lines[0], "c1") || !strings.Contains(out, "served by n") {
		t.Errorf("message find cust-1:\n%s", out)
	}

	c.mustCLI("", "topic", "update", "shop", "--perm", "4", "-s", s)
	if _, errOut, err := c.cli("x\n", "produce", "-t", "shop", "-s", s); err == nil || !strings.Contains(errOut, `topic "shop" is not writable (perm 4)`) {
		t.Errorf("produce to a read-only topic: %v %q", err, errOut)
	}
	if out := c.mustCLI("", "topic", "list", "-s", s); !strings.Contains(out, "4 (read)") {
		t.Errorf("topic list does not show the permission:\n%s", out)
	}

	c.mustCLI("", "group", "delete", "fleet", "-s", s)
	if _, errOut, err := c.cli("", "group", "delete", "fleet", "-s", s); err == nil || !strings.Contains(errOut, "no committed offsets") {
		t.Errorf("deleting a deleted group: %v %q", err, errOut)
	}
	c.mustCLI("", "topic", "delete", "shop", "-s", s)
	if _, errOut, err := c.cli("", "consume", "-t", "shop", "-g", "late", "-s", s); err == nil || !strings.Contains(errOut, "shop") {
		t.Errorf("consume of a deleted topic: %v %q", err, errOut)
	}
}
