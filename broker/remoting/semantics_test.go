package remoting_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// pullAt pulls topic/queue from offset on addr without waiting and decodes
// the body (nil when nothing is there yet).
func (f *fixture) pullAt(addr, topic string, queue int, offset uint64) []rmq.MessageExt {
	f.t.Helper()
	ext := map[string]string{"consumerGroup": "cg", "topic": topic, "queueId": strconv.Itoa(queue), "queueOffset": strconv.FormatUint(offset, 10),
		"maxMsgNums": "32", "sysFlag": "0", "subscription": "*", "expressionType": "TAG"}
	r := f.invoke(addr, rmq.PullMessage, ext, nil)
	if r.Code != rmq.Success {
		return nil
	}
	ms, err := rmq.DecodeMessageExts(r.Body)
	if err != nil {
		f.t.Fatalf("pull body of %s/%d: %v", topic, queue, err)
	}
	return ms
}

// waitMessage polls topic/queue at offset on the leader until a message is
// there or the deadline passes.
func (f *fixture) waitMessage(topic string, queue int, offset uint64, within time.Duration) rmq.MessageExt {
	f.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if ms := f.pullAt(f.addr(f.c.Leader()), topic, queue, offset); len(ms) > 0 {
			return ms[0]
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("no message at %s/%d@%d within %v", topic, queue, offset, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sendBackExt(group string, m rmq.MessageExt, level, maxTimes int) map[string]string {
	return map[string]string{"group": group, "offset": strconv.FormatInt(m.PhysicalOffset, 10), "delayLevel": strconv.Itoa(level),
		"originMsgId": "x", "originTopic": m.Topic, "unitMode": "false", "maxReconsumeTimes": strconv.Itoa(maxTimes), "bname": "raftmq"}
}

func TestSendBackThroughTheProtocol(t *testing.T) {
	f := newFixture(t)
	f.createTopic("work", 1)
	l, fo := f.c.Leader(), f.follower()
	if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("work", 0, map[string]string{"UNIQ_KEY": "W1", "TAGS": "t"}), []byte("job")); r.Code != rmq.Success {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	orig := f.waitMessage("work", 0, 0, 10*time.Second)

	// Sent back through a follower (the client sends it to the message's
	// store host): forwarded; level 1 waits a second in %RETRY%cg.
	start := time.Now()
	if r := f.invoke(f.addr(fo), rmq.ConsumerSendMsgBack, sendBackExt("cg", orig, 1, 0), nil); r.Code != rmq.Success {
		t.Fatalf("send-back via a follower: %d %s", r.Code, r.Remark)
	}
	if ms := f.pullAt(f.addr(f.c.Leader()), "%RETRY%cg", 0, 0); len(ms) != 0 {
		t.Fatalf("the retry copy was readable at once (level 1 waits 1 s): %+v", ms[0])
	}
	cp := f.waitMessage("%RETRY%cg", 0, 0, 20*time.Second)
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("the level-1 copy appeared after %v", d)
	}
	if string(cp.Body) != "job" || cp.ReconsumeTimes != 1 || cp.Properties["RETRY_TOPIC"] != "work" || cp.Properties["ORIGIN_MESSAGE_ID"] == "" || cp.Properties["TAGS"] != "t" {
		t.Fatalf("retry copy %+v", cp)
	}

	// The copy sent back again with the client's limit of 1: past it, so
	// it is a dead letter, at once.
	if r := f.invoke(f.addr(l), rmq.ConsumerSendMsgBack, sendBackExt("cg", cp, 0, 1), nil); r.Code != rmq.Success {
		t.Fatalf("send-back of the copy: %d %s", r.Code, r.Remark)
	}
	dl := f.waitMessage("%DLQ%cg", 0, 0, 10*time.Second)
	if string(dl.Body) != "job" || dl.Properties["RETRY_TOPIC"] != "work" || dl.Properties["ORIGIN_MESSAGE_ID"] != cp.Properties["ORIGIN_MESSAGE_ID"] {
		t.Fatalf("dead letter %+v", dl)
	}
	// Delay level -1: straight to the dead letters, whatever the count.
	if r := f.invoke(f.addr(l), rmq.ConsumerSendMsgBack, sendBackExt("cg2", orig, -1, 0), nil); r.Code != rmq.Success {
		t.Fatalf("send-back -1: %d %s", r.Code, r.Remark)
	}
	if dl := f.waitMessage("%DLQ%cg2", 0, 0, 10*time.Second); string(dl.Body) != "job" {
		t.Fatalf("dead letter of level -1: %+v", dl)
	}
	if ms := f.pullAt(f.addr(f.c.Leader()), "%RETRY%cg2", 0, 0); len(ms) != 0 {
		t.Fatal("level -1 also stored a retry copy")
	}

	// Offsets that name no stored message, and malformed headers: SYSTEM_ERROR
	// (the client then falls back to a SEND to %RETRY%).
	for name, ext := range map[string]map[string]string{
		"no such entry": sendBackExt("cg", rmq.MessageExt{PhysicalOffset: 1 << 40, Topic: "work"}, 0, 0),
		"zero offset":   sendBackExt("cg", rmq.MessageExt{Topic: "work"}, 0, 0),
		"no group":      sendBackExt("", orig, 0, 0),
		"bad level":     {"group": "cg", "offset": strconv.FormatInt(orig.PhysicalOffset, 10), "delayLevel": "x"},
	} {
		if r := f.invoke(f.addr(fo), rmq.ConsumerSendMsgBack, ext, nil); r.Code != rmq.SystemError {
			t.Errorf("%s: %d %s, want SYSTEM_ERROR", name, r.Code, r.Remark)
		}
	}
}

func TestQueueLocksThroughTheProtocol(t *testing.T) {
	f := newFixture(t)
	f.createTopic("ordered", 2)
	fo := f.follower()
	body := func(client string, queues ...int) []byte {
		b := map[string]any{"consumerGroup": "og", "clientId": client}
		var mqs []map[string]any
		for _, q := range queues {
			mqs = append(mqs, map[string]any{"topic": "ordered", "brokerName": "raftmq", "queueId": q})
		}
		b["mqSet"] = mqs
		out, _ := json.Marshal(b)
		return out
	}
	lock := func(addr, client string, queues ...int) []int {
		t.Helper()
		r := f.invoke(addr, rmq.LockBatchMQ, nil, body(client, queues...))
		if r.Code != rmq.Success {
			t.Fatalf("lock by %s: %d %s", client, r.Code, r.Remark)
		}
		var out struct {
			MQs []struct {
				Topic      string `json:"topic"`
				BrokerName string `json:"brokerName"`
				QueueID    int    `json:"queueId"`
			} `json:"lockOKMQSet"`
		}
		if err := json.Unmarshal(r.Body, &out); err != nil {
			t.Fatalf("lock answer %q: %v", r.Body, err)
		}
		var qs []int
		for _, m := range out.MQs {
			if m.Topic != "ordered" || m.BrokerName != "raftmq" {
				t.Fatalf("lock answer names %+v, not the queue asked for", m)
			}
			qs = append(qs, m.QueueID)
		}
		return qs
	}
	// Through a follower: forwarded to the leader, which holds the table.
	if got := lock(f.addr(fo), "c1", 0, 1); len(got) != 2 {
		t.Fatalf("c1 locked %v, want both queues", got)
	}
	if got := lock(f.addr(f.c.Leader()), "c2", 0, 1); len(got) != 0 {
		t.Fatalf("c2 locked %v while c1 holds both", got)
	}
	if got := lock(f.addr(fo), "c1", 1); len(got) != 1 || got[0] != 1 {
		t.Fatalf("c1's renewal answered %v", got)
	}
	if r := f.invoke(f.addr(fo), rmq.UnlockBatchMQ, nil, body("c1", 0)); r.Code != rmq.Success {
		t.Fatalf("unlock: %d %s", r.Code, r.Remark)
	}
	if got := lock(f.addr(fo), "c2", 0, 1); len(got) != 1 || got[0] != 0 {
		t.Fatalf("after c1 unlocked queue 0, c2 locked %v", got)
	}
	for name, b := range map[string][]byte{"garbage": []byte("{"), "unknown topic": []byte(`{"consumerGroup":"og","clientId":"c","mqSet":[{"topic":"nope","brokerName":"raftmq","queueId":0}]}`),
		"no client": []byte(`{"consumerGroup":"og","mqSet":[]}`)} {
		if r := f.invoke(f.addr(fo), rmq.LockBatchMQ, nil, b); r.Code != rmq.SystemError {
			t.Errorf("lock with %s: %d %s, want SYSTEM_ERROR", name, r.Code, r.Remark)
		}
	}
}

func TestViewMessageByIDThroughTheProtocol(t *testing.T) {
	f := newFixture(t)
	f.createTopic("viewed", 1)
	l := f.c.Leader()
	send := f.invoke(f.addr(l), rmq.SendMessage, sendExt("viewed", 0, map[string]string{"UNIQ_KEY": "V1", "KEYS": "k", "color": "blue"}), []byte("look"))
	if send.Code != rmq.Success {
		t.Fatalf("send: %d %s", send.Code, send.Remark)
	}
	m := f.waitMessage("viewed", 0, 0, 10*time.Second)
	if got := rmq.OffsetMessageID(mustAddrPort(t, f.addr(l)), m.PhysicalOffset); got != send.Ext["msgId"] {
		t.Fatalf("the send's msgId %s is not the pulled message's %s", send.Ext["msgId"], got)
	}
	for i := 0; i < f.c.Size(); i++ {
		var r *rmq.Command
		deadline := time.Now().Add(10 * time.Second)
		for {
			r = f.invoke(f.addr(i), rmq.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(m.PhysicalOffset, 10)}, nil)
			if r.Code == rmq.Success || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if r.Code != rmq.Success {
			t.Fatalf("view on node %d: %d %s", i, r.Code, r.Remark)
		}
		ms, err := rmq.DecodeMessageExts(r.Body)
		if err != nil || len(ms) != 1 {
			t.Fatalf("view body on node %d: %d messages, %v", i, len(ms), err)
		}
		v := ms[0]
		if string(v.Body) != "look" || v.Topic != "viewed" || v.QueueOffset != 0 || v.PhysicalOffset != m.PhysicalOffset || v.Properties["color"] != "blue" || v.Properties["KEYS"] != "k" {
			t.Fatalf("viewed on node %d: %+v", i, v)
		}
	}
	if r := f.invoke(f.addr(f.follower()), rmq.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(1<<40, 10)}, nil); r.Code != rmq.SystemError {
		t.Fatalf("view of no message: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(l), rmq.ViewMessageByID, map[string]string{"offset": "x"}, nil); r.Code != rmq.SystemError {
		t.Fatalf("view of a malformed offset: %d %s", r.Code, r.Remark)
	}
}

func TestDelayedAndRetrySendsThroughTheProtocol(t *testing.T) {
	f := newFixture(t)
	f.createTopic("later", 1)
	l, fo := f.c.Leader(), f.follower()
	// DELAY=1 through a follower: acknowledged now, readable after 1 s.
	start := time.Now()
	if r := f.invoke(f.addr(fo), rmq.SendMessage, sendExt("later", 0, map[string]string{"UNIQ_KEY": "D1", "DELAY": "1"}), []byte("soon")); r.Code != rmq.Success {
		t.Fatalf("delayed send: %d %s", r.Code, r.Remark)
	}
	if ms := f.pullAt(f.addr(l), "later", 0, 0); len(ms) != 0 {
		t.Fatal("a DELAY=1 message was readable at once")
	}
	m := f.waitMessage("later", 0, 0, 20*time.Second)
	if d := time.Since(start); d < 900*time.Millisecond || string(m.Body) != "soon" {
		t.Fatalf("delayed message %q after %v", m.Body, d)
	}
	// TIMER_DELIVER_MS (the Go client's WithStartDeliverTime... the absolute time).
	at := time.Now().Add(1500 * time.Millisecond)
	if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("later", 0, map[string]string{"TIMER_DELIVER_MS": strconv.FormatInt(at.UnixMilli(), 10)}), []byte("timed")); r.Code != rmq.Success {
		t.Fatalf("timed send: %d %s", r.Code, r.Remark)
	}
	if ms := f.pullAt(f.addr(l), "later", 0, 1); len(ms) != 0 {
		t.Fatal("a timed message was readable before its time")
	}
	if m := f.waitMessage("later", 0, 1, 20*time.Second); time.Now().Before(at) || string(m.Body) != "timed" {
		t.Fatalf("timed message %q early (due %v)", m.Body, at)
	}
	if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("later", 0, map[string]string{"TIMER_DELAY_SEC": "3"}), []byte("x")); r.Code != rmq.MessageIllegal {
		t.Fatalf("a relative timer: %d %s, want MESSAGE_ILLEGAL", r.Code, r.Remark)
	}

	// The client's send-back fallback: a SEND to %RETRY%cg keeping the
	// original UNIQ_KEY, with the reconsume count and limit in the header.
	// Within the limit it waits its DELAY in the retry topic; past it, it
	// is a dead letter.
	hb := map[string]any{"clientID": "c1", "producerDataSet": []any{}, "consumerDataSet": []any{map[string]any{"groupName": "cg", "consumeType": "CONSUME_PASSIVELY",
		"messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": []any{map[string]any{"topic": "%RETRY%cg", "subString": "*"}}}}}
	hbody, _ := json.Marshal(hb)
	if r := f.invoke(f.addr(l), rmq.HeartBeat, nil, hbody); r.Code != rmq.Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	retry := func(reconsume, maxTimes int) *rmq.Command {
		ext := sendExt("%RETRY%cg", 0, map[string]string{"UNIQ_KEY": "D1", "DELAY": strconv.Itoa(3 + reconsume - 1), "RETRY_TOPIC": "later", "ORIGIN_MESSAGE_ID": "O1"})
		ext["reconsumeTimes"], ext["maxReconsumeTimes"] = strconv.Itoa(reconsume), strconv.Itoa(maxTimes)
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := f.invoke(f.addr(f.c.Leader()), rmq.SendMessage, ext, []byte("again"))
			if r.Code != rmq.ServiceNotAvailable || time.Now().After(deadline) {
				return r
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	start = time.Now()
	if r := retry(1, 2); r.Code != rmq.Success {
		t.Fatalf("fallback retry send: %d %s", r.Code, r.Remark)
	}
	if ms := f.pullAt(f.addr(f.c.Leader()), "%RETRY%cg", 0, 0); len(ms) != 0 {
		t.Fatal("the fallback's DELAY=3 retry was readable at once")
	}
	// The same fallback sent again (a client retry after a lost answer) is
	// stored once: keyed by UNIQ_KEY and reconsume count.
	if r := retry(1, 2); r.Code != rmq.Success {
		t.Fatalf("fallback resent: %d %s", r.Code, r.Remark)
	}
	if r := retry(3, 2); r.Code != rmq.Success {
		t.Fatalf("fallback send past the limit: %d %s", r.Code, r.Remark)
	}
	dl := f.waitMessage("%DLQ%cg", 0, 0, 10*time.Second)
	if string(dl.Body) != "again" || dl.Properties["RETRY_TOPIC"] != "later" || dl.ReconsumeTimes != 3 {
		t.Fatalf("dead letter of the fallback %+v", dl)
	}
	rc := f.waitMessage("%RETRY%cg", 0, 0, 30*time.Second)
	if d := time.Since(start); d < 9*time.Second || rc.ReconsumeTimes != 1 || string(rc.Body) != "again" {
		t.Fatalf("fallback retry copy (reconsume %d) after %v, want 1 after level 3 (10 s)", rc.ReconsumeTimes, d)
	}
	time.Sleep(time.Second) // a second copy would be due a moment after the first
	if ms := f.pullAt(f.addr(f.c.Leader()), "%RETRY%cg", 0, 0); len(ms) != 1 {
		t.Fatalf("%d retry copies of one fallback sent twice", len(ms))
	}
}
