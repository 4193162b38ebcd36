package integration

// Transactions across a SIGKILL of the leader: half messages still pending
// when the leader dies are checked back by the next leader and decided as
// the producer answers, each committed one delivered once, no rolled back
// one ever.

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

// rmqTxDecider leaves every local transaction unknown ("direct-" bodies
// commit at once) and answers check-backs unknown until decide is set;
// then it commits the "commit-" and "direct-" bodies and rolls back the
// others.
type rmqTxDecider struct {
	decide          atomic.Bool
	checked, before atomic.Int32 // check-backs, and those before decide
}

func (d *rmqTxDecider) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	if strings.HasPrefix(string(m.Body), "direct-") {
		return primitive.CommitMessageState
	}
	return primitive.UnkonwnState
}

func (d *rmqTxDecider) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	d.checked.Add(1)
	if !d.decide.Load() {
		d.before.Add(1)
		return primitive.UnkonwnState
	}
	if b := string(m.Body); strings.HasPrefix(b, "commit-") || strings.HasPrefix(b, "direct-") {
		return primitive.CommitMessageState
	}
	return primitive.RollbackMessageState
}

func TestRocketMQTransactionLeaderKill(t *testing.T) {
	c, ns := rmqStartGroup(t, "--txn-timeout", "1s", "--txn-check-interval", "1s", "--txn-check-max", "60")
	rmqCreateRouted(t, c, ns, "rmq-txk", 4)
	var d rmqTxDecider
	tp, err := producer.NewTransactionProducer(&d, producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("rmq-txk-pg"),
		producer.WithInstanceName("txk"), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var commit, rollback []string
	for i := 0; i < 8; i++ {
		for _, kind := range []string{"commit", "rollback", "direct"} {
			b := fmt.Sprintf("%s-%d", kind, i)
			if _, err := tp.SendMessageInTransaction(ctx, primitive.NewMessage("rmq-txk", []byte(b))); err != nil {
				t.Fatalf("transactional send %s: %v", b, err)
			}
			if kind == "rollback" {
				rollback = append(rollback, b)
			} else {
				commit = append(commit, b)
			}
		}
	}
	leader := c.waitLeader("")
	procWaitFor(t, 60*time.Second, "the leader checking the pending half messages back", func() (bool, string) {
		return d.before.Load() >= 4, fmt.Sprintf("%d checks", d.before.Load())
	})
	pending := rmqMetric(t, leader.HTTP, "raftmq_txn_pending")
	c.kill(leader.ID)
	killed := time.Now()
	next := c.waitLeader(leader.ID)
	t.Logf("killed %s with %v half messages pending; %s leads after %s", leader.ID, pending, next.ID, time.Since(killed).Round(time.Millisecond))
	if pending < 16 {
		t.Fatalf("%v half messages pending on the killed leader, want at least the 16 left unknown", pending)
	}
	d.decide.Store(true)
	decided := time.Now()
	got := newRMQReceived()
	cons := rmqPushConsumer(t, ns.Addr(), "rmq-txk-cg", "txk-consumer", consumer.MessageSelector{}, "rmq-txk", got)
	defer cons.Shutdown()
	rmqWaitAll(t, got, commit, 90*time.Second)
	t.Logf("every committed message delivered %s after the producer started answering", time.Since(decided).Round(time.Millisecond))
	procWaitFor(t, 60*time.Second, "no half message pending on the new leader", func() (bool, string) {
		n := rmqMetric(t, next.HTTP, "raftmq_txn_pending")
		return n == 0, fmt.Sprintf("%v pending", n)
	})
	time.Sleep(5 * time.Second) // a rolled back message delivered late would show here
	got.mu.Lock()
	for b, n := range got.bodies {
		if strings.HasPrefix(b, "rollback-") {
			t.Errorf("rolled back message %q delivered", b)
		} else if n != 1 {
			t.Errorf("committed message %q delivered %d times", b, n)
		}
	}
	got.mu.Unlock()
	stored := rmqStored(t, next, "rmq-txk")
	for _, b := range commit {
		if stored[b] != 1 {
			t.Errorf("committed message %q stored %d times in its topic, want once", b, stored[b])
		}
	}
	for _, b := range rollback {
		if stored[b] != 0 {
			t.Errorf("rolled back message %q stored %d times in its topic", b, stored[b])
		}
	}
}
