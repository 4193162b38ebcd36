package remoting_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/namesrv"
	rmq "github.com/raftmq/raftmq/remoting"
)

// sgWrapper is RocketMQ's SubscriptionGroupWrapper as its tools decode it
// (remoting/.../protocol/body/SubscriptionGroupWrapper.java).
type sgWrapper struct {
	SubscriptionGroupTable map[string]struct {
		GroupName              string `json:"groupName"`
		ConsumeEnable          bool   `json:"consumeEnable"`
		ConsumeBroadcastEnable bool   `json:"consumeBroadcastEnable"`
		RetryMaxTimes          int    `json:"retryMaxTimes"`
		RetryQueueNums         int    `json:"retryQueueNums"`
	} `json:"subscriptionGroupTable"`
	DataVersion struct {
		Timestamp int64 `json:"timestamp"`
		Counter   int64 `json:"counter"`
	} `json:"dataVersion"`
}

// TestAdminTopicsAndGroups: RocketMQ's admin requests for topics and
// subscription groups, sent to a follower (state changes go to the
// leader): UPDATE_AND_CREATE_TOPIC with another count for an existing
// topic (smaller refused by name; larger refused by name when every group
// of the cluster holds the topic), DELETE_TOPIC_IN_BROKER (the route goes;
// again: SUCCESS), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP onto the group's
// retry count, GET_ALL_SUBSCRIPTIONGROUP_CONFIG in the wrapper's shape,
// DELETE_SUBSCRIPTIONGROUP.
func TestAdminTopicsAndGroups(t *testing.T) {
	f := newFixture(t)
	f.createTopic("orders", 4)
	fo := f.addr(f.follower())

	update := func(n string) *rmq.Command {
		return f.invoke(fo, rmq.UpdateAndCreateTopic, map[string]string{"topic": "orders", "writeQueueNums": n, "readQueueNums": n, "perm": "6"}, nil)
	}
	if r := update("4"); r.Code != rmq.Success {
		t.Fatalf("same count: %d %s", r.Code, r.Remark)
	}
	if r := update("2"); r.Code != rmq.SystemError || !strings.Contains(r.Remark, "raftmq does not remove a topic's queues") {
		t.Fatalf("smaller count: %d %s", r.Code, r.Remark)
	}
	if r := update("8"); r.Code != rmq.SystemError || !strings.Contains(r.Remark, "every broker group of cluster DefaultCluster holds the topic already") {
		t.Fatalf("larger count, one group: %d %s", r.Code, r.Remark)
	}

	// Groups.
	cfg := `{"groupName":"cg","consumeEnable":true,"consumeBroadcastEnable":true,"consumeFromMinEnable":true,"retryMaxTimes":5,"retryQueueNums":1,"brokerId":0,"whichBrokerWhenConsumeSlowly":1,"notifyConsumerIdsChangedEnable":true}`
	if r := f.invoke(fo, rmq.UpdateAndCreateSubscriptionGroup, nil, []byte(cfg)); r.Code != rmq.Success {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(fo, rmq.UpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"cg","consumeEnable":false}`)); r.Code != rmq.SystemError || !strings.Contains(r.Remark, "consumeEnable false") {
		t.Fatalf("paused group: %d %s", r.Code, r.Remark)
	}
	all := func() sgWrapper {
		t.Helper()
		r := f.invoke(fo, rmq.GetAllSubscriptionGroupConfig, nil, nil)
		if r.Code != rmq.Success {
			t.Fatalf("all groups: %d %s", r.Code, r.Remark)
		}
		var w sgWrapper
		if err := json.Unmarshal(r.Body, &w); err != nil {
			t.Fatalf("all groups: %v: %s", err, r.Body)
		}
		return w
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		w := all()
		g, ok := w.SubscriptionGroupTable["cg"]
		if ok && g.RetryMaxTimes == 5 && g.GroupName == "cg" && g.ConsumeEnable && g.ConsumeBroadcastEnable && w.DataVersion.Timestamp > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group cg: %+v", w)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := f.invoke(fo, rmq.DeleteSubscriptionGroup, map[string]string{"groupName": "cg", "cleanOffset": "true"}, nil); r.Code != rmq.Success {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	if _, ok := all().SubscriptionGroupTable["cg"]; ok {
		t.Fatal("deleted group still listed")
	}
	if r := f.invoke(fo, rmq.DeleteSubscriptionGroup, map[string]string{"groupName": "cg"}, nil); r.Code != rmq.Success {
		t.Fatalf("delete a deleted group: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(fo, rmq.DeleteSubscriptionGroup, nil, nil); r.Code != rmq.SystemError || !strings.Contains(r.Remark, "groupName") {
		t.Fatalf("delete without a name: %d %s", r.Code, r.Remark)
	}

	// Topic deletion: the group registers without it.
	if r := f.invoke(fo, rmq.DeleteTopicInBroker, map[string]string{"topic": "orders"}, nil); r.Code != rmq.Success {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	for {
		if _, has := f.ns.Groups()["raftmq"].Topics["orders"]; !has {
			break
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("deleted topic still registered")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := f.invoke(fo, rmq.DeleteTopicInBroker, map[string]string{"topic": "orders"}, nil); r.Code != rmq.Success {
		t.Fatalf("delete a deleted topic: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(fo, rmq.DeleteTopicInBroker, map[string]string{"topic": "%RETRY%x"}, nil); r.Code != rmq.SystemError || !strings.Contains(r.Remark, "system topic") {
		t.Fatalf("delete a system topic: %d %s", r.Code, r.Remark)
	}
}

// TestAdminResetAndBrokerConfig: INVOKE_BROKER_TO_RESET_OFFSET (the
// ResetOffsetRequestHeader's fields) commits the offsets through Raft and
// answers them as ResetOffsetBody; GET_BROKER_CONFIG answers Properties
// text; UPDATE_BROKER_CONFIG is refused naming each key.
func TestAdminResetAndBrokerConfig(t *testing.T) {
	f := newFixture(t)
	l, fo := f.c.Leader(), f.follower()
	f.createTopic("orders", 2)
	for i := 0; i < 4; i++ {
		if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("orders", 0, nil), []byte("m")); r.Code != rmq.Success {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	if r := f.invoke(f.addr(l), rmq.UpdateConsumerOffset, map[string]string{"consumerGroup": "cg", "topic": "orders", "queueId": "0", "commitOffset": "4"}, nil); r.Code != rmq.Success {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	// To the beginning (a time before every message), forced, through a follower.
	r := f.invoke(f.addr(fo), rmq.InvokeBrokerToResetOffset, map[string]string{"topic": "orders", "group": "cg", "timestamp": "1", "isForce": "true"}, nil)
	if r.Code != rmq.Success || string(r.Body) != `{"offsetTable":{{"topic":"orders","brokerName":"raftmq","queueId":0}:0,{"topic":"orders","brokerName":"raftmq","queueId":1}:0}}` {
		t.Fatalf("reset: %d %s %s", r.Code, r.Remark, r.Body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		offs, _ := f.c.Node(l).Broker().FetchOffsets("cg", "orders")
		if o, ok := offs[0]; ok && o == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets after the reset: %v", offs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Not forced, to the end: a queue keeps a lower committed offset.
	r = f.invoke(f.addr(l), rmq.InvokeBrokerToResetOffset, map[string]string{"topic": "orders", "group": "cg", "timestamp": "-1", "isForce": "false"}, nil)
	if r.Code != rmq.Success || !strings.Contains(string(r.Body), `"queueId":0}:0`) {
		t.Fatalf("reset to the end, not forced: %d %s %s", r.Code, r.Remark, r.Body)
	}
	// One queue to an offset (RocketMQ 5's queueId and offset).
	r = f.invoke(f.addr(l), rmq.InvokeBrokerToResetOffset, map[string]string{"topic": "orders", "group": "cg", "timestamp": "0", "isForce": "true", "queueId": "0", "offset": "3"}, nil)
	if r.Code != rmq.Success || string(r.Body) != `{"offsetTable":{{"topic":"orders","brokerName":"raftmq","queueId":0}:3}}` {
		t.Fatalf("reset one queue: %d %s %s", r.Code, r.Remark, r.Body)
	}
	for _, bad := range []map[string]string{
		{"topic": "orders", "group": "cg"},
		{"topic": "nope", "group": "cg", "timestamp": "1"},
		{"topic": "orders", "group": "cg", "timestamp": "1", "queueId": "9"},
	} {
		if r := f.invoke(f.addr(l), rmq.InvokeBrokerToResetOffset, bad, nil); r.Code == rmq.Success || r.Remark == "" {
			t.Fatalf("reset %v: %d %s", bad, r.Code, r.Remark)
		}
	}

	// Broker config.
	r = f.invoke(f.addr(fo), rmq.GetBrokerConfig, nil, nil)
	if r.Code != rmq.Success || !strings.Contains(string(r.Body), "brokerName=raftmq\n") || !strings.Contains(string(r.Body), "brokerClusterName=DefaultCluster\n") || r.Ext["version"] == "" {
		t.Fatalf("broker config: %d %s %s %v", r.Code, r.Remark, r.Body, r.Ext)
	}
	r = f.invoke(f.addr(fo), rmq.UpdateBrokerConfig, nil, []byte("brokerName=x\nflushDiskType=SYNC_FLUSH\n"))
	if r.Code != rmq.SystemError || !strings.Contains(r.Remark, "brokerName is set by --broker-name at start") || !strings.Contains(r.Remark, "flushDiskType is not a raftmq setting") {
		t.Fatalf("update broker config: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(fo), rmq.GetConsumerRunningInfo, map[string]string{"consumerGroup": "cg", "clientId": "nobody"}, nil); r.Code != rmq.SystemError || !strings.Contains(r.Remark, "not online") {
		t.Fatalf("running info of a client not connected: %d %s", r.Code, r.Remark)
	}
}

// TestAdminCodesWithBadInput: every admin code, sent with no fields and a
// body that is not what it expects, is answered (never a crash or a
// closed connection), and only the reads that need no input succeed.
func TestAdminCodesWithBadInput(t *testing.T) {
	f := newFixture(t)
	fo := f.addr(f.follower())
	reads := map[int32]bool{rmq.GetAllSubscriptionGroupConfig: true, rmq.GetAllTopicConfig: true, rmq.GetBrokerRuntimeInfo: true,
		rmq.GetBrokerConfig: true, rmq.QueryTopicConsumeByWho: true}
	for _, code := range []int32{rmq.UpdateAndCreateTopic, rmq.DeleteTopicInBroker, rmq.UpdateAndCreateSubscriptionGroup, rmq.GetAllSubscriptionGroupConfig,
		rmq.DeleteSubscriptionGroup, rmq.GetAllTopicConfig, rmq.GetTopicStatsInfo, rmq.GetConsumeStats, rmq.GetConsumerConnectionList,
		rmq.GetProducerConnectionList, rmq.QueryTopicConsumeByWho, rmq.GetBrokerRuntimeInfo, rmq.InvokeBrokerToResetOffset,
		rmq.GetConsumerRunningInfo, rmq.GetBrokerConfig, rmq.UpdateBrokerConfig} {
		for _, body := range [][]byte{nil, []byte("{\x00garbage")} {
			r := f.invoke(fo, code, map[string]string{"topic": "\x00", "queueId": "x"}, body)
			if (r.Code == rmq.Success) != reads[code] || r.Code != rmq.Success && r.Remark == "" {
				t.Errorf("code %s, body %q: %d %q", rmq.DescribeCode(code), body, r.Code, r.Remark)
			}
		}
	}
	// The connection still serves.
	if r := f.invoke(fo, rmq.GetBrokerRuntimeInfo, nil, nil); r.Code != rmq.Success {
		t.Fatalf("after the bad requests: %d %s", r.Code, r.Remark)
	}
}

// TestAdminTopicGrowsOntoAnotherGroup: UPDATE_AND_CREATE_TOPIC with a
// larger queue count for a topic one group holds adds the difference on
// the cluster's group that does not hold it, as `raftmq topic update
// --add-queues` does; the route then has both groups' queues.
func TestAdminTopicGrowsOntoAnotherGroup(t *testing.T) {
	ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	group := func(name string) *servertest.Cluster {
		return servertest.New(t, 1, servertest.InMemory(), servertest.Configure(func(i int, cfg *server.Config) {
			cfg.Broker.Group = name
			cfg.Remoting = "127.0.0.1:0"
			cfg.RemotingConfig.NameServers = []string{ns.Addr()}
			cfg.RemotingConfig.RegisterPeriod = time.Second
		}))
	}
	ga, gb := group("ga"), group("gb")
	cl := rmq.NewClient()
	t.Cleanup(func() { cl.Close() })
	f := &fixture{t: t, c: ga, ns: ns, cl: cl}
	deadline := time.Now().Add(20 * time.Second)
	for len(ns.Groups()) < 2 || ns.Groups()["gb"].Addrs[0] == "" {
		if time.Now().After(deadline) {
			t.Fatalf("groups registered: %v", ns.Groups())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ext := func(n string) map[string]string {
		return map[string]string{"topic": "wide", "writeQueueNums": n, "readQueueNums": n}
	}
	if r := f.invoke(ga.Node(0).RemotingAddr(), rmq.UpdateAndCreateTopic, ext("2"), nil); r.Code != rmq.Success {
		t.Fatalf("create: %d %s", r.Code, r.Remark)
	}
	for {
		if q, ok := ns.Groups()["ga"].Topics["wide"]; ok && q == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ga never registered the topic")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := f.invoke(ga.Node(0).RemotingAddr(), rmq.UpdateAndCreateTopic, ext("5"), nil); r.Code != rmq.Success {
		t.Fatalf("grow: %d %s", r.Code, r.Remark)
	}
	if ti, err := gb.Node(0).Broker().Topic("wide"); err != nil || len(ti.Queues) != 3 {
		t.Fatalf("gb's topic after the grow: %+v %v", ti, err)
	}
	for {
		if q := ns.Groups()["gb"].Topics["wide"]; q == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gb never registered the grown topic")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every group holds it now: a larger count is refused by name.
	if r := f.invoke(gb.Node(0).RemotingAddr(), rmq.UpdateAndCreateTopic, ext("9"), nil); r.Code != rmq.SystemError || !strings.Contains(r.Remark, "every broker group") {
		t.Fatalf("grow with no group left: %d %s", r.Code, r.Remark)
	}
}
