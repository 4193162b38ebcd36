package remoting

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	rmq "github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/store"
)

// resetHeader is RocketMQ's ResetOffsetRequestHeader
// (remoting/.../protocol/header/ResetOffsetRequestHeader.java): topic,
// group, timestamp (ms; -1: the queues' ends), isForce, and in 5.x
// queueId (-1: every queue) and offset (that queue's offset).
type resetHeader struct {
	topic, group string
	timestamp    int64
	force        bool
	queue        int32 // -1: every queue
	offset       int64 // -1: by timestamp
}

// parseResetHeader decodes INVOKE_BROKER_TO_RESET_OFFSET's header.
func parseResetHeader(req *rmq.Command) (resetHeader, error) {
	h := resetHeader{topic: req.Ext["topic"], group: req.Ext["group"], queue: -1, offset: -1}
	if h.topic == "" || h.group == "" {
		return h, fmt.Errorf("fields topic and group are required (topic %q, group %q)", h.topic, h.group)
	}
	ts, err := req.ExtInt("timestamp", 0)
	if err != nil {
		return h, err
	}
	if _, ok := req.Ext["timestamp"]; !ok {
		return h, fmt.Errorf("field timestamp is required")
	}
	if ts < -1 {
		return h, fmt.Errorf("field timestamp: %d", ts)
	}
	h.timestamp = ts
	switch f := req.Ext["isForce"]; f {
	case "", "false":
	case "true":
		h.force = true
	default:
		return h, fmt.Errorf("field isForce: %q is not true or false", f)
	}
	q, err := req.ExtInt("queueId", -1)
	if err != nil || q < -1 || q > 1<<20 {
		return h, fmt.Errorf("field queueId: %q", req.Ext["queueId"])
	}
	h.queue = int32(q)
	if v, ok := req.Ext["offset"]; ok && v != "" && v != "null" {
		o, err := strconv.ParseInt(v, 10, 64)
		if err != nil || o < 0 {
			return h, fmt.Errorf("field offset: %q", v)
		}
		if h.queue < 0 {
			return h, fmt.Errorf("field offset %d without a queueId", o)
		}
		h.offset = o
	}
	return h, nil
}

// resetOffset answers INVOKE_BROKER_TO_RESET_OFFSET (mqadmin
// resetOffsetByTime, the dashboard's reset): the offsets are the first
// stored at or after timestamp (the queues' ends for -1, or the header's
// offset for its queue); without isForce a queue whose committed offset is
// lower keeps it, as RocketMQ's Broker2Client.resetOffset decides. Unlike
// RocketMQ's broker, which leaves the commit to the clients, raftmq
// commits the offsets through Raft (on the leader), then sends
// RESET_CONSUMER_CLIENT_OFFSET (body ResetOffsetBody) to each live client
// of the group on this node (every client is connected to every node), so
// that a running consumer drops what it holds and reads from the reset
// point instead of committing its old offsets over the reset. The answer's
// body is ResetOffsetBody (remoting/.../protocol/body/ResetOffsetBody.java)
// with the offsets set; with no live client it is SUCCESS too (RocketMQ
// answers CONSUMER_NOT_ONLINE, on which mqadmin commits the offsets
// itself: raftmq has already).
func (a *Adapter) resetOffset(ctx context.Context, req *rmq.Command) *rmq.Command {
	h, err := parseResetHeader(req)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, "reset offset: "+err.Error())
	}
	ti, err := a.b.Topic(h.topic)
	if err != nil {
		return rmq.Response(req, rmq.TopicNotExist, fmt.Sprintf("[reset-offset] reset offset failed, no topic in this broker. topic=%s", h.topic))
	}
	if h.queue >= int32(len(ti.Queues)) {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("reset offset: queue %d of topic %s with %d queues", h.queue, h.topic, len(ti.Queues)))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	to := "@" + strconv.FormatInt(h.timestamp, 10)
	switch {
	case h.offset >= 0:
		to = strconv.FormatInt(h.offset, 10)
	case h.timestamp == -1:
		to = "latest"
	}
	var queues []int32
	if h.queue >= 0 {
		queues = []int32{h.queue}
	}
	// The offsets the reset sets, as the leader computes them (dry run).
	var target []store.OffsetEntry
	err = a.onLeader(ctx, func(ctx context.Context) error {
		var err error
		target, err = a.b.ResetGroup(ctx, broker.ResetRequest{Group: h.group, Topic: h.topic, To: to, Queues: queues, DryRun: true})
		return err
	}, func(ctx context.Context, addr string) error {
		cc, err := a.peers.Conn(addr)
		if err != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		resp, err := api.NewBrokerClient(cc).ResetGroup(ctx, &api.ResetGroupRequest{Group: h.group, Topic: h.topic, To: to, Queues: queues, DryRun: true})
		target = nil
		for _, o := range resp.GetOffsets() {
			target = append(target, store.OffsetEntry{Topic: o.Topic, Queue: o.Queue, Offset: o.Offset})
		}
		return err
	})
	if err != nil {
		return callErrResponse(req, fmt.Errorf("reset offset of %s on %s: %w", h.group, h.topic, err))
	}
	if !h.force {
		committed, _ := a.b.FetchOffsets(h.group, h.topic)
		for i, e := range target {
			if c, ok := committed[e.Queue]; ok && c <= e.Offset {
				target[i].Offset = c
			}
		}
	}
	a.commits.forget(h.group, h.topic)
	if err := a.commits.commit(h.group, target); err != nil {
		return callErrResponse(req, fmt.Errorf("reset offset of %s on %s: %w", h.group, h.topic, err))
	}
	a.commits.forget(h.group, h.topic)
	entries := make([]queueEntry, 0, len(target))
	for _, e := range target {
		entries = append(entries, queueEntry{messageQueue{Topic: h.topic, BrokerName: a.b.Config().Group, QueueID: e.Queue}, e.Offset})
	}
	table, err := queueTable(entries)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	body := append(append([]byte(`{"offsetTable":`), table...), '}')
	sent := 0
	for _, m := range a.consumers.members(h.group) {
		if m.conn == nil {
			continue
		}
		// RocketMQ's header to the client: topic, group, timestamp, isForce.
		out := rmq.NewRequest(rmq.ResetConsumerClientOffset, map[string]string{"topic": h.topic, "group": h.group,
			"timestamp": strconv.FormatInt(h.timestamp, 10), "isForce": strconv.FormatBool(h.force)}, body)
		out.Flag |= rmq.FlagOneway
		out.Opaque = notifyOpaque.Add(1)
		if err := m.conn.Send(out); err != nil {
			a.log.Warn("reset offset: could not tell a client", "group", h.group, "client", m.clientID, "error", err)
			continue
		}
		sent++
	}
	a.log.Info("consumer offsets reset", "group", h.group, "topic", h.topic, "to", to, "force", h.force, "clients_told", sent)
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body = body
	return resp
}

// consumerRunningInfo answers GET_CONSUMER_RUNNING_INFO
// (GetConsumerRunningInfoRequestHeader: consumerGroup, clientId,
// jstackEnable) by asking the client itself on its connection to this
// node and answering what it answers (body ConsumerRunningInfo), as
// RocketMQ's broker does (AdminBrokerProcessor.callConsumer); a client not
// connected is SYSTEM_ERROR naming it.
func (a *Adapter) consumerRunningInfo(ctx context.Context, req *rmq.Command) *rmq.Command {
	group, client := req.Ext["consumerGroup"], req.Ext["clientId"]
	var conn *rmq.Conn
	for _, m := range a.consumers.members(group) {
		if m.clientID == client {
			conn = m.conn
		}
	}
	if conn == nil {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("The Consumer <%s> <%s> not online", group, client))
	}
	ext := map[string]string{"consumerGroup": group, "clientId": client}
	if v := req.Ext["jstackEnable"]; v != "" {
		ext["jstackEnable"] = v
	}
	out := rmq.NewRequest(rmq.GetConsumerRunningInfo, ext, nil)
	out.Opaque = pushOpaque.Add(1)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := conn.Invoke(ctx, out)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("consumer running info of %s: %v", client, err))
	}
	answer := rmq.Response(req, resp.Code, resp.Remark)
	answer.Body = resp.Body
	return answer
}

// forget drops what the committer holds of group's offsets of topic:
// piggybacked offsets queued before a reset must not be stored after it.
func (c *committer) forget(group, topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.pending[group] {
		if k.topic == topic && len(v.waiters) == 0 {
			delete(c.pending[group], k)
		}
	}
	for k := range c.last[group] {
		if k.topic == topic {
			delete(c.last[group], k)
		}
	}
}
