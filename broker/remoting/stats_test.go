package remoting_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// fjQueue is RocketMQ's MessageQueue as a fastjson map key.
type fjQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// decodeQueueTable reads a fastjson Map<MessageQueue, V>: an object whose
// keys are MessageQueue objects (not strict JSON), as RocketMQ's tools
// parse TopicStatsTable.offsetTable and ConsumeStats.offsetTable.
func decodeQueueTable(b []byte) (map[fjQueue]json.RawMessage, error) {
	out := map[fjQueue]json.RawMessage{}
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return nil, errors.New("not an object")
	}
	rest := bytes.TrimSpace(b[1 : len(b)-1])
	for len(rest) > 0 {
		d := json.NewDecoder(bytes.NewReader(rest))
		var k fjQueue
		if err := d.Decode(&k); err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		rest = bytes.TrimSpace(rest[d.InputOffset():])
		if len(rest) == 0 || rest[0] != ':' {
			return nil, errors.New("want ':' after a key")
		}
		rest = rest[1:]
		d = json.NewDecoder(bytes.NewReader(rest))
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("value: %w", err)
		}
		out[k] = v
		rest = bytes.TrimSpace(rest[d.InputOffset():])
		if len(rest) > 0 {
			if rest[0] != ',' {
				return nil, errors.New("want ',' between entries")
			}
			rest = bytes.TrimSpace(rest[1:])
		}
	}
	return out, nil
}

func TestDecodeQueueTable(t *testing.T) {
	for in, want := range map[string]string{
		`{}`: "0",
		`{{"brokerName":"b","queueId":1,"topic":"t"}:{"maxOffset":3}}`:                                            "1",
		`{{"brokerName":"b","queueId":0,"topic":"t"}:{"x":1},{"brokerName":"b","queueId":1,"topic":"t"}:{"x":2}}`: "2",
		`[`:                    "error",
		`{{"queueId":"x"}:{}}`: "error",
		`{{"queueId":1} {}}`:   "error",
		`{{"queueId":1}:}`:     "error",
		`{{"queueId":1}:{} x}`: "error",
	} {
		m, err := decodeQueueTable([]byte(in))
		got := fmt.Sprint(len(m))
		if err != nil {
			got = "error"
		}
		if got != want && !(want == "error" && errors.Is(err, io.EOF)) {
			t.Errorf("%s: %s (%v), want %s", in, got, err, want)
		}
	}
}

// TestAdminStats: the statistics RocketMQ's admin tools read, with the
// Java headers' field names, decoded into the Java shapes:
// GET_ALL_TOPIC_CONFIG (TopicConfigSerializeWrapper), GET_TOPIC_STATS_INFO
// (TopicStatsTable), GET_CONSUME_STATS (ConsumeStats),
// GET_CONSUMER_CONNECTION_LIST (ConsumerConnection),
// GET_PRODUCER_CONNECTION_LIST (ProducerConnection),
// QUERY_TOPIC_CONSUME_BY_WHO (GroupList), GET_BROKER_RUNTIME_INFO
// (KVTable).
func TestAdminStats(t *testing.T) {
	f := newFixture(t)
	l, fo := f.c.Leader(), f.follower()
	f.createTopic("orders", 2)
	for i := 0; i < 3; i++ {
		if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("orders", 1, nil), []byte(fmt.Sprint("m", i))); r.Code != rmq.Success {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	if r := f.invoke(f.addr(fo), rmq.UpdateConsumerOffset, map[string]string{"consumerGroup": "cg", "topic": "orders", "queueId": "1", "commitOffset": "2"}, nil); r.Code != rmq.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	hb, _ := json.Marshal(map[string]any{"clientID": "10.0.0.1@1",
		"producerDataSet": []any{map[string]any{"groupName": "pg"}},
		"consumerDataSet": []any{map[string]any{"groupName": "cg", "messageModel": "CLUSTERING", "consumeType": "CONSUME_PASSIVELY", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
			"subscriptionDataSet": []any{map[string]any{"topic": "orders", "subString": "*", "expressionType": "TAG", "tagsSet": []string{}, "codeSet": []int{}, "subVersion": 1}}}}})
	if r := f.invoke(f.addr(fo), rmq.HeartBeat, nil, hb); r.Code != rmq.Success {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}

	// GET_ALL_TOPIC_CONFIG.
	var tw struct {
		TopicConfigTable map[string]struct {
			TopicName      string `json:"topicName"`
			ReadQueueNums  int    `json:"readQueueNums"`
			WriteQueueNums int    `json:"writeQueueNums"`
			Perm           int    `json:"perm"`
		} `json:"topicConfigTable"`
	}
	r := f.invoke(f.addr(fo), rmq.GetAllTopicConfig, nil, nil)
	if err := json.Unmarshal(r.Body, &tw); err != nil || r.Code != rmq.Success {
		t.Fatalf("topic configs: %d %v %s", r.Code, err, r.Body)
	}
	if tc := tw.TopicConfigTable["orders"]; tc.TopicName != "orders" || tc.ReadQueueNums != 2 || tc.WriteQueueNums != 2 || tc.Perm != 6 {
		t.Fatalf("topic config of orders: %+v", tc)
	}

	// GET_TOPIC_STATS_INFO, on the leader (a follower may not have
	// applied the sends yet).
	r = f.invoke(f.addr(l), rmq.GetTopicStatsInfo, map[string]string{"topic": "orders"}, nil)
	body := string(r.Body)
	if r.Code != rmq.Success || !strings.HasPrefix(body, `{"offsetTable":`) {
		t.Fatalf("topic stats: %d %s %s", r.Code, r.Remark, body)
	}
	table, err := decodeQueueTable([]byte(strings.TrimSuffix(strings.TrimPrefix(body, `{"offsetTable":`), `,"topicPutTps":0.0}`)))
	if err != nil {
		t.Fatalf("topic stats: %v: %s", err, body)
	}
	var off struct{ MinOffset, MaxOffset, LastUpdateTimestamp int64 }
	if err := json.Unmarshal(table[fjQueue{"orders", "raftmq", 1}], &off); err != nil || off.MaxOffset != 3 || off.MinOffset != 0 ||
		time.Since(time.UnixMilli(off.LastUpdateTimestamp)) > time.Minute || len(table) != 2 {
		t.Fatalf("topic stats of orders/1: %+v %v: %s", off, err, body)
	}
	if r := f.invoke(f.addr(l), rmq.GetTopicStatsInfo, map[string]string{"topic": "nope"}, nil); r.Code != rmq.TopicNotExist {
		t.Fatalf("stats of a missing topic: %d %s", r.Code, r.Remark)
	}

	// GET_CONSUME_STATS.
	r = f.invoke(f.addr(fo), rmq.GetConsumeStats, map[string]string{"consumerGroup": "cg", "topic": "orders"}, nil)
	body = string(r.Body)
	if r.Code != rmq.Success || !strings.HasPrefix(body, `{"consumeTps":0.0,"offsetTable":`) {
		t.Fatalf("consume stats: %d %s %s", r.Code, r.Remark, body)
	}
	table, err = decodeQueueTable([]byte(strings.TrimSuffix(strings.TrimPrefix(body, `{"consumeTps":0.0,"offsetTable":`), `}`)))
	if err != nil {
		t.Fatalf("consume stats: %v: %s", err, body)
	}
	var ow struct{ BrokerOffset, ConsumerOffset, PullOffset, LastTimestamp int64 }
	if err := json.Unmarshal(table[fjQueue{"orders", "raftmq", 1}], &ow); err != nil || ow.BrokerOffset != 3 || ow.ConsumerOffset != 2 || ow.LastTimestamp == 0 {
		t.Fatalf("consume stats of orders/1: %+v %v: %s", ow, err, body)
	}
	if r := f.invoke(f.addr(fo), rmq.GetConsumeStats, map[string]string{"consumerGroup": "unknown"}, nil); r.Code != rmq.Success || string(r.Body) != `{"consumeTps":0.0,"offsetTable":{}}` {
		t.Fatalf("consume stats of an unknown group: %d %s %s", r.Code, r.Remark, r.Body)
	}
	if r := f.invoke(f.addr(fo), rmq.GetConsumeStats, nil, nil); r.Code != rmq.SystemError {
		t.Fatalf("consume stats without a group: %d %s", r.Code, r.Remark)
	}

	// GET_CONSUMER_CONNECTION_LIST.
	var cc struct {
		ConnectionSet []struct {
			ClientID, ClientAddr, Language string
			Version                        int
		} `json:"connectionSet"`
		SubscriptionTable map[string]struct {
			Topic, SubString, ExpressionType string
		} `json:"subscriptionTable"`
		ConsumeType, MessageModel, ConsumeFromWhere string
	}
	r = f.invoke(f.addr(fo), rmq.GetConsumerConnectionList, map[string]string{"consumerGroup": "cg"}, nil)
	if err := json.Unmarshal(r.Body, &cc); err != nil || r.Code != rmq.Success || len(cc.ConnectionSet) != 1 || cc.ConnectionSet[0].ClientID != "10.0.0.1@1" ||
		cc.ConnectionSet[0].ClientAddr == "" || cc.ConnectionSet[0].Language != "GO" || cc.MessageModel != "CLUSTERING" || cc.ConsumeType != "CONSUME_PASSIVELY" ||
		cc.SubscriptionTable["orders"].SubString != "*" {
		t.Fatalf("consumer connections: %d %v %s", r.Code, err, r.Body)
	}
	if r := f.invoke(f.addr(fo), rmq.GetConsumerConnectionList, map[string]string{"consumerGroup": "none"}, nil); r.Code != 206 {
		t.Fatalf("connections of a group without clients: %d %s", r.Code, r.Remark)
	}

	// GET_PRODUCER_CONNECTION_LIST.
	var pc struct {
		ConnectionSet []struct{ ClientID string } `json:"connectionSet"`
	}
	r = f.invoke(f.addr(fo), rmq.GetProducerConnectionList, map[string]string{"producerGroup": "pg"}, nil)
	if err := json.Unmarshal(r.Body, &pc); err != nil || len(pc.ConnectionSet) != 1 || pc.ConnectionSet[0].ClientID != "10.0.0.1@1" {
		t.Fatalf("producer connections: %d %v %s", r.Code, err, r.Body)
	}
	if r := f.invoke(f.addr(fo), rmq.GetProducerConnectionList, map[string]string{"producerGroup": "none"}, nil); r.Code != rmq.SystemError {
		t.Fatalf("connections of a producer group without clients: %d %s", r.Code, r.Remark)
	}

	// QUERY_TOPIC_CONSUME_BY_WHO: committed offsets and live subscriptions.
	var gl struct {
		GroupList []string `json:"groupList"`
	}
	r = f.invoke(f.addr(l), rmq.QueryTopicConsumeByWho, map[string]string{"topic": "orders"}, nil)
	if err := json.Unmarshal(r.Body, &gl); err != nil || fmt.Sprint(gl.GroupList) != "[cg]" {
		t.Fatalf("consumed by: %d %v %s", r.Code, err, r.Body)
	}

	// GET_BROKER_RUNTIME_INFO: the keys clusterList parses as numbers.
	var kv struct {
		Table map[string]string `json:"table"`
	}
	r = f.invoke(f.addr(l), rmq.GetBrokerRuntimeInfo, nil, nil)
	if err := json.Unmarshal(r.Body, &kv); err != nil || r.Code != rmq.Success {
		t.Fatalf("runtime info: %d %v %s", r.Code, err, r.Body)
	}
	for _, k := range []string{"msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow"} {
		var n int64
		if _, err := fmt.Sscan(kv.Table[k], &n); err != nil {
			t.Errorf("runtime info %s: %q", k, kv.Table[k])
		}
	}
	if kv.Table["msgPutTotalTodayNow"] == "0" || len(strings.Fields(kv.Table["putTps"])) != 3 || kv.Table["brokerVersionDesc"] == "" {
		t.Fatalf("runtime info: %v", kv.Table)
	}
}
