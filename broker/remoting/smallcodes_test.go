package remoting_test

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// CHECK_CLIENT_CONFIG compiles the subscription as pulls would: SUCCESS, or
// SUBSCRIPTION_PARSE_FAILED (23) with the compiler's error.
func TestCheckClientConfig(t *testing.T) {
	f := newFixture(t)
	addr := f.addr(f.follower()) // any node answers it
	body := func(typ, expr string) []byte {
		// As the Java client's fastjson writes CheckClientRequestBody.
		b, _ := json.Marshal(map[string]any{"clientId": "10.0.0.1@1", "group": "cg", "subscriptionData": map[string]any{
			"classFilterMode": false, "codeSet": []int{}, "expressionType": typ, "subString": expr, "subVersion": time.Now().UnixMilli(),
			"tagsSet": []string{}, "topic": "orders"}})
		return b
	}
	for _, c := range []struct {
		body   []byte
		code   int32
		remark string
	}{
		{body("SQL92", "a > 1 AND color = 'red'"), rmq.Success, ""},
		{body("SQL92", "a >"), rmq.SubscriptionParseFailed, "SQL92"},
		{body("SQL92", ""), rmq.SubscriptionParseFailed, "SQL92"},
		{body("TAG", "tagA || tagB"), rmq.Success, ""},
		{body("", "*"), rmq.Success, ""},
		{body("TAG", "a | b"), rmq.SubscriptionParseFailed, "single"},
		{body("XPATH", "/a"), rmq.SubscriptionParseFailed, "want TAG or SQL92"},
		{nil, rmq.Success, ""},
		{[]byte(`{"clientId":"c","group":"g"}`), rmq.Success, ""},
		{[]byte(`{`), rmq.SystemError, "body"},
	} {
		r := f.invoke(addr, rmq.CheckClientConfig, map[string]string{}, c.body)
		if r.Code != c.code || !strings.Contains(r.Remark, c.remark) {
			t.Errorf("%s: %d %q, want %d with %q", c.body, r.Code, r.Remark, c.code, c.remark)
		}
	}
}

// GET_EARLIEST_MSG_STORETIME is the store time of the queue's first message
// as pulls show it, -1 while the queue is empty; LITE_PULL_MESSAGE is
// answered as PULL_MESSAGE is.
func TestEarliestStoreTimeAndLitePull(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	f.createTopic("early", 2)
	q := map[string]string{"topic": "early", "queueId": "1", "bname": "raftmq"}
	if r := f.invoke(f.addr(l), rmq.GetEarliestMsgStoreTime, q, nil); r.Code != rmq.Success || r.Ext["timestamp"] != "-1" {
		t.Fatalf("empty queue: %d %q %v", r.Code, r.Remark, r.Ext)
	}
	for i := 0; i < 3; i++ {
		if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("early", 1, map[string]string{"UNIQ_KEY": "E" + strconv.Itoa(i)}), []byte("m"+strconv.Itoa(i))); r.Code != rmq.Success {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
		time.Sleep(5 * time.Millisecond)
	}
	pullExt := map[string]string{"consumerGroup": "cg", "topic": "early", "queueId": "1", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
	pulled := f.invoke(f.addr(l), rmq.PullMessage, pullExt, nil)
	lite := f.invoke(f.addr(l), rmq.LitePullMessage, pullExt, nil)
	if pulled.Code != rmq.Success || lite.Code != rmq.Success || string(lite.Body) != string(pulled.Body) || lite.Ext["nextBeginOffset"] != "3" {
		t.Fatalf("lite pull %d %q %v, pull %d %v", lite.Code, lite.Remark, lite.Ext, pulled.Code, pulled.Ext)
	}
	msgs, err := rmq.DecodeMessageExts(lite.Body)
	if err != nil || len(msgs) != 3 || string(msgs[0].Body) != "m0" {
		t.Fatalf("lite pull body: %d messages, %v", len(msgs), err)
	}
	want := strconv.FormatInt(msgs[0].StoreTimestamp, 10)
	if r := f.invoke(f.addr(l), rmq.GetEarliestMsgStoreTime, q, nil); r.Code != rmq.Success || r.Ext["timestamp"] != want {
		t.Fatalf("earliest store time: %d %q %v, want %s", r.Code, r.Remark, r.Ext, want)
	}
	// A follower answers the same once it has applied the messages.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := f.invoke(f.addr(f.follower()), rmq.GetEarliestMsgStoreTime, q, nil)
		if r.Code == rmq.Success && r.Ext["timestamp"] == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower: %d %q %v, want %s", r.Code, r.Remark, r.Ext, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := f.invoke(f.addr(l), rmq.GetEarliestMsgStoreTime, map[string]string{"topic": "nope", "queueId": "0"}, nil); r.Code != rmq.TopicNotExist {
		t.Fatalf("missing topic: %d %q", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(l), rmq.GetEarliestMsgStoreTime, map[string]string{"topic": "early", "queueId": "7"}, nil); r.Code == rmq.Success {
		t.Fatalf("queue 7 of 2: %d %v", r.Code, r.Ext)
	}
}

// The table of every RocketMQ request code in docs/rocketmq.md says what a
// node answers: each code marked served (or refused by name) is not
// answered 3, every other code is answered 3 with its number in the remark.
func TestDocumentedCodesMatch(t *testing.T) {
	doc, err := os.ReadFile("../../docs/rocketmq.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "### Every RocketMQ request code")
	if !ok {
		t.Fatal("docs/rocketmq.md has no table of every request code")
	}
	f := newFixture(t)
	addr := f.addr(f.c.Leader())
	rows := 0
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			continue
		}
		code, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			continue
		}
		rows++
		// "refused by name": understood and answered with a remark
		// that says why, not 3.
		served := strings.HasPrefix(strings.TrimSpace(cells[3]), "served") || strings.HasPrefix(strings.TrimSpace(cells[3]), "refused")
		if name := strings.TrimSpace(cells[2]); rmq.CodeName(int32(code)) != name {
			t.Errorf("code %d is %s in the docs, %q in the code", code, name, rmq.CodeName(int32(code)))
		}
		r := f.invoke(addr, int32(code), map[string]string{}, nil)
		switch {
		case served && r.Code == rmq.RequestCodeNotSupported:
			t.Errorf("code %d documented as served, answered 3: %q", code, r.Remark)
		case !served && (r.Code != rmq.RequestCodeNotSupported || !strings.Contains(r.Remark, strconv.Itoa(code))):
			t.Errorf("code %d documented as not served, answered %d: %q", code, r.Code, r.Remark)
		}
	}
	if rows < 150 {
		t.Fatalf("%d rows in the table", rows)
	}
}
