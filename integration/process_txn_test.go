package integration

// Transactions with raftmq's own SDK against real server processes
// (docs/semantics.md, "Transactions"): a committed message is delivered
// once, a rolled back one never, undecided ones are decided by the SDK's
// check-back (also across a leader SIGKILL), and a decision sent to a
// follower is forwarded to the leader.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// procConsumeFor reads topic as a consumer of a fresh group from the
// earliest offset for d and counts each body it was handed.
func procConsumeFor(t *testing.T, cl *client.Client, topic string, d time.Duration) map[string]int {
	t.Helper()
	cfg := client.DefaultConsumerConfig(topic, fmt.Sprintf("txn-reader-%d", time.Now().UnixNano()))
	cfg.Wait = 200 * time.Millisecond
	cn, err := cl.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(context.Background())
	got := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		recs, err := cn.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		for _, r := range recs {
			got[string(r.Message.Body)]++
		}
	}
	return got
}

func TestProcessSDKTransactions(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 3)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, "ptx", 4, false); err != nil {
		t.Fatal(err)
	}

	// Bodies say what to do: commit-* and rollback-* are decided by their
	// local transaction; check-commit-* and check-rollback-* end unknown
	// and the check-back answers; follower-* end unknown and are committed
	// through a follower (the check-back answers unknown for them).
	var mu sync.Mutex
	checks := map[string]int{}
	check := func(_ context.Context, m client.HalfMessage) client.TxnState {
		b := string(m.Body)
		mu.Lock()
		checks[b]++
		mu.Unlock()
		switch {
		case strings.HasPrefix(b, "check-commit-"):
			return client.TxnCommit
		case strings.HasPrefix(b, "check-rollback-"):
			return client.TxnRollback
		}
		return client.TxnUnknown
	}
	tp, err := cl.NewTransactionProducer(client.TransactionConfig{Group: "ptx-pg", Check: check, Timeout: time.Second, CheckInterval: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	send := func(body string) *api.Ack {
		t.Helper()
		st := client.TxnUnknown
		switch {
		case strings.HasPrefix(body, "commit-"):
			st = client.TxnCommit
		case strings.HasPrefix(body, "rollback-"):
			st = client.TxnRollback
		}
		res, err := tp.SendInTransaction(ctx, "ptx", client.Message{Body: []byte(body)}, func(context.Context, *api.Ack) client.TxnState { return st })
		if err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		return res.Ack
	}
	want := map[string]int{}
	var followerAcks []*api.Ack
	for i := 0; i < 8; i++ {
		for _, kind := range []string{"commit", "rollback", "check-commit", "check-rollback", "follower"} {
			b := fmt.Sprintf("%s-%d", kind, i)
			a := send(b)
			if kind == "commit" || kind == "check-commit" || kind == "follower" {
				want[b] = 1
			}
			if kind == "follower" {
				followerAcks = append(followerAcks, a)
			}
		}
	}

	// Half messages pending: kill the leader; the SDK's check-back asks
	// the new one.
	t0 := time.Now()
	old := c.waitLeader("")
	c.kill(old.ID)
	leader := c.waitLeader(old.ID)
	procWaitFor(t, 60*time.Second, "the check-back to decide every check-* message", func() (bool, string) {
		hs, err := cl.ListHalfMessages(ctx, "ptx", "ptx-pg", 0, 100)
		if err != nil {
			return false, err.Error()
		}
		return len(hs) == len(followerAcks), fmt.Sprintf("%d undecided", len(hs))
	})
	t.Logf("the check-back had decided all 16 check-* transactions %v after the leader's SIGKILL", time.Since(t0).Round(time.Millisecond))
	c.start(old.ID)
	c.waitFollower(old.ID, 60*time.Second)

	// Nothing of the undecided follower-* is visible yet.
	early := procConsumeFor(t, cl, "ptx", 2*time.Second)
	for b := range early {
		if strings.HasPrefix(b, "follower-") {
			t.Fatalf("undecided %s was delivered", b)
		}
	}

	// Commit the follower-* messages through a follower, twice each.
	var fol *procNode
	for _, nd := range c.all() {
		if nd.ID != leader.ID {
			fol = nd
			break
		}
	}
	cc, err := grpc.NewClient(fol.Client, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	bc := api.NewBrokerClient(cc)
	for _, a := range followerAcks {
		for range 2 {
			if _, err := bc.EndTransaction(ctx, &api.EndTransactionRequest{Id: a.Id, Topic: "ptx", ProducerGroup: "ptx-pg",
				Decision: api.TransactionDecision_TRANSACTION_DECISION_COMMIT}); err != nil {
				t.Fatalf("commit %s through follower %s: %v", a.Id, fol.ID, err)
			}
		}
	}
	// A late contrary decision changes nothing.
	if err := cl.EndTransaction(ctx, "ptx", "ptx-pg", followerAcks[0].Id, client.TxnRollback); err != nil {
		t.Fatalf("late rollback of a committed message: %v", err)
	}

	// A consumer reads the topic to its end and on for 5 s.
	got := procConsumeFor(t, cl, "ptx", 8*time.Second)
	for b, n := range got {
		if want[b] != n {
			t.Errorf("%s delivered %d times, want %d", b, n, want[b])
		}
	}
	for b, n := range want {
		if got[b] != n {
			t.Errorf("%s delivered %d times, want %d", b, got[b], n)
		}
	}
	procWaitFor(t, 20*time.Second, "no half message pending", func() (bool, string) {
		n := rmqMetric(t, leader.HTTP, "raftmq_txn_pending")
		return n == 0, fmt.Sprintf("%v pending", n)
	})
	mu.Lock()
	defer mu.Unlock()
	for b, n := range checks {
		if strings.HasPrefix(b, "commit-") || strings.HasPrefix(b, "rollback-") {
			t.Errorf("decided %s was checked %d times", b, n)
		}
	}
	t.Logf("%d committed delivered once, 16 rolled back never; %d messages checked back", len(want), len(checks))
}

// The CLI: produce --transaction commit|rollback|unknown, txn list of the
// undecided one with its age, txn commit from the shell; bad flags are
// usage errors.
func TestProcessCLITransactions(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 3)
	s := c.addrs()
	c.mustCLI("", "topic", "create", "ctx", "--queues", "2", "-s", s)
	type ack struct {
		ID          string `json:"id"`
		Queue       int32  `json:"queue"`
		Transaction string `json:"transaction"`
	}
	sent := map[string]ack{}
	for _, d := range []string{"commit", "rollback", "unknown"} {
		out := c.mustCLI("", "produce", "-t", "ctx", "--transaction", d, "--producer-group", "cli-pg", "--json", "-s", s, d+"-a", d+"-b")
		acks := procJSONLines[ack](t, out)
		if len(acks) != 2 || acks[0].Transaction != d || acks[0].ID == "" {
			t.Fatalf("produce --transaction %s: %q", d, out)
		}
		sent[d+"-a"], sent[d+"-b"] = acks[0], acks[1]
	}
	text := c.mustCLI("", "produce", "-t", "ctx", "--transaction", "unknown", "-s", s, "unknown-text")
	if !strings.Contains(text, "undecided: decide with `raftmq txn commit ") {
		t.Errorf("produce --transaction unknown says %q; want how to decide it", text)
	}

	var list struct {
		Pending  uint64 `json:"pending"`
		Messages []struct {
			ID            string `json:"id"`
			Topic         string `json:"topic"`
			ProducerGroup string `json:"producer_group"`
			Body          string `json:"body"`
			AgeMs         int64  `json:"age_ms"`
		} `json:"messages"`
	}
	out := c.mustCLI("", "txn", "list", "--topic", "ctx", "--format", "json", "-s", s)
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("txn list --format json: %v: %q", err, out)
	}
	if list.Pending != 3 || len(list.Messages) != 3 || list.Messages[0].Body != "unknown-a" || list.Messages[0].ProducerGroup != "cli-pg" ||
		list.Messages[0].Topic != "ctx" || list.Messages[0].AgeMs <= 0 {
		t.Fatalf("txn list: %q; want the three undecided messages, oldest first, with their age", out)
	}
	if out := c.mustCLI("", "txn", "list", "-s", s); !strings.Contains(out, "PRODUCER GROUP") || !strings.Contains(out, sent["unknown-b"].ID) {
		t.Errorf("txn list: %q", out)
	}
	// Decide from the shell: commit unknown-a twice, roll back the rest.
	out = c.mustCLI("", "txn", "commit", sent["unknown-a"].ID, "--topic", "ctx", "--json", "-s", s)
	if !strings.Contains(out, `"decision":"commit"`) {
		t.Errorf("txn commit --json: %q", out)
	}
	c.mustCLI("", "txn", "commit", sent["unknown-a"].ID, "-s", s)
	rest := []string{"txn", "rollback", sent["unknown-b"].ID, list.Messages[2].ID, "-s", s}
	if out := c.mustCLI("", rest...); !strings.Contains(out, "rolled back") {
		t.Errorf("txn rollback: %q", out)
	}
	if _, errOut, err := c.cli("", "txn", "commit", sent["commit-a"].ID, "--topic", "other", "-s", s); err != nil {
		t.Errorf("a late commit naming another topic of a decided message: %v %s; want no error (nothing to decide)", err, errOut)
	}
	for _, args := range [][]string{
		{"produce", "-t", "ctx", "--transaction", "maybe", "-s", s, "x"},
		{"produce", "-t", "ctx", "--transaction", "commit", "--delay", "10s", "-s", s, "x"},
		{"produce", "-t", "ctx", "--producer-group", "g", "-s", s, "x"},
		{"txn", "commit", "-s", s},
		{"txn", "list", "--max", "0", "-s", s},
	} {
		if _, errOut, err := c.cli("", args...); err == nil || !strings.Contains(errOut, "--help") {
			t.Errorf("%v: %v, %q; want a usage error", args, err, errOut)
		}
	}
	if _, errOut, err := c.cli("", "txn", "commit", "zz", "-s", s); err == nil || !strings.Contains(errOut, "raftmq:") {
		t.Errorf("txn commit of a bad id: %v, %q; want an error", err, errOut)
	}

	got := procConsumeFor(t, c.client(), "ctx", 5*time.Second)
	want := map[string]int{"commit-a": 1, "commit-b": 1, "unknown-a": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	if out := c.mustCLI("", "txn", "list", "--json", "-s", s); !strings.Contains(out, `"pending":0`) {
		t.Errorf("txn list after every decision: %q", out)
	}
}
