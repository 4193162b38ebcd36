package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// Two one-node groups behind a name server, ga with a RocketMQ remoting
// port and gb without (it registers its client API address only), driven
// by the CLI only: one
// produce through the name server spreads its messages over every queue
// of both groups, and the one-group commands (status, health, message,
// group, topic describe, produce, consume, bench) reach the group named by
// --broker-name through the name server.
func TestClusterCLIThroughTheNameServer(t *testing.T) {
	procRequire(t)
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	// ga serves RocketMQ's remoting port; gb has none: its nodes register
	// their client API addresses only.
	groups := map[string]*procCluster{}
	for _, name := range []string{"ga", "gb"} {
		groups[name] = procStartGroup(t, localgroup.Config{Nodes: 1, Remoting: name == "ga", ServerArgs: []string{
			"--broker-name", name, "--cluster", "c1", "--namesrv", ns.Addr(), "--register-period", "1s"}})
	}
	ga, nsa := groups["ga"], ns.Addr()
	ga.mustCLI("", "cluster", "health", "--namesrv", nsa, "--wait", "60s", "--groups", "2")
	out := ga.mustCLI("", "topic", "create", "spread", "--queues", "4", "--namesrv", nsa)
	if !strings.Contains(out, "topic spread: 4 queues, 2 on ga, 2 on gb") {
		t.Fatalf("topic create over the cluster:\n%s", out)
	}

	// namesrv routes lists gb by its client API address; RocketMQ's
	// route of the topic has ga only.
	var routes []struct {
		Group      string `json:"group"`
		Cluster    string `json:"cluster"`
		Leader     string `json:"leader_address"`
		NoRemoting bool   `json:"no_remoting"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "namesrv", "routes", "--namesrv", nsa, "--json")), &routes); err != nil {
		t.Fatal(err)
	}
	gbNode := groups["gb"].all()[0]
	if len(routes) != 2 || routes[0].NoRemoting || routes[0].Leader != ga.all()[0].Remoting ||
		!routes[1].NoRemoting || routes[1].Leader != gbNode.Client || routes[1].Cluster != "c1" {
		t.Fatalf("namesrv routes: %+v; want ga at its remoting address %s, gb (no remoting) at its client address %s", routes, ga.all()[0].Remoting, gbNode.Client)
	}
	rcl := remoting.NewClient()
	defer rcl.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	rd, err := namesrv.FetchRoute(rctx, rcl, nsa, "spread")
	rcancel()
	if err != nil || len(rd.BrokerDatas) != 1 || rd.BrokerDatas[0].BrokerName != "ga" {
		t.Fatalf("RocketMQ route of spread: %+v %v; want ga only (gb serves no remoting)", rd, err)
	}

	// One produce of four arguments: one message on each queue of both groups.
	type ack struct {
		Group  string `json:"group"`
		Queue  int32  `json:"queue"`
		Offset uint64 `json:"offset"`
		ID     string `json:"id"`
		Body   string `json:"body"`
	}
	acks := procJSONLines[ack](t, ga.mustCLI("", "produce", "-t", "spread", "--namesrv", nsa, "--format", "json", "m1", "m2", "m3", "m4"))
	seen := map[string]ack{}
	for _, a := range acks {
		seen[fmt.Sprintf("%s/%d", a.Group, a.Queue)] = a
	}
	for _, q := range []string{"ga/0", "ga/1", "gb/0", "gb/1"} {
		if _, ok := seen[q]; !ok {
			t.Fatalf("produce --namesrv m1..m4 left queue %s empty: %+v", q, acks)
		}
	}

	// status and health of one group; without --broker-name the command
	// names the groups to choose from.
	var st struct {
		Group string `json:"group"`
		Nodes []any  `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "status", "--namesrv", nsa, "--broker-name", "gb", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Group != "gb" || len(st.Nodes) != 1 {
		t.Fatalf("status --broker-name gb: %+v", st)
	}
	_, errOut, err := ga.cli("", "status", "--namesrv", nsa)
	if err == nil || !strings.Contains(errOut, "ga, gb") || !strings.Contains(errOut, "--broker-name") {
		t.Fatalf("status --namesrv of two groups without --broker-name: %v, %q; want a usage error naming ga, gb", err, errOut)
	}
	_, errOut, err = ga.cli("", "status", "--namesrv", nsa, "--broker-name", "gz")
	if err == nil || !strings.Contains(errOut, "gz") {
		t.Fatalf("status of an unregistered group: %v, %q", err, errOut)
	}
	if out := ga.mustCLI("", "health", "--namesrv", nsa, "--broker-name", "gb", "--all"); !strings.HasPrefix(out, "ok: group gb") {
		t.Fatalf("health --all of gb: %q", out)
	}

	// A message by id, in its group.
	gbAck := seen["gb/1"]
	out = ga.mustCLI("", "message", "show", "--namesrv", nsa, "--broker-name", "gb", gbAck.ID)
	if !strings.Contains(out, gbAck.Body) {
		t.Fatalf("message show %s in gb: %s", gbAck.ID, out)
	}
	// ... and without --broker-name: every group is asked (an id is a
	// group's own, so ga may hold a message under it too).
	type shownMsg struct {
		Group string `json:"group"`
		Body  string `json:"body"`
		Topic string `json:"topic"`
	}
	shown := procJSONLines[shownMsg](t, ga.mustCLI("", "message", "show", "--namesrv", nsa, gbAck.ID, "--format", "json"))
	if !slices.Contains(shown, shownMsg{"gb", gbAck.Body, "spread"}) {
		t.Fatalf("message show %s through the name server: %+v, want gb's %q among them", gbAck.ID, shown, gbAck.Body)
	}
	if _, errOut, err := ga.cli("", "message", "show", "--namesrv", nsa, "00000000FFFFFFFF00000000"); err == nil || !strings.Contains(errOut, "no group of 2 groups holds message") {
		t.Fatalf("message show of an id no group holds: %v, %q", err, errOut)
	}
	if _, errOut, err := ga.cli("", "dlq", "show", "cg1", gbAck.ID, "--namesrv", nsa); err == nil || !strings.Contains(errOut, "a dead letter of consumer group cg1") {
		t.Fatalf("dlq show of a message that is no dead letter: %v, %q", err, errOut)
	}

	// produce and consume of one group: --queue pins a queue of gb.
	pinned := procJSONLines[ack](t, ga.mustCLI("", "produce", "-t", "spread", "--namesrv", nsa, "--broker-name", "gb", "-q", "1", "--format", "json", "pinned"))
	if len(pinned) != 1 || pinned[0].Queue != 1 || pinned[0].Offset != gbAck.Offset+1 {
		t.Fatalf("produce --broker-name gb -q 1: %+v, want queue 1 offset %d", pinned, gbAck.Offset+1)
	}
	type msg struct {
		Queue int32  `json:"queue"`
		Body  string `json:"body"`
	}
	got := procJSONLines[msg](t, ga.mustCLI("", "consume", "-t", "spread", "--namesrv", nsa, "--broker-name", "gb", "--queue", "1", "--group", "cg1", "--from", "earliest", "--format", "json"))
	if len(got) != 2 || got[1].Body != "pinned" {
		t.Fatalf("consume gb queue 1: %+v, want its two messages ending with pinned", got)
	}
	if out := ga.mustCLI("", "group", "list", "--namesrv", nsa, "--broker-name", "gb"); !strings.Contains(out, "cg1") {
		t.Fatalf("group list of gb: %q, want cg1", out)
	}
	if out := ga.mustCLI("", "group", "list", "--namesrv", nsa, "--broker-name", "ga"); strings.Contains(out, "cg1") {
		t.Fatalf("group list of ga: %q, cg1 consumed from gb only", out)
	}
	// group list through the name server: cg1 on gb only.
	var gl []struct {
		BrokerName string `json:"broker_name"`
		Group      string `json:"group"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "group", "list", "--namesrv", nsa, "--json")), &gl); err != nil ||
		len(gl) != 1 || gl[0].BrokerName != "gb" || gl[0].Group != "cg1" {
		t.Fatalf("group list --namesrv: %+v (%v), want cg1 on gb only", gl, err)
	}
	// group describe through the name server: every group that knows cg1.
	type described struct {
		BrokerName string `json:"broker_name"`
		Group      string `json:"group"`
		Queues     []struct {
			Queue     int32 `json:"queue"`
			Committed int64 `json:"committed"`
		} `json:"queues"`
	}
	var cg []described
	if err := json.Unmarshal([]byte(ga.mustCLI("", "group", "describe", "cg1", "--namesrv", nsa, "--json")), &cg); err != nil ||
		len(cg) != 1 || cg[0].BrokerName != "gb" || cg[0].Group != "cg1" {
		t.Fatalf("group describe cg1 --namesrv: %+v (%v), want cg1 on gb only", cg, err)
	}
	// group reset through the name server: on every group of the topic; a
	// dry run first changes nothing.
	out = ga.mustCLI("", "group", "reset", "cg1", "--namesrv", nsa, "--to", "earliest", "--dry-run")
	if !strings.Contains(out, "group ga:") || !strings.Contains(out, "group gb:") || !strings.Contains(out, "spread queue 1: 2 -> 0 (dry run") {
		t.Fatalf("group reset --dry-run --namesrv: %q, want both groups and gb's queue 1 from 2 to 0", out)
	}
	ga.mustCLI("", "group", "reset", "cg1", "--namesrv", nsa, "--to", "earliest")
	cg = nil
	if err := json.Unmarshal([]byte(ga.mustCLI("", "group", "describe", "cg1", "--namesrv", nsa, "--json")), &cg); err != nil || len(cg) != 2 {
		t.Fatalf("group describe cg1 --namesrv after the reset: %+v (%v), want ga and gb", cg, err)
	}
	for _, d := range cg {
		for _, q := range d.Queues {
			if q.Committed != 0 {
				t.Errorf("after the reset to earliest: %s queue %d committed %d, want 0", d.BrokerName, q.Queue, q.Committed)
			}
		}
	}
	// group update and delete through the name server: every group.
	if out := ga.mustCLI("", "group", "update", "cg1", "--max-reconsume", "3", "--namesrv", nsa); strings.Count(out, "max reconsume times 3") != 2 {
		t.Fatalf("group update --namesrv: %q, want it set on both groups", out)
	}
	if out := ga.mustCLI("", "group", "delete", "cg1", "--namesrv", nsa); strings.Count(out, "deleted consumer group cg1") != 2 {
		t.Fatalf("group delete --namesrv: %q, want it deleted on both groups", out)
	}
	if out := ga.mustCLI("", "group", "delete", "cg1", "--namesrv", nsa); strings.Count(out, "no consumer group cg1 here") != 2 {
		t.Fatalf("group delete --namesrv of a deleted group: %q, want both groups to say it is not there", out)
	}

	// bench of one group.
	var b struct {
		Messages int64 `json:"messages"`
	}
	out = ga.mustCLI("", "bench", "produce", "--namesrv", nsa, "--broker-name", "ga", "-t", "spread", "-n", "200", "--size", "16", "-P", "1", "--json")
	if err := json.Unmarshal([]byte(out), &b); err != nil || b.Messages != 200 {
		t.Fatalf("bench produce through the name server: %v %s", err, procCut(out, 500))
	}
	var desc []struct {
		Group     string `json:"group"`
		QueueInfo []struct {
			MaxOffset uint64 `json:"max_offset"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "topic", "describe", "spread", "--namesrv", nsa, "--json")), &desc); err != nil {
		t.Fatal(err)
	}
	total := map[string]uint64{}
	for _, d := range desc {
		for _, q := range d.QueueInfo {
			total[d.Group] += q.MaxOffset
		}
	}
	// The bench's 200 (and its warm-up) went to ga; gb kept its 3.
	if total["ga"] < 2+200 || total["gb"] != 3 {
		t.Fatalf("messages per group after the run: %v, want ga at least 202, gb 3", total)
	}

	// message find through the name server: the key's message, in the
	// group it went to.
	ga.mustCLI("", "produce", "-t", "spread", "--namesrv", nsa, "--key", "k7", "keyed")
	type foundMsg struct {
		Group string `json:"group"`
		Body  string `json:"body"`
	}
	var found []foundMsg
	procWaitFor(t, 30*time.Second, "message find --namesrv to find the keyed message", func() (bool, string) {
		found = procJSONLines[foundMsg](t, ga.mustCLI("", "message", "find", "-t", "spread", "-k", "k7", "--namesrv", nsa, "--format", "json"))
		return len(found) == 1, fmt.Sprint(found)
	})
	if found[0].Body != "keyed" || (found[0].Group != "ga" && found[0].Group != "gb") {
		t.Fatalf("message find --namesrv: %+v, want the keyed message with its group", found)
	}

	// dlq list through the name server: every group, none has any.
	if out := ga.mustCLI("", "dlq", "list", "cg1", "--namesrv", nsa); !strings.Contains(out, "group ga:") || !strings.Contains(out, "group gb:") {
		t.Fatalf("dlq list --namesrv: %q, want both groups listed", out)
	}

	// A dead letter through the name server: consumer group dlg gives up
	// on the one message of topic dl, which only gb holds; dlq show and
	// dlq resend find it on gb without --broker-name.
	ga.mustCLI("", "topic", "create", "dl", "--queues", "1", "--namesrv", nsa, "--broker-name", "gb")
	ga.mustCLI("", "group", "update", "dlg", "--max-reconsume", "1", "--namesrv", nsa, "--broker-name", "gb")
	procWaitFor(t, 30*time.Second, "the name server to route dl", func() (bool, string) {
		_, errOut, err := ga.cli("", "produce", "-t", "dl", "--namesrv", nsa, "doomed")
		return err == nil, errOut
	})
	type dead struct {
		ID    string `json:"id"`
		Topic string `json:"topic"`
	}
	var dl []dead
	procWaitFor(t, procCLITimeout, "a dead letter of dlg", func() (bool, string) {
		out := ga.mustCLI("", "consume", "-t", "dl", "-g", "dlg", "--namesrv", nsa, "--broker-name", "gb", "--retry-every", "1", "--retry-delay-level", "1", "--idle", "4s", "--format", "json")
		dl = procJSONLines[dead](t, ga.mustCLI("", "dlq", "list", "dlg", "--namesrv", nsa, "--broker-name", "gb", "--format", "json"))
		return len(dl) == 1, out
	})
	if out := ga.mustCLI("", "dlq", "show", "dlg", dl[0].ID, "--namesrv", nsa); !strings.Contains(out, "group gb:") || !strings.Contains(out, "doomed") {
		t.Fatalf("dlq show --namesrv: %q, want gb's dead letter", out)
	}
	if out := ga.mustCLI("", "dlq", "resend", "dlg", dl[0].ID, "--namesrv", nsa); !strings.Contains(out, "group gb: "+dl[0].ID+" -> dl ") {
		t.Fatalf("dlq resend --namesrv: %q, want it resent to dl on gb", out)
	}

	// topic delete through the name server: on both groups at once.
	out = ga.mustCLI("", "topic", "delete", "spread", "--namesrv", nsa)
	for _, g := range []string{"ga", "gb"} {
		if !strings.Contains(out, "deleted topic spread on group "+g) {
			t.Errorf("topic delete --namesrv: %q, want it deleted on %s", out, g)
		}
	}

	// bench produce through the name server: a topic it creates with 2
	// queues on each group, every message acknowledged, both groups taking
	// a share. bench consume then reads it all from both groups (the 2,000
	// and one warm-up message per producer), one consumer per group, and
	// --purge deletes the topic everywhere.
	var prod struct {
		Queues   int               `json:"queues"`
		Messages uint64            `json:"messages"`
		Errors   uint64            `json:"errors"`
		Groups   map[string]uint64 `json:"groups"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "bench", "produce", "--namesrv", nsa, "-t", "wide", "--queues", "2",
		"--producers", "2", "--window", "8", "--count", "2000", "--size", "64", "--json")), &prod); err != nil {
		t.Fatal(err)
	}
	if prod.Queues != 4 || prod.Messages != 2000 || prod.Errors != 0 || prod.Groups["ga"]+prod.Groups["gb"] != 2000 ||
		prod.Groups["ga"] == 0 || prod.Groups["gb"] == 0 {
		t.Fatalf("bench produce --namesrv: %+v; want 4 queues and 2000 messages acknowledged, by both groups", prod)
	}
	var cons struct {
		Queues    int               `json:"queues"`
		Consumers int               `json:"consumers"`
		Available uint64            `json:"available"`
		Messages  uint64            `json:"messages"`
		Complete  bool              `json:"complete"`
		ServedBy  map[string]uint64 `json:"served_by"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "bench", "consume", "--namesrv", nsa, "-t", "wide", "--consumers", "3",
		"--purge", "--json")), &cons); err != nil {
		t.Fatal(err)
	}
	var fromA, fromB uint64
	for node, n := range cons.ServedBy {
		switch {
		case strings.HasPrefix(node, "ga/"):
			fromA += n
		case strings.HasPrefix(node, "gb/"):
			fromB += n
		}
	}
	if cons.Queues != 4 || cons.Consumers != 2 || cons.Available != 2002 || cons.Messages != 2002 || !cons.Complete ||
		fromA != prod.Groups["ga"]+1 && fromA != prod.Groups["ga"]+2 && fromA != prod.Groups["ga"] || fromA+fromB != 2002 {
		t.Fatalf("bench consume --namesrv: %+v; want the 2002 messages of both groups read by 2 consumers (ga acknowledged %d)", cons, prod.Groups["ga"])
	}
	if out := ga.mustCLI("", "topic", "list", "--namesrv", nsa); strings.Contains(out, "wide") {
		t.Fatalf("bench consume --namesrv --purge left the topic:\n%s", out)
	}

	// bench e2e through the name server: producers over both groups,
	// a live consumer on each, end-to-end latency measured. The consumers
	// also read each producer's warm-up message, which the produce side
	// does not count.
	var e2e struct {
		Produce struct {
			Messages uint64            `json:"messages"`
			Errors   uint64            `json:"errors"`
			Groups   map[string]uint64 `json:"groups"`
		} `json:"produce"`
		Consume struct {
			Consumers int               `json:"consumers"`
			Messages  uint64            `json:"messages"`
			ServedBy  map[string]uint64 `json:"served_by"`
			EndToEnd  *struct {
				Count uint64 `json:"count"`
			} `json:"end_to_end_latency"`
		} `json:"consume"`
	}
	if err := json.Unmarshal([]byte(ga.mustCLI("", "bench", "e2e", "--namesrv", nsa, "-t", "live", "--queues", "2",
		"--producers", "2", "--window", "4", "--size", "64", "--duration", "2s", "--consumers", "2", "--purge", "--json")), &e2e); err != nil {
		t.Fatal(err)
	}
	p, cs := e2e.Produce, e2e.Consume
	if p.Messages == 0 || p.Errors != 0 || p.Groups["ga"] == 0 || p.Groups["gb"] == 0 || cs.Consumers != 2 ||
		cs.Messages < p.Messages*9/10 || cs.Messages > p.Messages+2 || cs.EndToEnd == nil || cs.EndToEnd.Count != cs.Messages {
		t.Fatalf("bench e2e --namesrv: %+v (latencies %+v); want messages acknowledged by both groups and (nearly) all of them read, with their latencies", e2e, cs.EndToEnd)
	}
	for _, g := range []string{"ga/", "gb/"} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(cs.ServedBy)), func(n string) bool { return strings.HasPrefix(n, g) }) {
			t.Fatalf("bench e2e --namesrv: served by %v, want a node of %s", cs.ServedBy, g)
		}
	}
}
