package remoting_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/namesrv"
	rmq "github.com/raftmq/raftmq/remoting"
)

type fixture struct {
	t   *testing.T
	c   *servertest.Cluster
	ns  *namesrv.Server
	ns2 *namesrv.Server // a second, independent name server
	cl  *rmq.Client
}

func newFixture(t *testing.T) *fixture {
	var nss []*namesrv.Server
	for i := 0; i < 2; i++ {
		ns, err := namesrv.Start(namesrv.Config{Listen: "127.0.0.1:0", Expiry: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		nss = append(nss, ns)
	}
	ns := nss[0]
	c := servertest.New(t, 3, servertest.InMemory(), servertest.Configure(func(i int, cfg *server.Config) {
		cfg.Remoting = "127.0.0.1:0"
		cfg.RemotingConfig.NameServers = []string{nss[0].Addr(), nss[1].Addr()}
		cfg.RemotingConfig.RegisterPeriod = time.Second
		cfg.RemotingConfig.MaxPullWait = 300 * time.Millisecond
		cfg.RemotingConfig.WriteViaFollowers = true
	}))
	cl := rmq.NewClient()
	t.Cleanup(func() { cl.Close() })
	return &fixture{t: t, c: c, ns: ns, ns2: nss[1], cl: cl}
}

func (f *fixture) addr(i int) string { return f.c.Node(i).RemotingAddr() }

func (f *fixture) follower() int {
	l := f.c.Leader()
	return (l + 1) % f.c.Size()
}

func (f *fixture) invoke(addr string, code int32, ext map[string]string, body []byte) *rmq.Command {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := f.cl.Invoke(ctx, addr, rmq.NewRequest(code, ext, body))
	if err != nil {
		f.t.Fatalf("code %d to %s: %v", code, addr, err)
	}
	return resp
}

func (f *fixture) createTopic(name string, queues int) {
	f.t.Helper()
	// To a follower: forwarded to the leader.
	resp := f.invoke(f.addr(f.follower()), rmq.UpdateAndCreateTopic, map[string]string{"topic": name, "writeQueueNums": strconv.Itoa(queues), "readQueueNums": strconv.Itoa(queues)}, nil)
	if resp.Code != rmq.Success {
		f.t.Fatalf("create topic: %d %s", resp.Code, resp.Remark)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < f.c.Size(); i++ {
		for {
			if _, err := f.c.Node(i).Broker().Topic(name); err == nil {
				break
			}
			if time.Now().After(deadline) {
				f.t.Fatalf("node %d never applied topic %s", i, name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func sendExt(topic string, queue int, props map[string]string) map[string]string {
	return map[string]string{"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": strconv.Itoa(queue), "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": rmq.EncodeProperties(props), "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
}

func TestSendAndPullThroughTheProtocol(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	fo := f.follower()
	f.createTopic("orders", 2)

	// A send to a follower is forwarded; the UNIQ_KEY makes its retry a
	// duplicate that is acknowledged with the same offset.
	props := map[string]string{"UNIQ_KEY": "U1", "KEYS": "k1 k2", "TAGS": "tagA", "color": "red"}
	first := f.invoke(f.addr(fo), rmq.SendMessage, sendExt("orders", 1, props), []byte("hello"))
	if first.Code != rmq.Success || first.Ext["queueId"] != "1" || first.Ext["queueOffset"] != "0" || first.Ext["msgId"] == "" {
		t.Fatalf("send: %d %s %v", first.Code, first.Remark, first.Ext)
	}
	// The V2 header (one-letter fields, the Java client's) is the same send.
	v2send := map[string]string{}
	for k, v := range sendExt("orders", 1, props) {
		v2send[map[string]string{"producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e", "sysFlag": "f",
			"bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j", "unitMode": "k", "batch": "m"}[k]] = v
	}
	again := f.invoke(f.addr(l), rmq.SendMessageV2, v2send, []byte("hello"))
	if again.Code != rmq.Success || again.Ext["queueOffset"] != "0" {
		t.Fatalf("retried send: %d %s %v", again.Code, again.Remark, again.Ext)
	}
	// A msgId is the answering node's address and the message's place in
	// the log: the place must agree (the follower unpacked the leader's ack).
	if a, b := first.Ext["msgId"], again.Ext["msgId"]; len(a) != 32 || len(b) != 32 || a[16:] != b[16:] {
		t.Fatalf("the same message acknowledged as %s through the follower and %s by the leader", a, b)
	}
	// A batch (V2 header, one-letter fields), and a compressed body.
	batch := rmq.EncodeBatch([]rmq.BatchMessage{{Body: []byte("b0"), Properties: map[string]string{"TAGS": "tagB"}}, {Body: []byte("b1"), Flag: 3}})
	v2 := map[string]string{"a": "pg", "b": "orders", "e": "1", "f": "0", "g": "0", "h": "0", "i": "", "m": "true"}
	if r := f.invoke(f.addr(l), rmq.SendBatchMessage, v2, batch); r.Code != rmq.Success || r.Ext["queueOffset"] != "1" || strings.Count(r.Ext["msgId"], ",") != 1 {
		t.Fatalf("batch: %d %s %v", r.Code, r.Remark, r.Ext)
	}
	// The same through the follower, to queue 0: the leader's packed acks
	// are unpacked into one id per message, each naming its own place in
	// the log, the places the leader serves the messages from.
	fwd := rmq.EncodeBatch([]rmq.BatchMessage{{Body: []byte("f0")}, {Body: []byte("f1")}, {Body: []byte("f2")}})
	fv2 := map[string]string{"a": "pg", "b": "orders", "e": "0", "f": "0", "g": "0", "h": "0", "i": "", "m": "true"}
	fr := f.invoke(f.addr(fo), rmq.SendBatchMessage, fv2, fwd)
	fids := strings.Split(fr.Ext["msgId"], ",")
	if fr.Code != rmq.Success || fr.Ext["queueOffset"] != "0" || len(fids) != 3 {
		t.Fatalf("batch through the follower: %d %s %v", fr.Code, fr.Remark, fr.Ext)
	}
	q0 := f.invoke(f.addr(l), rmq.PullMessage, map[string]string{"consumerGroup": "cg0", "topic": "orders", "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "0", "subscription": "*", "expressionType": "TAG"}, nil)
	fms, err := rmq.DecodeMessageExts(q0.Body)
	if q0.Code != rmq.Success || err != nil || len(fms) != 3 {
		t.Fatalf("pull of the forwarded batch: %d %s, %d messages, %v", q0.Code, q0.Remark, len(fms), err)
	}
	for i, m := range fms {
		place := rmq.OffsetMessageID(mustAddrPort(t, f.addr(l)), m.PhysicalOffset)[16:]
		if string(m.Body) != fmt.Sprintf("f%d", i) || len(fids[i]) != 32 || fids[i][16:] != place {
			t.Fatalf("forwarded batch message %d: body %q, acknowledged as %s, stored at %s", i, m.Body, fids[i], place)
		}
	}
	z := sendExt("orders", 1, nil)
	z["sysFlag"] = "1"
	if r := f.invoke(f.addr(l), rmq.SendMessage, z, zlibBytes(t, strings.Repeat("z", 5000))); r.Code != rmq.Success || r.Ext["queueOffset"] != "3" {
		t.Fatalf("compressed: %d %s %v", r.Code, r.Remark, r.Ext)
	}
	// Bad input: clear errors, no crash.
	bad := sendExt("orders", 1, nil)
	bad["sysFlag"] = "1"
	if r := f.invoke(f.addr(l), rmq.SendMessage, bad, []byte("not zlib")); r.Code != rmq.MessageIllegal {
		t.Fatalf("garbage compressed body: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(l), rmq.SendBatchMessage, v2, []byte{0, 0, 0, 99}); r.Code != rmq.MessageIllegal {
		t.Fatalf("garbage batch: %d %s", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("orders", 9, nil), []byte("x")); r.Code == rmq.Success {
		t.Fatal("send to queue 9 of 2 accepted")
	}

	// Pull: the v1 layout with the properties restored.
	pull := func(addr string, offset int, suspend bool) *rmq.Command {
		ext := map[string]string{"consumerGroup": "cg", "topic": "orders", "queueId": "1", "queueOffset": strconv.Itoa(offset), "maxMsgNums": "32",
			"sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
		if suspend {
			ext["sysFlag"], ext["suspendTimeoutMillis"] = "2", "20000"
		}
		return f.invoke(addr, rmq.PullMessage, ext, nil)
	}
	r := pull(f.addr(l), 0, false)
	if r.Code != rmq.Success || r.Ext["nextBeginOffset"] != "4" || r.Ext["maxOffset"] != "4" || r.Ext["minOffset"] != "0" || r.Ext["suggestWhichBrokerId"] == "" {
		t.Fatalf("pull: %d %s %v", r.Code, r.Remark, r.Ext)
	}
	msgs, err := rmq.DecodeMessageExts(r.Body)
	if err != nil || len(msgs) != 4 {
		t.Fatalf("pull body: %d messages, %v", len(msgs), err)
	}
	m := msgs[0]
	if string(m.Body) != "hello" || m.Properties["KEYS"] != "k1 k2" || m.Properties["TAGS"] != "tagA" || m.Properties["color"] != "red" || m.Properties["UNIQ_KEY"] != "U1" || m.QueueID != 1 || m.QueueOffset != 0 || m.Topic != "orders" {
		t.Fatalf("message %+v", m)
	}
	if msgs[2].Flag != 3 || msgs[1].Properties["TAGS"] != "tagB" || len(msgs[3].Body) != 5000 {
		t.Fatalf("batch / compressed messages: %+v %+v %d", msgs[2], msgs[1], len(msgs[3].Body))
	}
	// Field 7 names the stored message: the offsetMsgId of the send.
	if got := rmq.OffsetMessageID(mustAddrPort(t, f.addr(l)), m.PhysicalOffset); got != again.Ext["msgId"] {
		t.Fatalf("pulled offsetMsgId %s, the send said %s", got, again.Ext["msgId"])
	}

	// A long poll at the end answers PULL_NOT_FOUND after the hold, with
	// the same next offset.
	start := time.Now()
	if r := pull(f.addr(l), 4, true); r.Code != rmq.PullNotFound || r.Ext["nextBeginOffset"] != "4" {
		t.Fatalf("long poll: %d %v", r.Code, r.Ext)
	} else if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("long poll answered after %v, held for less than the 300ms bound", d)
	}
	// Past the end: the leader says OFFSET_MOVED to the end; a follower
	// never does (trap 4): retry immediately, from brokerId 0.
	if r := pull(f.addr(l), 99, false); r.Code != rmq.PullOffsetMoved || r.Ext["nextBeginOffset"] != "4" {
		t.Fatalf("past the end on the leader: %d %v", r.Code, r.Ext)
	}
	if r := pull(f.addr(fo), 99, false); r.Code != rmq.PullRetryImmediately || r.Ext["suggestWhichBrokerId"] != "0" || r.Ext["nextBeginOffset"] != "99" {
		t.Fatalf("past the end on a follower: %d %v", r.Code, r.Ext)
	}
	if r := pull(f.addr(l), 0, false); r.Code != rmq.Success {
		t.Fatalf("pull after bad pulls: %d", r.Code)
	}
	// A tag subscription is filtered on the node: only tagA travels, and
	// the next offset moves past the rest.
	tagPull := map[string]string{"consumerGroup": "cg", "topic": "orders", "queueId": "1", "queueOffset": "0", "maxMsgNums": "32",
		"sysFlag": "0", "subscription": "tagA", "expressionType": "TAG"}
	if r := f.invoke(f.addr(l), rmq.PullMessage, tagPull, nil); r.Code != rmq.Success || r.Ext["nextBeginOffset"] != "4" {
		t.Fatalf("tag pull: %d %s %v", r.Code, r.Remark, r.Ext)
	} else if ms, err := rmq.DecodeMessageExts(r.Body); err != nil || len(ms) != 1 || ms[0].Properties["TAGS"] != "tagA" {
		t.Fatalf("tag pull served %d messages (%v), want the one tagA", len(ms), err)
	}
	tagPull["subscription"], tagPull["expressionType"] = "color = 'red'", "SQL92"
	if r := f.invoke(f.addr(l), rmq.PullMessage, tagPull, nil); r.Code != rmq.Success {
		t.Fatalf("sql pull: %d %s", r.Code, r.Remark)
	} else if ms, _ := rmq.DecodeMessageExts(r.Body); len(ms) != 1 || string(ms[0].Body) != "hello" {
		t.Fatalf("sql pull served %d messages", len(ms))
	}
	tagPull["subscription"] = "color = = 'red'"
	if r := f.invoke(f.addr(l), rmq.PullMessage, tagPull, nil); r.Code != rmq.SystemError {
		t.Fatalf("bad sql: %d %s", r.Code, r.Remark)
	}
	// A client may not send to a dead-letter topic; the retry topic takes
	// the client's send-back fallback.
	if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("%DLQ%cg", 0, nil), []byte("x")); r.Code == rmq.Success {
		t.Fatal("a send to a dead-letter topic was taken")
	}
	if r := f.invoke(f.addr(l), rmq.PullMessage, map[string]string{"topic": "orders", "queueId": "x"}, nil); r.Code != rmq.SystemError {
		t.Fatalf("malformed pull: %d", r.Code)
	}

	// Offsets: none stored starts at 0 while the queue holds its first
	// message (trap 10); an update through a follower is stored through
	// Raft and read back on every node.
	q := map[string]string{"consumerGroup": "cg", "topic": "orders", "queueId": "1"}
	if r := f.invoke(f.addr(l), rmq.QueryConsumerOffset, q, nil); r.Code != rmq.Success || r.Ext["offset"] != "0" {
		t.Fatalf("query without a commit: %d %v", r.Code, r.Ext)
	}
	u := map[string]string{"consumerGroup": "cg", "topic": "orders", "queueId": "1", "commitOffset": "3"}
	if r := f.invoke(f.addr(fo), rmq.UpdateConsumerOffset, u, nil); r.Code != rmq.Success {
		t.Fatalf("update offset: %d %s", r.Code, r.Remark)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := f.invoke(f.addr(fo), rmq.QueryConsumerOffset, q, nil)
		if r.Code == rmq.Success && r.Ext["offset"] == "3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offset never read back on the follower: %d %v", r.Code, r.Ext)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := f.invoke(f.addr(l), rmq.GetMaxOffset, map[string]string{"topic": "orders", "queueId": "1"}, nil); r.Ext["offset"] != "4" {
		t.Fatalf("max offset %v", r.Ext)
	}
	if r := f.invoke(f.addr(l), rmq.GetMinOffset, map[string]string{"topic": "orders", "queueId": "1"}, nil); r.Ext["offset"] != "0" {
		t.Fatalf("min offset %v", r.Ext)
	}
	if r := f.invoke(f.addr(l), rmq.SearchOffsetByTimestamp, map[string]string{"topic": "orders", "queueId": "1", "timestamp": "0"}, nil); r.Code != rmq.Success || r.Ext["offset"] != "0" {
		t.Fatalf("search by timestamp 0: %d %v", r.Code, r.Ext)
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if r := f.invoke(f.addr(l), rmq.SearchOffsetByTimestamp, map[string]string{"topic": "orders", "queueId": "1", "timestamp": future}, nil); r.Ext["offset"] != "4" {
		t.Fatalf("search by a future timestamp: %v", r.Ext)
	}

	// Query by key, from the node's key index (it catches up with the
	// log in the background: poll).
	deadline = time.Now().Add(20 * time.Second)
	for {
		r := f.invoke(f.addr(l), rmq.QueryMessage, map[string]string{"topic": "orders", "key": "k2", "maxNum": "8", "beginTimestamp": "0", "endTimestamp": "0"}, nil)
		if r.Code == rmq.Success {
			ms, err := rmq.DecodeMessageExts(r.Body)
			if err != nil || len(ms) != 1 || string(ms[0].Body) != "hello" {
				t.Fatalf("query by key: %d messages, %v", len(ms), err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("query by key: %d %s", r.Code, r.Remark)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := f.invoke(f.addr(l), rmq.QueryMessage, map[string]string{"topic": "orders", "key": "nokey"}, nil); r.Code != rmq.QueryNotFound {
		t.Fatalf("query by a missing key: %d %s", r.Code, r.Remark)
	}

	// Unknown codes get REQUEST_CODE_NOT_SUPPORTED, and the connection
	// stays usable.
	if r := f.invoke(f.addr(l), 4242, nil, nil); r.Code != rmq.RequestCodeNotSupported {
		t.Fatalf("unknown code: %d", r.Code)
	}
	if r := f.invoke(f.addr(l), rmq.GetMaxOffset, map[string]string{"topic": "orders", "queueId": "0"}, nil); r.Code != rmq.Success {
		t.Fatalf("after an unknown code: %d", r.Code)
	}
}

func TestHeartbeatConsumersAndRetryTopic(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	fo := f.follower()
	hb, _ := json.Marshal(map[string]any{"clientID": "10.0.0.1@1", "producerDataSet": []any{},
		"consumerDataSet": []any{map[string]any{"groupName": "cg1", "messageModel": "CLUSTERING", "consumeType": "CONSUME_PASSIVELY"}}})
	// Its own connection, so that closing it drops the member.
	one := rmq.NewClient()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := one.Invoke(ctx, f.addr(fo), rmq.NewRequest(rmq.HeartBeat, nil, hb))
	if err != nil || resp.Code != rmq.Success {
		t.Fatalf("heartbeat: %v %+v", err, resp)
	}
	// Clients heartbeat every node; the leader creates the retry topic.
	if r := f.invoke(f.addr(l), rmq.HeartBeat, nil, hb); r.Code != rmq.Success {
		t.Fatalf("heartbeat to the leader: %d %s", r.Code, r.Remark)
	}
	// The retry topic exists on the group (created through the leader).
	deadline := time.Now().Add(20 * time.Second)
	for {
		if ti, err := f.c.Node(l).Broker().Topic("%RETRY%cg1"); err == nil && len(ti.Queues) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no retry topic of cg1 after a heartbeat")
		}
		time.Sleep(20 * time.Millisecond)
	}
	list := func() []string {
		r := f.invoke(f.addr(fo), rmq.GetConsumerListByGroup, map[string]string{"consumerGroup": "cg1"}, nil)
		var body struct {
			ConsumerIDList []string `json:"consumerIdList"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("consumer list %q: %v", r.Body, err)
		}
		return body.ConsumerIDList
	}
	if got := list(); len(got) != 1 || got[0] != "10.0.0.1@1" {
		t.Fatalf("consumer list %v", got)
	}
	one.Close()
	for len(list()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's consumer stayed in the list")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := f.invoke(f.addr(fo), rmq.HeartBeat, nil, []byte("{bad")); r.Code != rmq.SystemError {
		t.Fatalf("bad heartbeat: %d", r.Code)
	}
}

func TestRegistrationFollowsTheLeader(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	f.createTopic("t1", 3)
	waitRoute := func(leaderAddr string, topic string) *namesrv.GroupRoute {
		deadline := time.Now().Add(30 * time.Second)
		for {
			g := f.ns.Groups()["raftmq"]
			if g != nil && g.Addrs[0] == leaderAddr && len(g.Addrs) == 3 && g.Topics[topic] == 3 {
				return g
			}
			if time.Now().After(deadline) {
				t.Fatalf("route never showed leader %s with 3 members and topic %s: %+v", leaderAddr, topic, g)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	g := waitRoute(f.addr(l), "t1")
	// The followers' ids are the ones pull responses suggest: 1 and 2 in
	// node id order.
	var fol []int
	for i := 0; i < 3; i++ {
		if i != l {
			fol = append(fol, i)
		}
	}
	if g.Addrs[1] != f.addr(fol[0]) || g.Addrs[2] != f.addr(fol[1]) {
		t.Fatalf("followers %v, want %s as 1 and %s as 2", g.Addrs, f.addr(fol[0]), f.addr(fol[1]))
	}
	// Both followers are write paths (--remoting-write-via-followers), by
	// node id.
	if len(g.WritePaths) != 2 || g.WritePaths[0].Addr != f.addr(fol[0]) || g.WritePaths[1].Addr != f.addr(fol[1]) ||
		g.WritePaths[0].Name != namesrv.PseudoBrokerName("raftmq", g.Nodes[1]) {
		t.Fatalf("write paths %+v, want %s and %s", g.WritePaths, f.addr(fol[0]), f.addr(fol[1]))
	}
	// Kill the leader: the new leader registers as 0 at once (not after
	// the 1s period nor the name server's expiry).
	f.c.Kill(l)
	nl := f.c.LeaderExcept(l)
	start := time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if g := f.ns.Groups()["raftmq"]; g != nil && g.Addrs[0] == f.addr(nl) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("route never named the new leader: %+v", f.ns.Groups()["raftmq"])
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("route named the new leader %v after it was found", time.Since(start))
	// The new leader is no write path any more; the surviving follower is
	// one once it has registered under the new numbering.
	for {
		g := f.ns.Groups()["raftmq"]
		other := fol[0] + fol[1] - nl
		if len(g.WritePaths) == 1 && g.WritePaths[0].Addr == f.addr(other) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("write paths after the failover: %+v, want only %s", g.WritePaths, f.addr(other))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		if g := f.ns2.Groups()["raftmq"]; g != nil && g.Addrs[0] == f.addr(nl) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second name server never named the new leader: %+v", f.ns2.Groups()["raftmq"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustAddrPort(t *testing.T, addr string) (ap netipAddrPort) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return parseAddrPort(t, fmt.Sprintf("%s:%d", host, p))
}

// Every served code, given nonsense (bad numbers, huge and negative
// values, garbage bodies), is answered with an error code; the node keeps
// serving.
func TestGarbageRequestsAreAnswered(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	f.createTopic("g", 1)
	codes := []int32{rmq.QueryMessage, rmq.SendMessage, rmq.SendMessageV2, rmq.SendBatchMessage, rmq.PullMessage, rmq.QueryConsumerOffset, rmq.UpdateConsumerOffset,
		rmq.GetMaxOffset, rmq.GetMinOffset, rmq.SearchOffsetByTimestamp, rmq.HeartBeat, rmq.GetConsumerListByGroup, rmq.UpdateAndCreateTopic,
		rmq.UnregisterClient, rmq.GetRouteInfoByTopic, rmq.LitePullMessage, rmq.CheckClientConfig, rmq.GetEarliestMsgStoreTime}
	exts := []map[string]string{
		nil,
		{"topic": "g", "queueId": "x", "queueOffset": "-5", "commitOffset": "zz", "maxMsgNums": "99999999999999999999", "sysFlag": "3"},
		{"topic": "g", "queueId": "-1", "queueOffset": "9223372036854775807", "writeQueueNums": "-3", "timestamp": "x"},
		{"topic": "g", "queueId": "2147483647", "commitOffset": "18446744073709551615", "b": "g", "e": "99", "i": "\x01\x02\x01"},
		{"topic": strings.Repeat("t", 300), "consumerGroup": "%%%", "properties": strings.Repeat("\x01", 1000)},
	}
	bodies := [][]byte{nil, []byte("{"), []byte{0, 0, 0, 8, 1, 2, 3, 4}, []byte(strings.Repeat("\xff", 4096))}
	n := 0
	for _, code := range codes {
		for _, ext := range exts {
			for _, body := range bodies {
				e := map[string]string{}
				for k, v := range ext {
					e[k] = v
				}
				r := f.invoke(f.addr(l), code, e, body)
				if !r.IsResponse() {
					t.Fatalf("code %d: not a response", code)
				}
				n++
			}
		}
	}
	// Still serving. The only sends stored are the well-formed ones:
	// queueId -1 lets the broker pick the queue (RocketMQ's broker picks a
	// random one), so codes 10 and 310 with the third ext set and each of
	// the four bodies: 8 messages in g's only queue.
	r := f.invoke(f.addr(l), rmq.GetMaxOffset, map[string]string{"topic": "g", "queueId": "0"}, nil)
	if r.Code != rmq.Success || r.Ext["offset"] != "8" {
		t.Fatalf("after %d garbage requests: %d %s, queue end %s, want 8", n, r.Code, r.Remark, r.Ext["offset"])
	}
	t.Logf("%d garbage requests answered; queue g/0 ends at %s", n, r.Ext["offset"])
}

// A follower that stops (servertest's Kill closes the adapter, which
// unregisters) is no write path from then on. A SIGKILLed one does not
// unregister: the leader's live list drops it (TestLiveFollowers,
// integration's TestRocketMQFailover/follower-kill).
func TestWritePathOfAStoppedFollowerGoes(t *testing.T) {
	f := newFixture(t)
	f.createTopic("t1", 2)
	deadline := time.Now().Add(30 * time.Second)
	for g := f.ns.Groups()["raftmq"]; g == nil || len(g.WritePaths) != 2; g = f.ns.Groups()["raftmq"] {
		if time.Now().After(deadline) {
			t.Fatalf("never two write paths: %+v", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fol := f.follower()
	gone := f.addr(fol)
	f.c.Kill(fol)
	start := time.Now()
	for {
		g := f.ns.Groups()["raftmq"]
		if len(g.WritePaths) == 1 && g.WritePaths[0].Addr != gone {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the stopped follower's write path stayed: %+v", g.WritePaths)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the stopped follower's write path went %v after the stop", time.Since(start).Round(time.Millisecond))
}

// metricValue is the value of the counter name with the label pair, summed
// over its series, from the node's registry.
func metricValue(t *testing.T, f *fixture, node int, name, label, value string) float64 {
	t.Helper()
	mfs, err := f.c.Node(node).Broker().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					match = true
				}
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A request code the node does not serve, RocketMQ 5.x's POP_MESSAGE
// (200050) among them, is answered REQUEST_CODE_NOT_SUPPORTED on its opaque
// with a remark naming the code, and the connection goes on serving; only
// a frame that cannot be delimited closes it, counted by reason.
func TestUnknownCodesKeepTheConnection(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	nc, err := net.Dial("tcp", f.addr(l))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	write := func(codec byte, header []byte) {
		t.Helper()
		b := binary.BigEndian.AppendUint32(nil, uint32(4+len(header)))
		b = binary.BigEndian.AppendUint32(b, uint32(codec)<<24|uint32(len(header)))
		if _, err := nc.Write(append(b, header...)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *rmq.Command {
		t.Helper()
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		fr, err := rmq.ReadFrame(nc, rmq.MaxFrame)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		c, err := rmq.Decode(fr)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// As the Java 5.x client writes POP_MESSAGE (JSON header).
	write(rmq.JSON, []byte(`{"code":200050,"language":"JAVA","version":475,"opaque":4242,"flag":0,"extFields":{"consumerGroup":"cg","topic":"t","queueId":"-1","maxMsgNums":"32","invisibleTime":"60000","pollTime":"20000","bornTime":"1","initMode":"0"},"serializeTypeCurrentRPC":"JSON"}`))
	a := read()
	if a.Code != rmq.RequestCodeNotSupported || a.Opaque != 4242 || !a.IsResponse() || !strings.Contains(a.Remark, "200050 (POP_MESSAGE)") {
		t.Fatalf("POP_MESSAGE answered %d opaque %d %q", a.Code, a.Opaque, a.Remark)
	}
	// The next request on the same connection is served.
	write(rmq.JSON, []byte(`{"code":106,"language":"GO","version":317,"opaque":4243,"flag":0,"extFields":{}}`))
	write(rmq.JSON, []byte(`{"code":105,"language":"GO","version":317,"opaque":4244,"flag":0,"extFields":{"topic":"nope"}}`))
	// Requests are served concurrently: the answers may come in either
	// order.
	got := map[int32]*rmq.Command{}
	for range 2 {
		a = read()
		got[a.Opaque] = a
	}
	for _, op := range []int32{4243, 4244} {
		a = got[op]
		if a == nil {
			t.Fatalf("no answer to opaque %d: %v", op, got)
		}
		if op == 4243 && (a.Code != rmq.RequestCodeNotSupported || !strings.Contains(a.Remark, "106 (GET_BROKER_CLUSTER_INFO)")) {
			t.Fatalf("106 on a node: %d %q", a.Code, a.Remark)
		}
		if op == 4244 && a.Code == rmq.RequestCodeNotSupported {
			t.Fatalf("route request not served: %q", a.Remark)
		}
	}
	// The binary header: a code as Java truncates 200050 (3442), and an
	// undecodable header with a readable opaque; both answered.
	bin := func(code uint16, opaque uint32, remarkLen uint32) []byte {
		h := binary.BigEndian.AppendUint16(nil, code)
		h = append(h, 0)
		h = binary.BigEndian.AppendUint16(h, 475)
		h = binary.BigEndian.AppendUint32(h, opaque)
		h = binary.BigEndian.AppendUint32(h, 0)
		h = binary.BigEndian.AppendUint32(h, remarkLen)
		return binary.BigEndian.AppendUint32(h, 0)
	}
	write(rmq.RocketMQ, bin(3442, 5000, 0))
	if a = read(); a.Code != rmq.RequestCodeNotSupported || a.Opaque != 5000 || a.Codec != rmq.RocketMQ || !strings.Contains(a.Remark, "3442") {
		t.Fatalf("binary 3442 answered %d opaque %d %q", a.Code, a.Opaque, a.Remark)
	}
	write(rmq.RocketMQ, bin(34, 5001, 1<<20))
	if a = read(); a.Code != rmq.SystemError || a.Opaque != 5001 {
		t.Fatalf("undecodable binary header answered %d opaque %d %q", a.Code, a.Opaque, a.Remark)
	}
	write(rmq.JSON, []byte(`{"code":34,"language":"GO","version":317,"opaque":5002,"flag":0,"extFields":{}}`))
	if a = read(); a.Opaque != 5002 || a.Code == rmq.RequestCodeNotSupported {
		t.Fatalf("heartbeat after the bad header: %d %q", a.Code, a.Remark)
	}
	if n := metricValue(t, f, l, "raftmq_remoting_requests_total", "request", "200050"); n != 1 {
		t.Fatalf("requests{request=200050} = %v", n)
	}
	if n := metricValue(t, f, l, "raftmq_remoting_undecodable_frames_total", "", ""); n != 1 {
		t.Fatalf("undecodable frames = %v", n)
	}
	// A length that cannot be delimited closes the connection, counted.
	before := metricValue(t, f, l, "raftmq_remoting_connections_closed_total", "reason", rmq.CloseFrameLength)
	nc.Write(binary.BigEndian.AppendUint32(nil, 1<<30))
	nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes after a 1 GiB frame length, want a closed connection", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, f, l, "raftmq_remoting_connections_closed_total", "reason", rmq.CloseFrameLength) != before+1 {
		if time.Now().After(deadline) {
			t.Fatal("the closed connection was not counted as frame_length")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
