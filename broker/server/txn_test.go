package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// TestSDKTransactions: the SDK's TransactionProducer over a 3-node group.
// A committed message is visible exactly once, a rolled back one never;
// undecided ones are decided by the check-back, with commit and with
// rollback; a decision sent to a follower is forwarded; repeated and
// contrary late decisions change nothing; nothing is visible before its
// commit.
func TestSDKTransactions(t *testing.T) {
	c := newCluster(t, 3, nil)
	li := c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "tx", 2, false); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	answer := map[string]client.TxnState{"u-commit": client.TxnCommit, "u-rollback": client.TxnRollback, "via-follower": client.TxnUnknown}
	checked := map[string]int{}
	tp, err := cl.NewTransactionProducer(client.TransactionConfig{Group: "pg", Timeout: 300 * time.Millisecond, CheckInterval: 100 * time.Millisecond,
		Check: func(_ context.Context, m client.HalfMessage) client.TxnState {
			mu.Lock()
			defer mu.Unlock()
			if m.Topic != "tx" || m.ProducerGroup != "pg" {
				t.Errorf("check-back of %s: topic %q group %q", m.Body, m.Topic, m.ProducerGroup)
			}
			checked[string(m.Body)]++
			return answer[string(m.Body)]
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()

	send := func(body string, st client.TxnState) *api.Ack {
		t.Helper()
		res, err := tp.SendInTransaction(ctx, "tx", client.Message{Key: body, Body: []byte(body)}, func(context.Context, *api.Ack) client.TxnState { return st })
		if err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		if res.State != st || res.Ack.GetId() == "" {
			t.Fatalf("send %s: result %+v", body, res)
		}
		return res.Ack
	}
	commit := send("commit", client.TxnCommit)
	rollback := send("rollback", client.TxnRollback)
	send("u-commit", client.TxnUnknown)
	send("u-rollback", client.TxnUnknown)
	follower := send("via-follower", client.TxnUnknown)

	// Repeated and contrary late decisions are no-ops.
	for _, d := range []client.TxnState{client.TxnCommit, client.TxnRollback} {
		if err := cl.EndTransaction(ctx, "tx", "pg", commit.Id, d); err != nil {
			t.Fatalf("late %s of a committed message: %v", d, err)
		}
		if err := cl.EndTransaction(ctx, "tx", "pg", rollback.Id, d); err != nil {
			t.Fatalf("late %s of a rolled back message: %v", d, err)
		}
	}
	// Bad decisions are refused with a clear error.
	if err := cl.EndTransaction(ctx, "other", "pg", follower.Id, client.TxnCommit); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("decision naming another topic: %v, want InvalidArgument", err)
	}
	if err := cl.EndTransaction(ctx, "tx", "other-group", follower.Id, client.TxnCommit); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("decision of another producer group: %v, want InvalidArgument", err)
	}
	if err := cl.EndTransaction(ctx, "tx", "pg", follower.Id, client.TxnUnknown); err == nil {
		t.Fatal("an unknown decision sent as a decision: no error")
	}

	waitFor(t, 20*time.Second, "the check-back to decide both undecided messages", func() bool {
		hs, err := cl.ListHalfMessages(ctx, "tx", "pg", 0, 100)
		return err == nil && len(hs) == 1 && string(hs[0].Body) == "via-follower"
	})
	// Not committed yet: invisible.
	for _, m := range readAll(ctx, t, cl, "tx") {
		if string(m.Body) == "via-follower" {
			t.Fatal("an undecided half message is visible")
		}
	}

	// A decision through a follower.
	fi := (li + 1) % 3
	cc, err := grpc.NewClient(c.Config(fi).Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for range 2 {
		if _, err := api.NewBrokerClient(cc).EndTransaction(ctx, &api.EndTransactionRequest{Id: follower.Id, Topic: "tx",
			Decision: api.TransactionDecision_TRANSACTION_DECISION_COMMIT}); err != nil {
			t.Fatalf("commit through follower %d: %v", fi, err)
		}
	}
	if _, err := api.NewBrokerClient(cc).EndTransaction(ctx, &api.EndTransactionRequest{Id: follower.Id}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a decision without one: %v, want InvalidArgument", err)
	}

	// ListHalfMessages filters by topic, group and age (and the message's
	// CHECK_IMMUNITY_TIME_IN_SECONDS).
	p := cl.NewProducer()
	for _, m := range []client.Message{
		{Body: []byte("young"), Properties: map[string]string{"TRAN_MSG": "true", "PGROUP": "other"}},
		{Body: []byte("immune"), Properties: map[string]string{"TRAN_MSG": "true", "PGROUP": "other", "CHECK_IMMUNITY_TIME_IN_SECONDS": "3600"}},
	} {
		if _, err := p.Send(ctx, "tx", m); err != nil {
			t.Fatalf("raw half message %s: %v", m.Body, err)
		}
	}
	count := func(topic, group string, older time.Duration) int {
		t.Helper()
		hs, err := cl.ListHalfMessages(ctx, topic, group, older, 100)
		if err != nil {
			t.Fatalf("list half messages: %v", err)
		}
		return len(hs)
	}
	if n := count("tx", "other", 0); n != 2 {
		t.Errorf("half messages of group other: %d, want 2", n)
	}
	if n := count("tx", "pg", 0) + count("elsewhere", "", 0); n != 0 {
		t.Errorf("half messages of group pg or of topic elsewhere: %d, want 0", n)
	}
	if n := count("tx", "", time.Hour); n != 0 {
		t.Errorf("half messages older than an hour: %d, want 0", n)
	}
	time.Sleep(300 * time.Millisecond)
	if n := count("tx", "", 200*time.Millisecond); n != 1 {
		t.Errorf("half messages older than 200ms: %d, want 1 (the immune one waits an hour)", n)
	}
	hs, _ := cl.ListHalfMessages(ctx, "", "other", 0, 100)
	for _, h := range hs {
		if err := cl.EndTransaction(ctx, "", "", h.ID, client.TxnRollback); err != nil {
			t.Fatal(err)
		}
	}

	_, pending, err := cl.PendingHalfMessages(ctx, "", "", 0, 10)
	if err != nil || pending != 0 {
		t.Fatalf("pending half messages after every decision: %d, %v", pending, err)
	}
	got := map[string]int{}
	for _, m := range readAll(ctx, t, cl, "tx") {
		got[string(m.Body)]++
		if m.Properties["TRAN_MSG"] != "" || m.Properties["REAL_TOPIC"] != "" {
			t.Errorf("committed %s keeps staging properties %v", m.Body, m.Properties)
		}
	}
	want := map[string]int{"commit": 1, "u-commit": 1, "via-follower": 1}
	for b, n := range got {
		if want[b] != n {
			t.Errorf("%s delivered %d times, want %d (all: %v)", b, n, want[b], got)
		}
	}
	for b, n := range want {
		if got[b] != n {
			t.Errorf("%s delivered %d times, want %d (all: %v)", b, got[b], n, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if checked["commit"]+checked["rollback"] != 0 {
		t.Errorf("decided messages were checked: %v", checked)
	}
	if checked["u-commit"] == 0 || checked["u-rollback"] == 0 {
		t.Errorf("undecided messages were not checked: %v", checked)
	}
}

// TestSDKCheckBackPages: one check-back round reaches half messages past
// the first page even when Check answers unknown for the whole first page.
func TestSDKCheckBackPages(t *testing.T) {
	c := newCluster(t, 1, nil)
	c.Leader()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "pages", 1, false); err != nil {
		t.Fatal(err)
	}
	const n, unknown = 130, 110 // the SDK asks for 100 at a time
	tp, err := cl.NewTransactionProducer(client.TransactionConfig{Group: "pages-pg", Timeout: time.Millisecond, CheckInterval: time.Hour,
		Check: func(_ context.Context, m client.HalfMessage) client.TxnState {
			var i int
			fmt.Sscanf(string(m.Body), "m%d", &i)
			if i < unknown {
				return client.TxnUnknown
			}
			return client.TxnRollback
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	for i := 0; i < n; i++ {
		if _, err := tp.SendInTransaction(ctx, "pages", client.Message{Body: []byte(fmt.Sprintf("m%d", i))},
			func(context.Context, *api.Ack) client.TxnState { return client.TxnUnknown }); err != nil {
			t.Fatal(err)
		}
	}
	if got := tp.CheckNow(); got != n-unknown {
		t.Fatalf("one check-back round decided %d, want %d", got, n-unknown)
	}
	_, pending, err := cl.PendingHalfMessages(ctx, "pages", "", 0, 1)
	if err != nil || pending != unknown {
		t.Fatalf("pending after the round: %d, %v; want %d", pending, err, unknown)
	}
}
