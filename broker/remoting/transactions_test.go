package remoting_test

import (
	"strconv"
	"testing"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// commitLogOffset decodes the commit log offset of an offsetMsgId (its last
// 16 hex digits), as the Go client does before END_TRANSACTION.
func commitLogOffset(t *testing.T, offsetMsgID string) string {
	t.Helper()
	if len(offsetMsgID) < 16 {
		t.Fatalf("offsetMsgId %q", offsetMsgID)
	}
	v, err := strconv.ParseUint(offsetMsgID[len(offsetMsgID)-16:], 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(v, 10)
}

// A half message (TRAN_MSG, or the prepared type in sysFlag) is stored and
// acknowledged but invisible until END_TRANSACTION commits it; then it is
// in its real topic and queue once, however often the commit is repeated
// and whichever node it reaches. A rollback, or an unknown decision, never
// makes it visible, and a commit after a rollback changes nothing.
func TestTransactionsThroughTheProtocol(t *testing.T) {
	f := newFixture(t)
	l, fo := f.c.Leader(), f.follower()
	f.createTopic("tx", 2)
	end := func(addr, offsetMsgID string, decision int) *rmq.Command {
		return f.invoke(addr, rmq.EndTransaction, map[string]string{"producerGroup": "pg", "tranStateTableOffset": "0",
			"commitLogOffset": commitLogOffset(t, offsetMsgID), "commitOrRollback": strconv.Itoa(decision), "fromTransactionCheck": "false",
			"msgId": "x", "transactionId": "x"}, nil)
	}
	maxOffset := func(q int) string {
		return f.invoke(f.addr(l), rmq.GetMaxOffset, map[string]string{"topic": "tx", "queueId": strconv.Itoa(q)}, nil).Ext["offset"]
	}
	send := func(addr string, ext map[string]string, body string) *rmq.Command {
		r := f.invoke(addr, rmq.SendMessage, ext, []byte(body))
		if r.Code != rmq.Success || r.Ext["msgId"] == "" {
			t.Fatalf("half send %s: %d %q", body, r.Code, r.Remark)
		}
		return r
	}
	committed := send(f.addr(fo), sendExt("tx", 1, map[string]string{"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": "T1"}), "commit-me")
	if committed.Ext["queueId"] != "1" || committed.Ext["transactionId"] != "T1" {
		t.Fatalf("half send answer %v", committed.Ext)
	}
	prepared := sendExt("tx", 0, map[string]string{"PGROUP": "pg", "UNIQ_KEY": "T2"})
	prepared["sysFlag"] = "4"
	rolled := send(f.addr(l), prepared, "roll-me-back")
	unknown := send(f.addr(l), sendExt("tx", 0, map[string]string{"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": "T3"}), "unknown")
	if maxOffset(0) != "0" || maxOffset(1) != "0" {
		t.Fatalf("half messages visible before a decision: ends %s %s", maxOffset(0), maxOffset(1))
	}
	// Commit through a follower (forwarded), then again on the leader.
	for _, addr := range []string{f.addr(fo), f.addr(l), f.addr(fo)} {
		if r := end(addr, committed.Ext["msgId"], 8); r.Code != rmq.Success {
			t.Fatalf("commit via %s: %d %q", addr, r.Code, r.Remark)
		}
	}
	m := f.waitMessage("tx", 1, 0, 10*time.Second)
	if string(m.Body) != "commit-me" || m.Properties["TRAN_MSG"] != "" || m.Properties["REAL_TOPIC"] != "" || m.Properties["UNIQ_KEY"] != "T1" {
		t.Fatalf("committed message %q %v", m.Body, m.Properties)
	}
	for _, r := range []*rmq.Command{end(f.addr(fo), rolled.Ext["msgId"], 12), end(f.addr(l), rolled.Ext["msgId"], 8), end(f.addr(l), unknown.Ext["msgId"], 0)} {
		if r.Code != rmq.Success {
			t.Fatalf("decision: %d %q", r.Code, r.Remark)
		}
	}
	// A wrong producer group is refused.
	if r := f.invoke(f.addr(l), rmq.EndTransaction, map[string]string{"producerGroup": "other", "commitLogOffset": commitLogOffset(t, unknown.Ext["msgId"]),
		"commitOrRollback": "8"}, nil); r.Code == rmq.Success {
		t.Fatal("a commit from another producer group was taken")
	}
	time.Sleep(500 * time.Millisecond)
	if maxOffset(0) != "0" || maxOffset(1) != "1" {
		t.Fatalf("queue ends %s %s, want 0 and 1: only the committed message, once", maxOffset(0), maxOffset(1))
	}
	if n := f.c.Node(l).Broker().TxnPending(); n != 1 {
		t.Fatalf("%d half messages pending, want 1 (the unknown one)", n)
	}
	// Users may not read or write the half topic.
	if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("RMQ_SYS_TRANS_HALF_TOPIC", 0, nil), []byte("x")); r.Code == rmq.Success {
		t.Fatal("a send to the half topic was taken")
	}
	if ms := f.pullAt(f.addr(l), "RMQ_SYS_TRANS_HALF_TOPIC", 0, 0); len(ms) != 0 {
		t.Fatalf("a pull of the half topic served %d messages", len(ms))
	}
}
