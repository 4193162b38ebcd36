package remoting_test

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// rawClient is one RocketMQ client connection that also serves the
// broker's requests to it, as the Go client does: it records them and
// answers PUSH_REPLY_MESSAGE_TO_CLIENT with SUCCESS.
type rawClient struct {
	t    *testing.T
	nc   net.Conn
	wmu  sync.Mutex
	mu   sync.Mutex
	got  []*rmq.Command // requests from the broker
	resp chan *rmq.Command
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, nc: nc, resp: make(chan *rmq.Command, 16)}
	t.Cleanup(func() { nc.Close() })
	go func() {
		br := bufio.NewReader(nc)
		for {
			frame, err := rmq.ReadFrame(br, rmq.MaxFrame)
			if err != nil {
				return
			}
			cmd, err := rmq.Decode(frame)
			if err != nil {
				return
			}
			if cmd.IsResponse() {
				c.resp <- cmd
				continue
			}
			c.mu.Lock()
			c.got = append(c.got, cmd)
			c.mu.Unlock()
			if cmd.Code == rmq.PushReplyMessageToClient {
				c.write(rmq.Response(cmd, rmq.Success, ""))
			}
		}
	}()
	return c
}

func (c *rawClient) write(cmd *rmq.Command) {
	b, err := cmd.Encode()
	if err != nil {
		c.t.Error(err)
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.Write(b)
}

// invoke sends a request and waits for its answer.
func (c *rawClient) invoke(code int32, ext map[string]string, body []byte) *rmq.Command {
	c.t.Helper()
	c.write(rmq.NewRequest(code, ext, body))
	select {
	case r := <-c.resp:
		return r
	case <-time.After(10 * time.Second):
		c.t.Fatalf("no answer to code %d", code)
		return nil
	}
}

func (c *rawClient) heartbeat(clientID, producerGroup, consumerGroup string) {
	c.t.Helper()
	body := `{"clientID":"` + clientID + `","producerDataSet":[`
	if producerGroup != "" {
		body += `{"groupName":"` + producerGroup + `"}`
	}
	body += `],"consumerDataSet":[`
	if consumerGroup != "" {
		body += `{"groupName":"` + consumerGroup + `","messageModel":"BROADCASTING"}`
	}
	body += `]}`
	if r := c.invoke(rmq.HeartBeat, nil, []byte(body)); r.Code != rmq.Success {
		c.t.Fatalf("heartbeat: %d %q", r.Code, r.Remark)
	}
}

// requests returns the broker's requests of code received so far.
func (c *rawClient) requests(code int32) []*rmq.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*rmq.Command
	for _, r := range c.got {
		if r.Code == code {
			out = append(out, r)
		}
	}
	return out
}

func (c *rawClient) await(code int32, n int, within time.Duration) []*rmq.Command {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if got := c.requests(code); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d requests of code %d within %v, want %d", len(c.requests(code)), code, within, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A reply sent with SEND_REPLY_MESSAGE(_V2) is pushed to the requester
// named by REPLY_TO_CLIENT with PUSH_REPLY_MESSAGE_TO_CLIENT: through the
// node that received it when the requester is connected there, and
// through another node of the group when it is connected only there. A
// requester connected nowhere is SYSTEM_ERROR, as RocketMQ answers.
func TestReplyIsPushedToTheRequester(t *testing.T) {
	f := newFixture(t)
	l, fo := f.c.Leader(), f.follower()
	f.awaitRegistered(l)
	req := dialRaw(t, f.addr(fo))
	req.heartbeat("requester@1", "req-pg", "")

	reply := func(addr string, code int32, correlation, body string) *rmq.Command {
		ext := sendExt("DefaultCluster_REPLY_TOPIC", 0, map[string]string{"REPLY_TO_CLIENT": "requester@1", "CORRELATION_ID": correlation,
			"MSG_TYPE": "reply", "MESSAGE_TTL": "3"})
		if code == rmq.SendReplyMessageV2 {
			v2 := map[string]string{}
			for k, v := range ext {
				for short, long := range map[string]string{"a": "producerGroup", "b": "topic", "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "i": "properties"} {
					if k == long {
						k = short
					}
				}
				v2[k] = v
			}
			ext = v2
		}
		return f.invoke(addr, code, ext, []byte(body))
	}
	check := func(push *rmq.Command, correlation, body string) {
		t.Helper()
		props := rmq.DecodeProperties(push.Ext["properties"])
		if string(push.Body) != body || props["CORRELATION_ID"] != correlation || push.Ext["topic"] != "DefaultCluster_REPLY_TOPIC" ||
			props["PUSH_REPLY_TIME"] == "" || push.Ext["storeTimestamp"] == "" {
			t.Fatalf("push %q ext %v props %v", push.Body, push.Ext, props)
		}
	}
	// The same node.
	if r := reply(f.addr(fo), rmq.SendReplyMessage, "c1", "pong-1"); r.Code != rmq.Success || r.Ext["msgId"] != "0" {
		t.Fatalf("reply on the requester's node: %d %q %v", r.Code, r.Remark, r.Ext)
	}
	check(req.await(rmq.PushReplyMessageToClient, 1, 5*time.Second)[0], "c1", "pong-1")
	// Another node (the leader), V2 header: pushed through the follower.
	if r := reply(f.addr(l), rmq.SendReplyMessageV2, "c2", "pong-2"); r.Code != rmq.Success {
		t.Fatalf("reply on another node: %d %q", r.Code, r.Remark)
	}
	check(req.await(rmq.PushReplyMessageToClient, 2, 5*time.Second)[1], "c2", "pong-2")

	// Without REPLY_TO_CLIENT, or to a client no node knows: refused.
	if r := f.invoke(f.addr(l), rmq.SendReplyMessage, sendExt("DefaultCluster_REPLY_TOPIC", 0, map[string]string{"CORRELATION_ID": "x"}), []byte("x")); r.Code != rmq.SystemError {
		t.Fatalf("a reply without REPLY_TO_CLIENT: %d %q", r.Code, r.Remark)
	}
	gone := f.invoke(f.addr(l), rmq.SendReplyMessage, sendExt("DefaultCluster_REPLY_TOPIC", 0, map[string]string{"REPLY_TO_CLIENT": "nobody@9"}), []byte("x"))
	if gone.Code != rmq.SystemError || !strings.Contains(gone.Remark, "nobody@9") {
		t.Fatalf("a reply to an unknown client: %d %q", gone.Code, gone.Remark)
	}
	// Its connection closed: no node pushes to it any more.
	req.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := reply(f.addr(l), rmq.SendReplyMessage, "c3", "late")
		if r.Code == rmq.SystemError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a reply to a closed requester still answered %d", r.Code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitRegistered waits until node i knows every node's client address
// (nodes register themselves through the log after they start).
func (f *fixture) awaitRegistered(i int) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := f.c.Node(i).Broker().Status()
		n := 0
		for _, ns := range st.Nodes {
			if ns.ClientAddr != "" {
				n++
			}
		}
		if err == nil && n == f.c.Size() {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("node %d knows %d client addresses: %v", i, n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A request (a send carrying REPLY_TO_CLIENT) creates <cluster>_REPLY_TOPIC
// with one queue, routed by the name servers, so the replier's producer
// finds it.
func TestRequestCreatesTheReplyTopic(t *testing.T) {
	f := newFixture(t)
	f.createTopic("rpc", 2)
	if _, err := f.c.Node(f.c.Leader()).Broker().Topic("DefaultCluster_REPLY_TOPIC"); err == nil {
		t.Fatal("the reply topic exists before any request")
	}
	r := f.invoke(f.addr(f.follower()), rmq.SendMessage, sendExt("rpc", 0, map[string]string{"REPLY_TO_CLIENT": "requester@1", "CORRELATION_ID": "c1",
		"MESSAGE_TTL": "3", "UNIQ_KEY": "R1"}), []byte("ping"))
	if r.Code != rmq.Success {
		t.Fatalf("request: %d %q", r.Code, r.Remark)
	}
	tp, err := f.c.Node(f.c.Leader()).Broker().Topic("DefaultCluster_REPLY_TOPIC")
	if err != nil || len(tp.Queues) != 1 {
		t.Fatalf("reply topic after a request: %+v %v", tp, err)
	}
	route := f.invoke(f.ns.Addr(), rmq.GetRouteInfoByTopic, map[string]string{"topic": "DefaultCluster_REPLY_TOPIC"}, nil)
	if route.Code != rmq.Success {
		t.Fatalf("reply topic not routed: %d %q", route.Code, route.Remark)
	}
}

// A consumer group's members on a node change (a client id joins, its
// connection closes, it unregisters): the node sends
// NOTIFY_CONSUMER_IDS_CHANGED with the group to the group's connections,
// and to no other group's.
func TestConsumerIdsChangedIsNotified(t *testing.T) {
	f := newFixture(t)
	addr := f.addr(f.follower())
	first := dialRaw(t, addr)
	first.heartbeat("c1@1", "", "cg")
	other := dialRaw(t, addr)
	other.heartbeat("o1@1", "", "other-group")
	joins := len(first.requests(rmq.NotifyConsumerIdsChanged))

	second := dialRaw(t, addr)
	second.heartbeat("c2@1", "", "cg")
	got := first.await(rmq.NotifyConsumerIdsChanged, joins+1, 5*time.Second)
	if n := got[len(got)-1]; n.Ext["consumerGroup"] != "cg" || !n.IsOneway() {
		t.Fatalf("notification %v (flag %d)", n.Ext, n.Flag)
	}
	// A heartbeat of a known member changes nothing.
	n := len(first.requests(rmq.NotifyConsumerIdsChanged))
	second.heartbeat("c2@1", "", "cg")
	time.Sleep(300 * time.Millisecond)
	if now := len(first.requests(rmq.NotifyConsumerIdsChanged)); now != n {
		t.Fatalf("a repeated heartbeat notified: %d -> %d", n, now)
	}
	// The second leaves by closing its connection.
	second.nc.Close()
	first.await(rmq.NotifyConsumerIdsChanged, n+1, 5*time.Second)
	// A third joins and unregisters.
	third := dialRaw(t, addr)
	third.heartbeat("c3@1", "", "cg")
	first.await(rmq.NotifyConsumerIdsChanged, n+2, 5*time.Second)
	if r := third.invoke(rmq.UnregisterClient, map[string]string{"clientID": "c3@1", "consumerGroup": "cg"}, nil); r.Code != rmq.Success {
		t.Fatalf("unregister: %d", r.Code)
	}
	first.await(rmq.NotifyConsumerIdsChanged, n+3, 5*time.Second)
	for _, r := range other.requests(rmq.NotifyConsumerIdsChanged) {
		if r.Ext["consumerGroup"] != "other-group" {
			t.Fatalf("another group's member was notified of %v", r.Ext)
		}
	}
}

// A requester whose heartbeat no node has heard yet (the Go client's first
// heartbeat may reach no broker) is found by the connection its request
// came on: the reply, sent to another node, is pushed there.
func TestReplyFindsTheRequestsConnection(t *testing.T) {
	f := newFixture(t)
	l, fo := f.c.Leader(), f.follower()
	f.awaitRegistered(l)
	f.createTopic("rpc", 2)
	req := dialRaw(t, f.addr(fo))
	if r := req.invoke(rmq.SendMessage, sendExt("rpc", 0, map[string]string{"REPLY_TO_CLIENT": "unheard@1", "CORRELATION_ID": "c9",
		"MESSAGE_TTL": "3", "UNIQ_KEY": "R9"}), []byte("ping")); r.Code != rmq.Success {
		t.Fatalf("request: %d %q", r.Code, r.Remark)
	}
	r := f.invoke(f.addr(l), rmq.SendReplyMessage, sendExt("DefaultCluster_REPLY_TOPIC", 0, map[string]string{"REPLY_TO_CLIENT": "unheard@1",
		"CORRELATION_ID": "c9"}), []byte("pong"))
	if r.Code != rmq.Success {
		t.Fatalf("reply: %d %q", r.Code, r.Remark)
	}
	if push := req.await(rmq.PushReplyMessageToClient, 1, 5*time.Second)[0]; string(push.Body) != "pong" {
		t.Fatalf("pushed %q", push.Body)
	}
}
