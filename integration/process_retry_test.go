package integration

import (
	"strings"
	"testing"
)

// TestProcessRetryCLI: the retry flow from the command line on real
// processes: consume --retry-every sends every delivery back, after the
// group's max reconsume times the messages are dead letters that dlq list
// shows with their origin, message show is answered by the follower asked,
// dlq resend puts one back in its topic, and bad input is refused.
func TestProcessRetryCLI(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 3)
	s := c.addrs()
	type ack struct{ ID, Body string }
	acks := procJSONLines[ack](t, c.mustCLI("a\nb\nc\n", "produce", "-s", s, "-t", "shop", "--format", "json"))
	if len(acks) != 3 {
		t.Fatalf("%d acks", len(acks))
	}
	c.mustCLI("", "group", "update", "G", "--max-reconsume", "1", "-s", s)
	if out := c.mustCLI("", "group", "describe", "G", "-s", s); !strings.Contains(out, "max reconsume times 1") {
		t.Fatalf("describe: %s", out)
	}
	type delivery struct {
		Topic, Body, Result string
		ReconsumeTimes      int `json:"reconsume_times"`
	}
	var seen []delivery
	procWaitFor(t, procCLITimeout, "two deliveries of each message", func() (bool, string) {
		out := c.mustCLI("", "consume", "-s", s, "-t", "shop", "-g", "G", "--retry-every", "1", "--retry-delay-level", "1", "--idle", "4s", "--format", "json")
		seen = append(seen, procJSONLines[delivery](t, out)...)
		return len(seen) >= 6, procCut(out, 500)
	})
	for _, d := range seen {
		if d.Topic != "shop" || d.Result != "retry-later" || d.ReconsumeTimes > 1 {
			t.Errorf("delivery %+v", d)
		}
	}
	type dead struct {
		ID, Topic, Reason string
		Reconsumed        int `json:"reconsume_times"`
	}
	var dl []dead
	procWaitFor(t, procCLITimeout, "three dead letters", func() (bool, string) {
		out := c.mustCLI("", "dlq", "list", "G", "-s", s, "--format", "json")
		dl = procJSONLines[dead](t, out)
		return len(dl) == 3, out
	})
	for _, d := range dl {
		if d.Topic != "shop" || d.Reconsumed != 2 || d.Reason == "" {
			t.Errorf("dead letter %+v", d)
		}
	}
	f := c.runningNodes()[0]
	if l, _ := c.leaderNow(); l != nil && l.ID == f.ID {
		f = c.runningNodes()[1]
	}
	type shown struct {
		Topic    string
		ServedBy string `json:"node"`
	}
	procWaitFor(t, procCLITimeout, "the follower to serve message show", func() (bool, string) {
		out := c.mustCLI("", "message", "show", dl[0].ID, "-s", f.Client, "--format", "json")
		sh := procJSONLines[shown](t, out)
		return len(sh) == 1 && sh[0].ServedBy == f.ID && sh[0].Topic == "%DLQ%G", out
	})
	if out := c.mustCLI("", "dlq", "resend", "G", dl[0].ID, "-s", s); !strings.Contains(out, "-> shop") {
		t.Errorf("resend: %s", out)
	}
	for _, bad := range [][]string{
		{"message", "show", "nothex", "-s", s},
		{"message", "show", "00000000FFFFFFFF00000000", "-s", s},
		{"group", "update", "G", "--max-reconsume", "99", "-s", s},
		{"dlq", "resend", "G", acks[0].ID, "-s", s},
	} {
		if _, errOut, err := c.cli("", bad...); err == nil || strings.TrimSpace(errOut) == "" {
			t.Errorf("raftmq %s: exit %v, stderr %q", strings.Join(bad, " "), err, errOut)
		}
	}
}
