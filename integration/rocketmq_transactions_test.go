package integration

// Transactions are not built yet: the unmodified Go client's transactional
// producer must fail its send, and nothing it sent may reach a consumer or
// the log (a half message stored as an ordinary one would be delivered at
// once, whatever the producer's local transaction decides).

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

	"github.com/raftmq/raftmq/remoting"
)

// rmqTxListener rolls every local transaction back and counts the calls.
type rmqTxListener struct{ executed, checked atomic.Int32 }

func (l *rmqTxListener) ExecuteLocalTransaction(*primitive.Message) primitive.LocalTransactionState {
	l.executed.Add(1)
	return primitive.RollbackMessageState
}

func (l *rmqTxListener) CheckLocalTransaction(*primitive.MessageExt) primitive.LocalTransactionState {
	l.checked.Add(1)
	return primitive.RollbackMessageState
}

func TestRocketMQTransactionRefused(t *testing.T) {
	c, ns := rmqStartGroup(t)
	leader := c.waitLeader("")
	c.mustCLI("", "topic", "create", "rmq-tx", "--queues", "4", "-s", c.addrs())
	procWaitFor(t, 60*time.Second, "rmq-tx registered with the name server", func() (bool, string) {
		g := ns.Groups()["raftmq"]
		if g == nil || g.Topics["rmq-tx"] == 0 {
			return false, "no route for rmq-tx"
		}
		return true, ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var lis rmqTxListener
	tp, err := producer.NewTransactionProducer(&lis, producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("rmq-tx-pg"),
		producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown()
	for i := 0; i < 8; i++ { // round robin: every queue of every path
		res, err := tp.SendMessageInTransaction(ctx, primitive.NewMessage("rmq-tx", []byte(fmt.Sprintf("tx-%d", i))))
		if err == nil {
			t.Fatalf("transactional send %d succeeded: %+v", i, res)
		}
		if !strings.Contains(err.Error(), "transactional messages are not supported by this broker yet; nothing was stored") ||
			!strings.Contains(err.Error(), fmt.Sprintf("CODE: %d", remoting.NoPermission)) {
			t.Fatalf("transactional send %d: %v", i, err)
		}
		if i == 0 {
			t.Logf("the Go client's SendMessageInTransaction: %v", err)
		}
	}
	if n := lis.executed.Load(); n != 0 {
		t.Fatalf("the local transaction ran %d times for refused half messages", n)
	}

	// END_TRANSACTION as the client would send it after a stored half
	// message: refused, with the reason.
	rcl := remoting.NewClient()
	defer rcl.Close()
	end := remoting.NewRequest(remoting.EndTransaction, map[string]string{"producerGroup": "rmq-tx-pg", "tranStateTableOffset": "0",
		"commitLogOffset": "0", "commitOrRollback": "12", "fromTransactionCheck": "false", "msgId": "x", "transactionId": "x"}, nil)
	if r, err := rcl.Invoke(ctx, leader.Remoting, end); err != nil || r.Code != remoting.RequestCodeNotSupported ||
		!strings.Contains(r.Remark, "transactional messages are not supported") {
		t.Fatalf("END_TRANSACTION: %v %+v", err, r)
	}

	// Ordinary messages after the refused ones, on every queue: once a
	// consumer from the first offset has them all, it has read each queue
	// past where the half messages would be.
	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{ns.Addr()}), producer.WithGroupName("rmq-tx-plain"), producer.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	var want []string
	queues := map[int]bool{}
	for i := 0; len(queues) < 4 || i < 12; i++ {
		if i > 100 {
			t.Fatalf("100 sends reached queues %v only", queues)
		}
		b := fmt.Sprintf("plain-%d", i)
		res, err := p.SendSync(ctx, primitive.NewMessage("rmq-tx", []byte(b)))
		if err != nil {
			t.Fatalf("plain send %d: %v", i, err)
		}
		queues[res.MessageQueue.QueueId] = true
		want = append(want, b)
	}
	got := newRMQReceived()
	cons := rmqPushConsumer(t, ns.Addr(), "rmq-tx-cg", "tx-consumer", consumer.MessageSelector{}, "rmq-tx", got)
	defer cons.Shutdown()
	rmqWaitAll(t, got, want, 90*time.Second)
	got.mu.Lock()
	for b := range got.bodies {
		if strings.HasPrefix(b, "tx-") {
			t.Errorf("the consumer was handed refused half message %q", b)
		}
	}
	got.mu.Unlock()
	for b := range rmqStored(t, leader, "rmq-tx") {
		if strings.HasPrefix(b, "tx-") {
			t.Errorf("refused half message %q is in the log", b)
		}
	}
	t.Logf("8 transactional sends refused; the consumer read %d ordinary messages on queues %v and nothing else", len(want), queues)
}
