package remoting_test

import (
	"strconv"
	"testing"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// A topic created through the protocol is in the name servers' routes
// when the create is answered, as RocketMQ's broker registers within the
// request: a route lookup right after it finds the topic.
func TestCreatedTopicIsRoutedWhenAnswered(t *testing.T) {
	f := newFixture(t)
	for i, topic := range []string{"made-via-follower", "made-on-leader"} {
		addr := f.addr(f.follower())
		if i == 1 {
			addr = f.addr(f.c.Leader())
		}
		resp := f.invoke(addr, rmq.UpdateAndCreateTopic, map[string]string{"topic": topic, "writeQueueNums": "4", "readQueueNums": "4"}, nil)
		if resp.Code != rmq.Success {
			t.Fatalf("create %s: %d %s", topic, resp.Code, resp.Remark)
		}
		for _, ns := range []string{f.ns.Addr(), f.ns2.Addr()} {
			r := f.invoke(ns, rmq.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
			if r.Code != rmq.Success {
				t.Fatalf("route of %s from %s right after the create: %d %s", topic, ns, r.Code, r.Remark)
			}
		}
	}
}

// A pull whose window holds only messages the subscription filters out is
// answered at once, NO_MATCHED_MESSAGE (RocketMQ's PULL_RETRY_IMMEDIATELY
// code), with nextBeginOffset past them; the long poll is not held.
func TestPullOfOnlyFilteredMessagesMovesOn(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	f.createTopic("filtered", 1)
	for i := 0; i < 3; i++ {
		if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("filtered", 0, map[string]string{"TAGS": "tagA"}), []byte("x")); r.Code != rmq.Success {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < f.c.Size(); i++ {
		for {
			if ti, err := f.c.Node(i).Broker().Topic("filtered"); err == nil && ti.Queues[0].Max == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d never applied the 3 messages", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := 0; i < f.c.Size(); i++ {
		ext := map[string]string{"consumerGroup": "cg", "topic": "filtered", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
			"sysFlag": "2", "suspendTimeoutMillis": "20000", "subscription": "tagB", "expressionType": "TAG"}
		start := time.Now()
		r := f.invoke(f.addr(i), rmq.PullMessage, ext, nil)
		took := time.Since(start)
		if r.Code != rmq.PullRetryImmediately || r.Ext["nextBeginOffset"] != "3" || len(r.Body) != 0 {
			t.Fatalf("node %d: pull of filtered messages: %d %q %v (%d body bytes)", i, r.Code, r.Remark, r.Ext, len(r.Body))
		}
		// Held, it would wait out the 20 s long poll; the bound is generous
		// for a loaded machine.
		if took > 5*time.Second {
			t.Fatalf("node %d: answered after %v; want at once, not held for the long poll", i, took)
		}
		// At the end: held, then PULL_NOT_FOUND at the same offset.
		ext["queueOffset"] = r.Ext["nextBeginOffset"]
		if r := f.invoke(f.addr(i), rmq.PullMessage, ext, nil); r.Code != rmq.PullNotFound && r.Code != rmq.PullRetryImmediately || r.Ext["nextBeginOffset"] != "3" {
			t.Fatalf("node %d: pull at the end: %d %v", i, r.Code, r.Ext)
		}
	}
}

// Every message served through the protocol carries the CLUSTER property
// (RocketMQ's broker sets it on every message it stores; the Go client's
// request-reply path reads it).
func TestPulledMessagesCarryTheCluster(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	f.createTopic("clustered", 1)
	if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("clustered", 0, map[string]string{"TAGS": "t"}), []byte("x")); r.Code != rmq.Success {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	ext := map[string]string{"consumerGroup": "cg", "topic": "clustered", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0"}
	r := f.invoke(f.addr(l), rmq.PullMessage, ext, nil)
	msgs, err := rmq.DecodeMessageExts(r.Body)
	if r.Code != rmq.Success || err != nil || len(msgs) != 1 {
		t.Fatalf("pull: %d %v, %d messages", r.Code, err, len(msgs))
	}
	if got := msgs[0].Properties["CLUSTER"]; got != "DefaultCluster" {
		t.Fatalf("CLUSTER property %q, want DefaultCluster; properties %v", got, msgs[0].Properties)
	}
	_ = strconv.Itoa
}
