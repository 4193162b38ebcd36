package remoting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/broker/grpcapi"
	rmq "github.com/raftmq/raftmq/remoting"
)

// Request-reply (RocketMQ's ReplyMessageProcessor): a requester's
// producer.Request sends a message carrying REPLY_TO_CLIENT (its client
// id), CORRELATION_ID and MESSAGE_TTL; the consumer that handles it sends
// a reply to <cluster>_REPLY_TOPIC with SEND_REPLY_MESSAGE(_V2), and the
// broker pushes that reply with PUSH_REPLY_MESSAGE_TO_CLIENT on the
// requester's connection, found by its client id among the clients heard
// from in heartbeats. The reply is not stored: it is for a requester that
// waits for it, and RocketMQ answers the replier by the push alone.
const (
	propReplyToClient = "REPLY_TO_CLIENT"
	propPushReplyTime = "PUSH_REPLY_TIME"
	// replyTopicSuffix names the topic replies are sent to:
	// <cluster>_REPLY_TOPIC (RocketMQ's MixAll.REPLY_TOPIC_POSTFIX).
	replyTopicSuffix = "_REPLY_TOPIC"
	// replyPushTimeout bounds one push to a client, and a peer's.
	replyPushTimeout = 3 * time.Second
)

// replyTopic is the topic RocketMQ clients send replies to.
func (a *Adapter) replyTopic() string { return a.cfg.Cluster + replyTopicSuffix }

// requestSent notes a request of request-reply (a send carrying
// REPLY_TO_CLIENT) received on conn: the connection is the requester's
// (until it closes), so its reply can be pushed on it even before the
// requester's first heartbeat reaches this node, and the reply topic is
// made to exist.
func (a *Adapter) requestSent(ctx context.Context, conn *rmq.Conn, client string) {
	if conn != nil && a.requesters.heard("", client, conn.ID, conn) {
		id := conn.ID
		conn.OnClose(func() { a.requesters.closed(id) })
	}
	a.ensureReplyTopic(ctx)
}

// ensureReplyTopic creates the reply topic (one queue, on the leader) unless
// it exists, so that the replier's producer finds it routed. RocketMQ's
// brokers create it at start; raftmq creates it at the first request (a
// send carrying REPLY_TO_CLIENT), so a cluster that never uses
// request-reply has no such topic.
func (a *Adapter) ensureReplyTopic(ctx context.Context) {
	topic := a.replyTopic()
	a.retryMu.Lock()
	done := a.retryMade[topic]
	a.retryMu.Unlock()
	if done {
		return
	}
	if _, err := a.b.Topic(topic); err != nil {
		if err := a.createTopicOnLeader(ctx, topic, 1); err != nil {
			a.log.Warn("create reply topic", "topic", topic, "error", err)
			return
		}
		a.reg.kickNow()
		a.awaitRouted(ctx, topic)
	}
	a.retryMu.Lock()
	a.retryMade[topic] = true
	a.retryMu.Unlock()
}

var pushOpaque atomic.Int32

// sendReply serves SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2 (the
// header of SEND_MESSAGE, or of its V2): the reply is pushed to the
// requester through this node's connection to it, else through the node
// of the group that holds one. SUCCESS once the requester took it (msgId
// "0", queue offset 0, as RocketMQ answers a reply it pushed);
// SYSTEM_ERROR when no node holds the requester's connection or the push
// failed.
func (a *Adapter) sendReply(ctx context.Context, conn *rmq.Conn, req *rmq.Command) *rmq.Command {
	hreq := req
	if req.Code == rmq.SendReplyMessageV2 {
		hreq = &rmq.Command{Code: rmq.SendMessageV2, Ext: req.Ext}
	}
	h, err := parseSendHeader(hreq)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, "reply: "+err.Error())
	}
	client := h.props[propReplyToClient]
	if client == "" {
		return rmq.Response(req, rmq.SystemError, "reply message properties["+propReplyToClient+"] is null")
	}
	h.props[propPushReplyTime] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	ext := req.Ext
	if hreq != req {
		ext = map[string]string{}
		for k, v := range req.Ext {
			if n, ok := v2Names[k]; ok {
				k = n
			}
			ext[k] = v
		}
	}
	header := map[string]string{
		"producerGroup":         ext["producerGroup"],
		"topic":                 h.topic,
		"defaultTopic":          ext["defaultTopic"],
		"defaultTopicQueueNums": ext["defaultTopicQueueNums"],
		"queueId":               strconv.FormatInt(h.queue, 10),
		"sysFlag":               strconv.FormatInt(h.sysFlag, 10),
		"bornTimestamp":         strconv.FormatInt(h.bornTS, 10),
		"flag":                  strconv.FormatInt(h.flag, 10),
		"properties":            rmq.EncodeProperties(h.props),
		"reconsumeTimes":        strconv.FormatInt(h.reconsume, 10),
		"unitMode":              ext["unitMode"],
		"bornHost":              conn.Remote,
		"storeHost":             a.storeAddr(),
		"storeTimestamp":        strconv.FormatInt(time.Now().UnixMilli(), 10),
	}
	for k, v := range header {
		if v == "" {
			delete(header, k)
		}
	}
	call := grpcapi.ReplyPushCall{Client: client, Header: header, Body: req.Body}
	ctx, cancel := context.WithTimeout(ctx, 2*replyPushTimeout)
	defer cancel()
	pushed, err := a.PushReplyHere(ctx, call)
	via := a.b.ID()
	if !pushed {
		// Not here, or this connection failed (the requester may be
		// connected to another node too): the other nodes.
		var perr error
		via, pushed, perr = a.pushReplyViaPeers(ctx, call)
		if err == nil || perr != nil {
			err = errors.Join(err, perr)
		}
	}
	if !pushed {
		remark := "push reply message fail, channel of <" + client + "> not found."
		result := "not_found"
		if err != nil {
			remark = fmt.Sprintf("push reply message to %s fail: %v", client, err)
			result = "failed"
		}
		a.replies.WithLabelValues(result).Inc()
		a.log.Debug("reply not pushed", "client", client, "remark", remark)
		return rmq.Response(req, rmq.SystemError, remark)
	}
	a.log.Debug("reply pushed", "client", client, "via", via)
	if via == a.b.ID() {
		a.replies.WithLabelValues("pushed").Inc()
	} else {
		a.replies.WithLabelValues("via_peer").Inc()
	}
	resp := rmq.Response(req, rmq.Success, "")
	q := max(h.queue, 0)
	resp.Ext = map[string]string{"msgId": "0", "queueId": strconv.FormatInt(q, 10), "queueOffset": "0"}
	return resp
}

// PushReplyHere pushes a reply to its client when this node holds the
// client's connection (grpcapi.ReplyPusher): false, nil when it does not;
// an error when the push failed or the client refused it.
func (a *Adapter) PushReplyHere(ctx context.Context, c grpcapi.ReplyPushCall) (bool, error) {
	conn := a.producers.connOf(c.Client)
	if conn == nil {
		conn = a.consumers.connOf(c.Client)
	}
	if conn == nil {
		conn = a.requesters.connOf(c.Client)
	}
	if conn == nil {
		return false, nil
	}
	req := rmq.NewRequest(rmq.PushReplyMessageToClient, c.Header, c.Body)
	req.Opaque = pushOpaque.Add(1)
	ctx, cancel := context.WithTimeout(ctx, replyPushTimeout)
	defer cancel()
	resp, err := conn.Invoke(ctx, req)
	if err != nil {
		return false, err
	}
	if resp.Code != rmq.Success {
		return false, fmt.Errorf("the client answered %d %q", resp.Code, resp.Remark)
	}
	return true, nil
}

// pushReplyViaPeers asks every other node of the group at once to push the
// reply; it returns the node that did. RocketMQ clients heartbeat every
// node of the group, so this is for a requester this node has not heard
// from (yet): its heartbeat went to the others first, or its connection
// here closed.
func (a *Adapter) pushReplyViaPeers(ctx context.Context, c grpcapi.ReplyPushCall) (string, bool, error) {
	st, err := a.b.Status()
	if err != nil {
		return "", false, err
	}
	type result struct {
		node string
		ok   bool
		err  error
	}
	results := make(chan result, len(st.Nodes))
	var wg sync.WaitGroup
	for _, n := range st.Nodes {
		if n.ID == a.b.ID() || n.PeerAddr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc, err := a.peers.Conn(n.PeerAddr)
			if err != nil {
				results <- result{n.ID, false, err}
				return
			}
			ok, err := grpcapi.PushReply(ctx, cc, c)
			results <- result{n.ID, ok, err}
		}()
	}
	go func() { wg.Wait(); close(results) }()
	var errs []error
	for r := range results {
		if r.ok {
			return r.node, true, nil
		}
		if r.err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", r.node, r.err))
		}
	}
	// A client on no node is "not found"; one whose push failed on a node
	// that holds it is that node's error.
	return "", false, errors.Join(errs...)
}
