package integration

// Transactions with the unmodified Go client's transactional producer: a
// committed half message reaches a consumer once, a rolled back one never
// (docs/semantics.md, "Transactions").

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// rmqTxListener commits bodies that start with "commit-", rolls back those
// that start with "rollback-" and answers unknown for the rest; a check-back
// answers check (unknown until set).
type rmqTxListener struct {
	executed, checked atomic.Int32
	check             atomic.Int32 // a primitive.LocalTransactionState
}

func txState(body string) primitive.LocalTransactionState {
	switch {
	case strings.HasPrefix(body, "commit-"):
		return primitive.CommitMessageState
	case strings.HasPrefix(body, "rollback-"):
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *rmqTxListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	l.executed.Add(1)
	return txState(string(m.Body))
}

func (l *rmqTxListener) CheckLocalTransaction(*primitive.MessageExt) primitive.LocalTransactionState {
	l.checked.Add(1)
	return primitive.LocalTransactionState(l.check.Load())
}

// rmqTxProducer is what the tests use of the Go client's transactional
// producer.
type rmqTxProducer interface {
	SendMessageInTransaction(ctx context.Context, msg *primitive.Message) (*primitive.TransactionSendResult, error)
}

// rmqTxSetup starts a group with topic rmq-tx (4 queues) and a started
// transactional producer of group pg.
func rmqTxSetup(t *testing.T, lis *rmqTxListener, pg string, serverArgs ...string) (*procCluster, string, rmqTxProducer) {
	t.Helper()
	c, ns := rmqStartGroup(t, serverArgs...)
	c.waitLeader("")
	c.mustCLI("", "topic", "create", "rmq-tx", "--queues", "4", "-s", c.addrs())
	procWaitFor(t, 60*time.Second, "rmq-tx registered with the name server", func() (bool, string) {
		g := ns.Groups()["raftmq"]
		if g == nil || g.Topics["rmq-tx"] == 0 {
			return false, "no route for rmq-tx"
		}
		return true, ""
	})
	lis.check.Store(int32(primitive.UnkonwnState))
	tp, err := producer.NewTransactionProducer(lis, producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName(pg),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Shutdown() })
	return c, ns.Addr(), tp
}

func TestRocketMQTransactions(t *testing.T) {
	var lis rmqTxListener
	c, ns, tp := rmqTxSetup(t, &lis, "rmq-tx-pg")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var commits, rollbacks []string
	for i := 0; i < 16; i++ { // round robin: every queue of every path (leader and write paths)
		b := fmt.Sprintf("commit-%d", i)
		if i%2 == 1 {
			b = fmt.Sprintf("rollback-%d", i)
		}
		res, err := tp.SendMessageInTransaction(ctx, primitive.NewMessage("rmq-tx", []byte(b)))
		if err != nil {
			t.Fatalf("transactional send %s: %v", b, err)
		}
		if res.Status != primitive.SendOK || res.State != txState(b) {
			t.Fatalf("transactional send %s: status %d state %d", b, res.Status, res.State)
		}
		if i%2 == 0 {
			commits = append(commits, b)
		} else {
			rollbacks = append(rollbacks, b)
		}
	}
	got := newRMQReceived()
	cons := rmqPushConsumer(t, ns, "rmq-tx-cg", "tx-consumer", consumer.MessageSelector{}, "rmq-tx", got)
	defer cons.Shutdown()
	rmqWaitAll(t, got, commits, 90*time.Second)
	// Read on, to the topic's end, for 10 s: no rolled back message, no
	// second copy of a committed one.
	time.Sleep(10 * time.Second)
	got.mu.Lock()
	for b, n := range got.bodies {
		if strings.HasPrefix(b, "rollback-") {
			t.Errorf("the consumer was handed rolled back message %q", b)
		}
		if n != 1 && strings.HasPrefix(b, "commit-") {
			t.Errorf("committed message %q delivered %d times", b, n)
		}
	}
	got.mu.Unlock()
	leader := c.waitLeader("")
	stored := rmqStored(t, leader, "rmq-tx")
	for _, b := range commits {
		if stored[b] != 1 {
			t.Errorf("committed message %q stored %d times", b, stored[b])
		}
	}
	for _, b := range rollbacks {
		if stored[b] != 0 {
			t.Errorf("rolled back message %q is in its topic", b)
		}
	}
	procWaitFor(t, 20*time.Second, "no half message pending", func() (bool, string) {
		n := rmqMetric(t, leader.HTTP, "raftmq_txn_pending")
		return n == 0, fmt.Sprintf("%v pending", n)
	})
	if n := lis.checked.Load(); n != 0 {
		t.Errorf("%d check-backs for decided transactions", n)
	}
	t.Logf("%d committed messages delivered once, %d rolled back never", len(commits), len(rollbacks))
}

// Check-back: local transactions end unknown, so the leader asks the
// producer group (CHECK_TRANSACTION_STATE) once the transaction timeout
// passed. Group a answers unknown to its first check and commit after, so
// its messages are delivered once; group b answers rollback, so they never
// are; group c answers unknown every time, so after --txn-check-max checks
// its half messages are discarded (TRANS_CHECK_MAX_TIME_TOPIC) and never
// delivered.
func TestRocketMQTransactionCheckBack(t *testing.T) {
	var la, lb, lc rmqTxListener
	c, ns, tpa := rmqTxSetup(t, &la, "rmq-tx-a", "--txn-timeout", "1s", "--txn-check-interval", "1s", "--txn-check-max", "5")
	lb.check.Store(int32(primitive.RollbackMessageState))
	lc.check.Store(int32(primitive.UnkonwnState))
	var tps = map[string]rmqTxProducer{"a": tpa}
	for name, lis := range map[string]*rmqTxListener{"b": &lb, "c": &lc} {
		// Its own client instance: the Go client hands a check-back to
		// the first producer group of an instance only.
		tp, err := producer.NewTransactionProducer(lis, producer.WithNameServer([]string{ns}), producer.WithGroupName("rmq-tx-"+name),
			producer.WithInstanceName("tx-"+name), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if err := tp.Start(); err != nil {
			t.Fatal(err)
		}
		defer tp.Shutdown()
		tps[name] = tp
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bodies := map[string][]string{}
	for i := 0; i < 4; i++ {
		for _, name := range []string{"a", "b", "c"} {
			b := fmt.Sprintf("%s-%d", name, i) // unknown locally
			res, err := tps[name].SendMessageInTransaction(ctx, primitive.NewMessage("rmq-tx", []byte(b)))
			if err != nil || res.State != primitive.UnkonwnState {
				t.Fatalf("transactional send %s: %v %+v", b, err, res)
			}
			bodies[name] = append(bodies[name], b)
		}
	}
	got := newRMQReceived()
	cons := rmqPushConsumer(t, ns, "rmq-tx-cg", "tx-consumer", consumer.MessageSelector{}, "rmq-tx", got)
	defer cons.Shutdown()
	procWaitFor(t, 30*time.Second, "group a checked back", func() (bool, string) {
		return la.checked.Load() >= 4, fmt.Sprintf("%d checks", la.checked.Load())
	})
	time.Sleep(time.Second)
	if n := len(got.missing(bodies["a"])); n != len(bodies["a"]) {
		t.Fatalf("%d of group a's messages delivered after an unknown check", len(bodies["a"])-n)
	}
	la.check.Store(int32(primitive.CommitMessageState))
	rmqWaitAll(t, got, bodies["a"], 60*time.Second)
	leader := c.waitLeader("")
	procWaitFor(t, 60*time.Second, "every half message decided", func() (bool, string) {
		n := rmqMetric(t, leader.HTTP, "raftmq_txn_pending")
		return n == 0, fmt.Sprintf("%v pending; checks a %d b %d c %d", n, la.checked.Load(), lb.checked.Load(), lc.checked.Load())
	})
	time.Sleep(10 * time.Second)
	got.mu.Lock()
	for b, n := range got.bodies {
		if !strings.HasPrefix(b, "a-") {
			t.Errorf("the consumer was handed %q (rolled back or discarded)", b)
		} else if n != 1 {
			t.Errorf("committed message %q delivered %d times", b, n)
		}
	}
	got.mu.Unlock()
	if d := rmqMetric(t, leader.HTTP, "raftmq_txn_decisions_total", `decision="discard"`); d != 4 {
		t.Errorf("%v half messages discarded, want group c's 4", d)
	}
	if n := lc.checked.Load(); n < 4*5 {
		t.Errorf("group c was checked %d times, want at least 5 per message", n)
	}
	t.Logf("checks: a %d, b %d, c %d", la.checked.Load(), lb.checked.Load(), lc.checked.Load())
}
