package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/headless"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// consoleView is what the console page shows, read from its DOM.
type consoleView struct {
	Leader      string            `json:"leader"`
	Group       string            `json:"group"`
	Rows        map[string]string `json:"rows"` // node id -> the role it is shown with
	LeaderRow   string            `json:"leaderRow"`
	Timeline    []string          `json:"timeline"` // the leaders of the timeline, newest first ("" no leader)
	Source      string            `json:"source"`
	SourceClass string            `json:"sourceClass"`
	ProduceRate float64           `json:"produceRate"`
}

const readConsole = `(() => {
  const rows = {};
  document.querySelectorAll("#nodes tbody tr").forEach(tr => { rows[tr.id.replace(/^node-/, "")] = tr.dataset.role; });
  const lr = document.querySelector("#nodes tbody tr.leader");
  return {
    leader: document.getElementById("leader").textContent,
    group: document.getElementById("group").textContent,
    rows: rows,
    leaderRow: lr ? lr.id.replace(/^node-/, "") : "",
    timeline: Array.from(document.querySelectorAll("#timeline li")).map(li => li.dataset.leader),
    source: document.getElementById("source").textContent,
    sourceClass: document.getElementById("source").className,
    produceRate: parseFloat(document.getElementById("produce-rate").textContent.replace(/,/g, "")) || 0,
  };
})()`

// TestConsoleInBrowser loads the console of a 3-node group in headless
// Chromium and checks what it shows through the DOM; then it stops the
// leader while the page is open and checks that the page moved to another
// node, says so, and shows the new leader and the change on its timeline.
// Without chromium it fails: the console is tested in a real browser or
// not at all (.ci/run installs Debian's chromium).
func TestConsoleInBrowser(t *testing.T) {
	bin, err := headless.Find()
	if err != nil {
		t.Fatalf("the console's browser test needs Chromium: %v", err)
	}
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.HTTP = freeAddr(t)
		cfg.Broker.HTTPAddr = cfg.HTTP
	})
	l := c.Leader()
	leaderID := c.Config(l).Raft.ID
	// The page switches to the HTTP addresses it learns from Status.
	waitFor(t, 10*time.Second, "every node's HTTP address in status", func() bool {
		st, err := c.Node(l).Broker().Status()
		if err != nil || len(st.Nodes) != 3 {
			return false
		}
		for _, n := range st.Nodes {
			if n.HTTPAddr == "" || !n.Healthy {
				return false
			}
		}
		return true
	})

	var blog bytes.Buffer
	br, err := headless.Start(bin, t.TempDir(), &blog)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opened := time.Now()
	page, err := br.Open(ctx, "http://"+c.Config(l).HTTP+"/", 1280, 800)
	if err != nil {
		t.Fatalf("open the console: %v\n%s", err, blog.String())
	}
	view := func() consoleView {
		t.Helper()
		var v consoleView
		if err := page.Eval(ctx, readConsole, &v); err != nil {
			return consoleView{}
		}
		return v
	}
	var v consoleView
	waitFor(t, 20*time.Second, "the console to show the group", func() bool { v = view(); return len(v.Rows) == 3 })
	t.Logf("the group shown %s after opening the page (browser start-up included)", time.Since(opened).Round(time.Millisecond))
	// What the page itself took: from navigation to the first snapshot on
	// screen, and the bytes it transferred (the stream's excluded: it
	// never ends).
	var perf struct {
		FirstRender float64 `json:"firstRender"`
		Bytes       float64 `json:"bytes"`
		Loaded      float64 `json:"loaded"` // DOMContentLoaded
		Page        float64 `json:"page"`   // the page's response received
	}
	if err := page.Eval(ctx, `({firstRender: performance.getEntriesByName("console-first-render")[0].startTime,
		page: performance.getEntriesByType("navigation")[0].responseEnd,
		loaded: performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd,
		bytes: performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource"))
			.filter(e => !e.name.endsWith("/console/events")).reduce((n, e) => n + e.transferSize, 0)})`, &perf); err != nil {
		t.Fatal(err)
	}
	t.Logf("first render %.0f ms after navigation (page received at %.0f ms, parsed and its script run at %.0f ms); %.0f bytes transferred",
		perf.FirstRender, perf.Page, perf.Loaded, perf.Bytes)
	if perf.Bytes <= 0 || perf.Bytes >= 200<<10 {
		t.Fatalf("the page transferred %.0f bytes; want some, under 200 KB", perf.Bytes)
	}
	// The page shows the group as it is: the leader marked, the others
	// followers, the leader's election on the timeline. On a loaded
	// machine a node may miss a beat or lose an election before the page
	// catches up, so this waits for the page to agree with the nodes.
	shows := func() bool {
		v = view()
		ready := ""
		for i, s := range c.Nodes() {
			if s != nil && s.Node().Ready() {
				ready = c.Config(i).Raft.ID
			}
		}
		if ready == "" || v.Leader != ready || v.LeaderRow != ready || v.Rows[ready] != "leader" ||
			len(v.Timeline) == 0 || v.Timeline[0] != ready {
			return false
		}
		for id, role := range v.Rows {
			if id != ready && role != "follower" {
				return false
			}
		}
		leaderID = ready
		return true
	}
	deadline := time.Now().Add(10 * time.Second)
	for !shows() {
		if time.Now().After(deadline) {
			t.Fatalf("the page does not show the group's leader, its followers and the election within 10 s: %+v", v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if leaderID != c.Config(l).Raft.ID {
		t.Logf("leadership moved to %s before the page showed it (a loaded machine)", leaderID)
	}
	if !strings.Contains(v.Source, c.Config(l).HTTP) || strings.Contains(v.SourceClass, "switched") {
		t.Fatalf("the page does not say it is live from the node it was loaded from: %+v", v)
	}

	// Messages produced on the leader show as its produce rate.
	b := c.Node(l).Broker()
	if _, err := b.CreateTopic(ctx, "orders", 2, false); err != nil {
		t.Fatal(err)
	}
	stopProducing, produced := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { produced <- n }()
		for {
			select {
			case <-stopProducing:
				return
			default:
			}
			msgs := make([]broker.ProduceMessage, 20)
			for i := range msgs {
				msgs[i] = broker.ProduceMessage{Body: []byte("console")}
			}
			if _, err := b.Produce(ctx, broker.ProduceRequest{Topic: "orders", ProducerID: "console", Seq: uint64(n), Messages: msgs}); err != nil {
				if !errors.Is(err, broker.ErrNotLeader) && !errors.Is(err, broker.ErrUnavailable) {
					t.Errorf("produce: %v", err)
				}
				t.Logf("producing stopped: %v", err) // an election on a loaded machine: the rate was seen or the wait below fails
				return
			}
			n++
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitFor(t, 10*time.Second, "the page to show a produce rate", func() bool { v = view(); return v.ProduceRate > 0 })
	screenshot(ctx, t, page, "overview.png")
	close(stopProducing)
	t.Logf("page showed %.1f msg/s produced (%d requests of 20 sent)", v.ProduceRate, <-produced)

	checkTopicsPage(ctx, t, page, b)
	checkGroupsPage(ctx, t, page, b)
	checkMessagesPage(ctx, t, page, b)

	// Messages served by the page's node show in its reads, with the
	// routing suggestions it gave.
	if _, err := b.Pull(ctx, broker.PullRequest{Topic: "orders", Queue: 1, Offset: 0, MaxMessages: 10}); err != nil {
		t.Fatal(err)
	}
	var reads struct {
		Served      float64 `json:"served"`
		Share       float64 `json:"share"`
		Suggestions int     `json:"suggestions"`
	}
	waitFor(t, 20*time.Second, "the overview to show the messages served and the suggestions given", func() bool {
		return page.Eval(ctx, `({served: +document.getElementById("reads").dataset.served || 0, share: +document.getElementById("reads").dataset.share || 0,
			suggestions: document.querySelectorAll("#suggestions tbody tr").length})`, &reads) == nil && reads.Served >= 10 && reads.Suggestions > 0
	})
	t.Logf("overview: %.0f messages served, %.0f%% as follower, %d kinds of suggestion", reads.Served, 100*reads.Share, reads.Suggestions)

	// A follower's reads count in the group's share on the leader's page
	// (heard through the nodes' state exchange).
	f := (l + 1) % c.Size()
	waitFor(t, 20*time.Second, "a follower to serve reads of its own", func() bool {
		res, err := c.Node(f).Broker().Pull(ctx, broker.PullRequest{Topic: "orders", Queue: 1, Offset: 0, MaxMessages: 10})
		return err == nil && !res.ServedByLeader && len(res.Messages) > 0
	})
	var group struct {
		Served float64 `json:"served"`
		Share  float64 `json:"share"`
	}
	waitFor(t, 20*time.Second, "the group's reads to count the follower's", func() bool {
		return page.Eval(ctx, `({served: +document.getElementById("group-reads").dataset.served || 0, share: +document.getElementById("group-reads").dataset.share || 0})`, &group) == nil &&
			group.Served >= reads.Served+1 && group.Share > 0
	})
	t.Logf("overview: the group served %.0f messages, %.0f%% by followers", group.Served, 100*group.Share)
	var rates map[string]string
	waitFor(t, 20*time.Second, "every node's read rate in the nodes table", func() bool {
		rates = map[string]string{}
		if page.Eval(ctx, `Object.fromEntries(Array.from(document.querySelectorAll("#nodes tbody tr")).map(tr => [tr.id, tr.querySelector(".reads-rate").textContent]))`, &rates) != nil || len(rates) != 3 {
			return false
		}
		for _, r := range rates {
			if _, err := strconv.ParseFloat(strings.ReplaceAll(r, ",", ""), 64); err != nil {
				return false
			}
		}
		return true
	})
	t.Logf("overview: reads/s per node %v", rates)

	// Stop the page's node, the leader, under the open page.
	if !c.Node(l).Node().Ready() {
		t.Logf("%s no longer leads (an election on a loaded machine); stopping it all the same", leaderID)
	}
	c.Kill(l)
	stopped := time.Now()
	nl := c.LeaderExcept(l)
	newID := c.Config(nl).Raft.ID
	elected := time.Since(stopped)
	waitFor(t, 20*time.Second, "the page to show the new leader "+newID, func() bool { v = view(); return v.Leader == newID })
	shown := time.Since(stopped)
	t.Logf("stopped %s: %s led after %s; the page showed it after %s", leaderID, newID,
		elected.Round(time.Millisecond), shown.Round(time.Millisecond))
	if shown > elected+2*time.Second {
		t.Fatalf("the page showed the new leader %s after the election, want within 2 s", (shown - elected).Round(time.Millisecond))
	}
	if v.Rows[leaderID] != "down" && v.Rows[leaderID] != "unknown" {
		waitFor(t, 10*time.Second, "the page to show "+leaderID+" down", func() bool {
			v = view()
			return v.Rows[leaderID] == "down" || v.Rows[leaderID] == "unknown"
		})
	}
	if len(v.Timeline) < 2 || v.Timeline[0] != newID || !contains(v.Timeline[1:], leaderID) {
		t.Fatalf("the timeline does not show the change from %s to %s: %+v", leaderID, newID, v)
	}
	if !strings.Contains(v.SourceClass, "switched") || !strings.Contains(v.Source, c.Config(l).HTTP) {
		t.Fatalf("the page does not say it switched away from %s (%s): %+v", leaderID, c.Config(l).HTTP, v)
	}
	t.Logf("page says: %s", v.Source)
	screenshot(ctx, t, page, "failover.png")
}

// topicRow is one row of the topics page.
type topicRow struct {
	Perm     string `json:"perm"`
	Queues   int    `json:"queues"`
	Messages uint64 `json:"messages"`
	Max      string `json:"max"`
	Del      string `json:"del"` // the delete button's text
}

const readTopics = `(() => {
  const rows = {};
  document.querySelectorAll("#topics tbody tr").forEach(tr => {
    const del = tr.querySelector("button.del");
    rows[tr.dataset.name] = {perm: tr.cells[1].textContent, queues: +tr.dataset.queues, messages: +tr.dataset.messages,
      max: tr.cells[4].textContent, del: del ? del.textContent : ""};
  });
  const m = document.getElementById("topics-msg");
  return {rows: rows, msg: m.hidden ? "" : m.textContent, bad: m.classList.contains("bad"),
    shown: !document.getElementById("page-topics").hidden, canChange: !document.body.classList.contains("readonly")};
})()`

// checkTopicsPage opens the topics page of the open console: it lists the
// topic "orders" with the messages produced into it, creates a topic
// through the page's form, refuses a bad name with the node's error, sets
// the new topic read-only, and deletes it: refused while a consumer group
// member reads it, then with a third click (Delete anyway?) forced.
func checkTopicsPage(ctx context.Context, t *testing.T, page *headless.Page, b *broker.Broker) {
	t.Helper()
	type topicsView struct {
		Rows      map[string]topicRow `json:"rows"`
		Msg       string              `json:"msg"`
		Bad       bool                `json:"bad"`
		Shown     bool                `json:"shown"`
		CanChange bool                `json:"canChange"`
	}
	var tv topicsView
	read := func() topicsView {
		var v topicsView
		if err := page.Eval(ctx, readTopics, &v); err != nil {
			t.Logf("read the topics page: %v", err)
		}
		return v
	}
	eval := func(js string) {
		t.Helper()
		if err := page.Eval(ctx, js, nil); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	}
	eval(`location.hash = "#topics"`)
	waitFor(t, 20*time.Second, "the topics page to list orders with its messages", func() bool {
		tv = read()
		return tv.Shown && tv.Rows["orders"].Queues == 2 && tv.Rows["orders"].Messages > 0
	})
	if !tv.CanChange {
		t.Fatalf("a group without authentication shows its topics read-only: %+v", tv)
	}
	t.Logf("topics page: orders holds %d messages (max offsets %s)", tv.Rows["orders"].Messages, tv.Rows["orders"].Max)
	submit := func(name, queues string) {
		eval(`document.getElementById("new-topic").value = ` + strconv.Quote(name) + `;
			document.getElementById("new-queues").value = ` + strconv.Quote(queues) + `;
			document.querySelector("#create-topic button").click()`)
	}
	submit("console-made", "3")
	waitFor(t, 20*time.Second, "the page to create console-made with 3 queues", func() bool {
		tv = read()
		return tv.Rows["console-made"].Queues == 3 && strings.Contains(tv.Msg, "Created topic console-made")
	})
	submit("no spaces allowed", "")
	waitFor(t, 20*time.Second, "the page to show the node's refusal of a bad name", func() bool {
		tv = read()
		return tv.Bad && strings.Contains(tv.Msg, "no spaces allowed") && strings.Contains(tv.Msg, "invalid argument")
	})
	t.Logf("a bad name: %s", tv.Msg)
	screenshot(ctx, t, page, "topics.png")
	eval(`document.querySelector("#topics button.perm[data-topic='console-made'][data-perm='4']").click()`)
	waitFor(t, 20*time.Second, "the page to make console-made read-only", func() bool {
		tv = read()
		return tv.Rows["console-made"].Perm == "r- (4)" && strings.Contains(tv.Msg, "Topic console-made: permission 4")
	})
	if _, err := b.JoinGroup(ctx, "console-readers", "m1", []string{"console-made"}); err != nil {
		t.Fatal(err)
	}
	del := `document.querySelector("#topics button.del[data-topic='console-made']").click()`
	eval(del)
	eval(del)
	waitFor(t, 20*time.Second, "the page to show the refusal for a connected consumer", func() bool {
		tv = read()
		return tv.Bad && strings.Contains(tv.Msg, "console-readers") && tv.Rows["console-made"].Del == "Delete anyway?"
	})
	t.Logf("delete with a consumer connected: %s", tv.Msg)
	eval(del)
	waitFor(t, 20*time.Second, "the page to delete console-made", func() bool {
		tv = read()
		_, listed := tv.Rows["console-made"]
		return !listed && strings.Contains(tv.Msg, "Deleted topic console-made")
	})
	if err := b.LeaveGroup(ctx, "console-readers", "m1"); err != nil {
		t.Fatal(err)
	}
	eval(`location.hash = "#overview"`)
}

const readGroups = `(() => {
  const groups = {};
  document.querySelectorAll("#groups .group").forEach(d => {
    const qs = {};
    d.querySelectorAll("tbody tr").forEach(tr => { qs[tr.dataset.topic + "/" + tr.dataset.queue] = +tr.dataset.committed; });
    groups[d.dataset.name] = {lag: +d.dataset.lag, dead: +d.dataset.dead, members: +d.dataset.members, committed: qs};
  });
  const txt = id => { const e = document.getElementById(id); return e.hidden ? "" : e.textContent; };
  return {groups: groups, reset: txt("reset-msg"), applyOn: !document.getElementById("reset-apply").disabled,
    dlq: txt("dlq-msg"), dead: Array.from(document.querySelectorAll("#deadletters tbody tr")).map(tr => tr.dataset.id),
    shown: !document.getElementById("page-groups").hidden};
})()`

// checkGroupsPage opens the consumer groups page: a group with committed
// offsets shows its lag and its dead letter; a reset by the page's form
// is previewed by a dry run, which changes nothing, then applied; a bad
// offset is refused with the reason; the dead letter is listed and resent.
func checkGroupsPage(ctx context.Context, t *testing.T, page *headless.Page, b *broker.Broker) {
	t.Helper()
	if err := b.CommitOffsets(ctx, "audit", []store.OffsetEntry{{Topic: "orders", Queue: 0, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	dlq := mq.DeadLetterTopic("audit")
	if _, err := b.CreateTopic(ctx, dlq, 1, true); err != nil {
		t.Fatal(err)
	}
	res, err := b.Produce(ctx, broker.ProduceRequest{Topic: dlq, Messages: []broker.ProduceMessage{{Key: "k1", Body: []byte("poison"),
		Properties: map[string]string{mq.PropRetryTopic: "orders", mq.PropReconsumeTime: "16", mq.PropDeadLetterReason: "max reconsume times exceeded"}}}})
	if err != nil {
		t.Fatal(err)
	}
	deadID := res.Acks[0].ID()
	type groupView struct {
		Lag       uint64           `json:"lag"`
		Dead      uint64           `json:"dead"`
		Members   int              `json:"members"`
		Committed map[string]int64 `json:"committed"`
	}
	var gv struct {
		Groups  map[string]groupView `json:"groups"`
		Reset   string               `json:"reset"`
		ApplyOn bool                 `json:"applyOn"`
		DLQ     string               `json:"dlq"`
		Dead    []string             `json:"dead"`
		Shown   bool                 `json:"shown"`
	}
	read := func() bool {
		if err := page.Eval(ctx, readGroups, &gv); err != nil {
			t.Logf("read the groups page: %v", err)
			return false
		}
		return true
	}
	eval := func(js string) {
		t.Helper()
		if err := page.Eval(ctx, js, nil); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	}
	eval(`location.hash = "#groups"`)
	waitFor(t, 20*time.Second, "the groups page to show audit's lag and dead letter", func() bool {
		return read() && gv.Shown && gv.Groups["audit"].Lag > 0 && gv.Groups["audit"].Dead == 1 && gv.Groups["audit"].Committed["orders/0"] == 5
	})
	t.Logf("groups page: audit lags %d messages, %d dead letter", gv.Groups["audit"].Lag, gv.Groups["audit"].Dead)
	form := func(kind, value string) {
		eval(`document.getElementById("reset-group").value = "audit"; document.getElementById("reset-topic").value = "orders";
			document.getElementById("reset-kind").value = ` + strconv.Quote(kind) + `; document.getElementById("reset-value").value = ` + strconv.Quote(value) + `;
			document.getElementById("reset").dispatchEvent(new Event("input"));
			document.querySelector("#reset button:not(#reset-apply)").click()`)
	}
	form("offset", "not-a-number")
	waitFor(t, 20*time.Second, "the page to refuse a bad offset", func() bool { return read() && strings.Contains(gv.Reset, "want earliest, latest") })
	form("earliest", "")
	waitFor(t, 20*time.Second, "the dry run of a reset to earliest", func() bool { return read() && gv.ApplyOn && strings.Contains(gv.Reset, "Dry run") })
	if offs, err := b.FetchOffsets("audit", "orders"); err != nil || offs[0] != 5 {
		t.Fatalf("after the dry run audit's offsets are %v, %v; want queue 0 still at 5", offs, err)
	}
	eval(`document.getElementById("reset-apply").click()`)
	waitFor(t, 20*time.Second, "the page to apply the reset and show the committed offset", func() bool {
		return read() && strings.Contains(gv.Reset, "moved") && gv.Groups["audit"].Committed["orders/0"] == 0
	})
	eval(`document.getElementById("dlq-group").value = "audit"; document.querySelector("#dlq button").click()`)
	waitFor(t, 20*time.Second, "the page to list audit's dead letter", func() bool { return read() && contains(gv.Dead, deadID) })
	screenshot(ctx, t, page, "groups.png")
	eval(`document.querySelector("#deadletters button[data-resend='` + deadID + `']").click()`)
	waitFor(t, 20*time.Second, "the page to resend the dead letter", func() bool { return read() && strings.Contains(gv.DLQ, "Resent "+deadID+" to orders") })
	eval(`location.hash = "#overview"`)
}

const readMessages = `(() => {
  const m = document.getElementById("msg-msg");
  return {msg: m.hidden ? "" : m.textContent, bad: m.classList.contains("bad"),
    rows: Array.from(document.querySelectorAll("#messages tbody tr")).map(tr => ({id: tr.dataset.id, servedBy: tr.dataset.servedBy, body: tr.cells[8].textContent}))};
})()`

// checkMessagesPage finds a message produced with a key on the messages
// page by its key and by its id, with the node that served it, shows its
// body as text and as hex, and shows the node's refusal of a bad id and of
// an unknown topic.
func checkMessagesPage(ctx context.Context, t *testing.T, page *headless.Page, b *broker.Broker) {
	t.Helper()
	res, err := b.Produce(ctx, broker.ProduceRequest{Topic: "orders", Messages: []broker.ProduceMessage{{Key: "order-42", Body: []byte("hello console")}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Acks[0].ID()
	type row struct{ ID, ServedBy, Body string }
	var mv struct {
		Msg  string `json:"msg"`
		Bad  bool   `json:"bad"`
		Rows []row  `json:"rows"`
	}
	read := func() bool { return page.Eval(ctx, readMessages, &mv) == nil }
	eval := func(js string) {
		t.Helper()
		if err := page.Eval(ctx, js, nil); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	}
	eval(`location.hash = "#messages"`)
	byKey := `document.getElementById("msg-topic").value = "orders"; document.getElementById("msg-key").value = "order-42";
		document.querySelector("#by-key button").click()`
	// The key index follows the applied log: poll until it has the message.
	waitFor(t, 20*time.Second, "the page to find the message by key", func() bool {
		eval(byKey)
		time.Sleep(200 * time.Millisecond)
		return read() && len(mv.Rows) == 1 && mv.Rows[0].ID == id && mv.Rows[0].ServedBy != "" && mv.Rows[0].Body == "hello console"
	})
	t.Logf("found by key: %s served by %s", id, mv.Rows[0].ServedBy)
	eval(`document.querySelector("input[name=body-as][value=hex]").click()`)
	waitFor(t, 10*time.Second, "the body in hex", func() bool {
		return read() && len(mv.Rows) == 1 && strings.HasPrefix(mv.Rows[0].Body, "68 65 6c 6c 6f")
	})
	screenshot(ctx, t, page, "messages.png")
	eval(`document.querySelector("input[name=body-as][value=text]").click()`)
	eval(`document.getElementById("msg-id").value = ` + strconv.Quote(id) + `; document.querySelector("#by-id button").click()`)
	waitFor(t, 20*time.Second, "the page to look the message up by id", func() bool {
		return read() && len(mv.Rows) == 1 && mv.Rows[0].ID == id && mv.Rows[0].ServedBy != "" && strings.Contains(mv.Msg, "with id")
	})
	eval(`document.getElementById("msg-id").value = "not-an-id"; document.querySelector("#by-id button").click()`)
	waitFor(t, 20*time.Second, "the page to refuse a bad id", func() bool { return read() && mv.Bad && strings.Contains(mv.Msg, "not-an-id") && len(mv.Rows) == 0 })
	eval(`document.getElementById("msg-topic").value = "no-such-topic"; document.querySelector("#by-key button").click()`)
	waitFor(t, 20*time.Second, "the page to say the topic is unknown", func() bool { return read() && mv.Bad && strings.Contains(mv.Msg, "no-such-topic") })
	t.Logf("unknown topic: %s", mv.Msg)
	var source string
	if err := page.Eval(ctx, `document.getElementById("source").className`, &source); err != nil || strings.Contains(source, "lost") {
		t.Fatalf("on the messages page, with every node up, the page says it lost its node (%q, %v)", source, err)
	}
	eval(`location.hash = "#overview"`)
}

// screenshot writes the page's viewport to name in the directory
// $RAFTMQ_CONSOLE_SCREENSHOTS (make console-screenshot), when set.
func screenshot(ctx context.Context, t *testing.T, page *headless.Page, name string) {
	t.Helper()
	dir := os.Getenv("RAFTMQ_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	time.Sleep(1500 * time.Millisecond) // a tick of the stream more: the rates and lag settle
	png, err := page.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s: %d bytes", filepath.Join(dir, name), len(png))
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// BenchmarkConsoleSnapshot is what an open console costs its node each
// second: one snapshot (the broker's Status and a gather of its metrics,
// and on the topics and groups pages their view), here fetched over HTTP
// from the leader of a 3-node group, so an upper bound.
func BenchmarkConsoleSnapshot(b *testing.B) {
	c := servertest.New(b, 3, servertest.InMemory(), servertest.Configure(func(i int, cfg *server.Config) {
		cfg.HTTP = freeAddr(b)
		cfg.Broker.HTTPAddr = cfg.HTTP
	}))
	l := c.Leader()
	// Ten topics of four queues and a group with committed offsets, for
	// the topics and groups views.
	ctx := context.Background()
	for i := range 10 {
		if _, err := c.Node(l).Broker().CreateTopic(ctx, "t"+strconv.Itoa(i), 4, false); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Node(l).Broker().CommitOffsets(ctx, "g1", []store.OffsetEntry{{Topic: "t0", Queue: 0}}); err != nil {
		b.Fatal(err)
	}
	for _, view := range []string{"", "topics", "groups"} {
		name := view
		if name == "" {
			name = "overview"
		}
		b.Run(name, func(b *testing.B) {
			url := "http://" + c.Config(l).HTTP + "/console/snapshot?view=" + view
			for b.Loop() {
				resp, err := http.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatal(resp.Status)
				}
			}
		})
	}
}

// TestConsoleInBrowserAuth opens the console of a one-node group that
// enforces authentication: the topics page asks for credentials, refuses a
// wrong secret, shows a user without admin the topics read-only, and lets
// an admin create a topic; each request is signed in the browser with the
// gRPC API's call credential.
func TestConsoleInBrowserAuth(t *testing.T) {
	bin, err := headless.Find()
	if err != nil {
		t.Fatalf("the console's browser test needs Chromium: %v", err)
	}
	c := newCluster(t, 1, func(i int, cfg *server.Config) {
		cfg.HTTP = freeAddr(t)
		cfg.Broker.HTTPAddr = cfg.HTTP
		cfg.Auth = server.AuthConfig{Mode: acl.Enforcing, Key: bytes.Repeat([]byte("k"), 32), AdminUser: "root", AdminSecret: []byte("root-secret")}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ccfg := client.DefaultConfig()
	ccfg.Servers = []string{c.Config(0).Listen}
	ccfg.Credentials = &client.Credentials{AccessKey: "root", SecretKey: []byte("root-secret")}
	root, err := client.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	waitFor(t, 20*time.Second, "the first admin", func() bool { _, ok := c.Node(0).Store().User("root"); return ok })
	for _, call := range []api.UsersCall{
		{Op: api.UsersAdd, User: "u1", Secret: "u1-secret"},
		{Op: api.UsersGrant, User: "u1", Resource: "topic:orders", Actions: "subscribe"},
	} {
		if _, err := root.Users(ctx, call); err != nil {
			t.Fatalf("%+v: %v", call, err)
		}
	}
	if _, err := root.CreateTopic(ctx, "orders", 2, false); err != nil {
		t.Fatal(err)
	}

	var blog bytes.Buffer
	br, err := headless.Start(bin, t.TempDir(), &blog)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	page, err := br.Open(ctx, "http://"+c.Config(0).HTTP+"/#topics", 1280, 800)
	if err != nil {
		t.Fatalf("open the console: %v\n%s", err, blog.String())
	}
	var v struct {
		SignIn   bool     `json:"signIn"`
		Error    string   `json:"error"`
		Who      string   `json:"who"`
		ReadOnly bool     `json:"readOnly"`
		Topics   []string `json:"topics"`
		Msg      string   `json:"msg"`
	}
	read := func() bool {
		return page.Eval(ctx, `({signIn: !document.getElementById("signin").hidden, error: document.getElementById("signin-error").textContent,
			who: document.getElementById("who").textContent, readOnly: document.body.classList.contains("readonly"),
			topics: Array.from(document.querySelectorAll("#topics tbody tr")).map(tr => tr.dataset.name),
			msg: document.getElementById("topics-msg").textContent})`, &v) == nil
	}
	eval := func(js string) {
		t.Helper()
		if err := page.Eval(ctx, js, nil); err != nil {
			t.Fatalf("%s: %v", js, err)
		}
	}
	signIn := func(ak, sk string) {
		eval(`document.getElementById("ak").value = ` + strconv.Quote(ak) + `; document.getElementById("sk").value = ` + strconv.Quote(sk) + `;
			document.getElementById("signin").dispatchEvent(new Event("submit", {cancelable: true}))`)
	}
	waitFor(t, 20*time.Second, "the page to ask for credentials", func() bool { return read() && v.SignIn && v.ReadOnly && len(v.Topics) == 0 })
	signIn("u1", "wrong")
	waitFor(t, 20*time.Second, "the page to refuse a wrong secret", func() bool { return read() && v.SignIn && strings.Contains(v.Error, "does not verify") })
	t.Logf("a wrong secret: %s", v.Error)
	signIn("u1", "u1-secret")
	waitFor(t, 20*time.Second, "u1 to see the topics read-only", func() bool {
		return read() && !v.SignIn && v.ReadOnly && strings.Contains(v.Who, "u1 (read-only)") && contains(v.Topics, "orders")
	})
	signIn("root", "root-secret")
	waitFor(t, 20*time.Second, "root to see the topics with changes", func() bool {
		return read() && !v.ReadOnly && strings.Contains(v.Who, "root (admin)") && contains(v.Topics, "orders")
	})
	eval(`document.getElementById("new-topic").value = "by-root"; document.querySelector("#create-topic button").click()`)
	waitFor(t, 20*time.Second, "root to create a topic from the page", func() bool { return read() && contains(v.Topics, "by-root") && strings.Contains(v.Msg, "Created") })
}
