package remoting

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/mq"
	rmq "github.com/raftmq/raftmq/remoting"
)

// The requests a push consumer needs beyond pull and offsets: send-back
// (CONSUMER_SEND_MSG_BACK), the orderly queue locks (LOCK_BATCH_MQ,
// UNLOCK_BATCH_MQ) and view by id (VIEW_MESSAGE_BY_ID). Each is one broker
// call (broker/retry.go, broker/locks.go, broker/lookup.go), made here or,
// when this node is not the leader, on the leader over the node-to-node
// gRPC API; the broker decides everything (delay levels, the dead-letter
// step, who holds a lock).

// callContext bounds one of these calls, forwarding included, by the
// broker's write timeout (10 s unless configured).
func (a *Adapter) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := a.b.Config().WriteTimeout
	if d <= 0 {
		d = 10 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// sendBackHeader is ConsumerSendMsgBackRequestHeader.
type sendBackHeader struct {
	group      string
	id         string // the broker's message id, from offset
	delayLevel int32
	maxTimes   int32
}

// parseSendBack decodes a send-back. offset is the physical offset the
// adapter put into the pulled message (physicalOffset): it names the raft
// entry and ordinal of the stored message, i.e. its id. A maxReconsumeTimes
// of 0 or less (or absent) leaves the limit to the message and the group;
// one above the broker's bound is taken as the bound (the Go client sends
// its option as is, 16 by default).
func parseSendBack(req *rmq.Command) (sendBackHeader, error) {
	var h sendBackHeader
	h.group = req.Ext["group"]
	if h.group == "" {
		return h, fmt.Errorf("%w: send-back without a group", broker.ErrInvalidArgument)
	}
	off, err := req.ExtInt("offset", -1)
	if err != nil || off <= 0 {
		return h, fmt.Errorf("%w: send-back offset %q does not name a stored message", broker.ErrInvalidArgument, req.Ext["offset"])
	}
	h.id = messageID(off)
	level, err := req.ExtInt("delayLevel", 0)
	if err != nil {
		return h, fmt.Errorf("%w: %w", broker.ErrInvalidArgument, err)
	}
	if level < -1 {
		level = -1 // RocketMQ: any negative level dead-letters
	}
	if level > int64(len(mq.DelayLevels)) {
		level = int64(len(mq.DelayLevels)) // RocketMQ: past the last level waits the last
	}
	h.delayLevel = int32(level)
	maxTimes, err := req.ExtInt("maxReconsumeTimes", 0)
	if err != nil {
		return h, fmt.Errorf("%w: %w", broker.ErrInvalidArgument, err)
	}
	h.maxTimes = int32(min(max(maxTimes, 0), mq.MaxMaxReconsumeTimes))
	return h, nil
}

// sendBack answers CONSUMER_SEND_MSG_BACK with broker.SendBack. The client
// sends it to the node that served the message (its store host) or to the
// group's master; a follower forwards it. On any error the client stores
// the retry itself with a SEND to %RETRY%<group> (send.go).
func (a *Adapter) sendBack(ctx context.Context, req *rmq.Command) *rmq.Command {
	h, err := parseSendBack(req)
	if err != nil {
		return callErrResponse(req, err)
	}
	ctx, cancel := a.callContext(ctx)
	defer cancel()
	breq := broker.SendBackRequest{Group: h.group, ID: h.id, DelayLevel: h.delayLevel, MaxReconsumeTimes: h.maxTimes}
	res, err := a.b.SendBack(ctx, breq)
	if err != nil {
		err = a.forwardAPI(ctx, err, func(ctx context.Context, c api.BrokerClient) error {
			r, ferr := c.SendBack(ctx, &api.SendBackRequest{Group: breq.Group, Id: breq.ID,
				DelayLevel: breq.DelayLevel, MaxReconsumeTimes: breq.MaxReconsumeTimes})
			if ferr == nil {
				res = broker.SendBackResult{ID: r.Id, Topic: r.Topic, DeadLettered: r.DeadLettered, ReconsumeTimes: r.ReconsumeTimes}
			}
			return ferr
		})
	}
	if err != nil {
		a.log.Debug("send-back refused", "group", h.group, "id", h.id, "error", err)
		return callErrResponse(req, err)
	}
	a.log.Debug("sent back", "group", h.group, "id", h.id, "copy", res.ID, "topic", res.Topic, "reconsume", res.ReconsumeTimes)
	return rmq.Response(req, rmq.Success, "")
}

// messageQueue is RocketMQ's MessageQueue in JSON.
type messageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// lockBatchBody is LockBatchRequestBody / UnlockBatchRequestBody.
type lockBatchBody struct {
	ConsumerGroup string         `json:"consumerGroup"`
	ClientID      string         `json:"clientId"`
	MQSet         []messageQueue `json:"mqSet"`
}

// decodeLockBatch decodes the body of LOCK_BATCH_MQ or UNLOCK_BATCH_MQ.
func decodeLockBatch(body []byte) (lockBatchBody, error) {
	var b lockBatchBody
	if err := json.Unmarshal(body, &b); err != nil {
		return b, fmt.Errorf("%w: lock body: %w", broker.ErrInvalidArgument, err)
	}
	if len(b.MQSet) > broker.MaxLockQueues {
		return b, fmt.Errorf("%w: lock body: %d queues, at most %d", broker.ErrInvalidArgument, len(b.MQSet), broker.MaxLockQueues)
	}
	return b, nil
}

func (b *lockBatchBody) refs() []broker.QueueRef {
	out := make([]broker.QueueRef, len(b.MQSet))
	for i, q := range b.MQSet {
		out[i] = broker.QueueRef{Topic: q.Topic, Queue: q.QueueID}
	}
	return out
}

func apiRefs(qs []broker.QueueRef) []*api.QueueRef {
	out := make([]*api.QueueRef, len(qs))
	for i, q := range qs {
		out[i] = &api.QueueRef{Topic: q.Topic, Queue: q.Queue}
	}
	return out
}

// lockBatch answers LOCK_BATCH_MQ with broker.LockQueues for the client id:
// lockOKMQSet is the queues it holds now, each as the client named it (the
// client compares them with its own MessageQueue values).
func (a *Adapter) lockBatch(ctx context.Context, req *rmq.Command) *rmq.Command {
	body, err := decodeLockBatch(req.Body)
	if err != nil {
		return callErrResponse(req, err)
	}
	ctx, cancel := a.callContext(ctx)
	defer cancel()
	refs := body.refs()
	locked, _, err := a.b.LockQueues(ctx, body.ConsumerGroup, body.ClientID, refs)
	if err != nil {
		err = a.forwardAPI(ctx, err, func(ctx context.Context, c api.BrokerClient) error {
			r, ferr := c.LockQueues(ctx, &api.LockQueuesRequest{Group: body.ConsumerGroup, MemberId: body.ClientID, Queues: apiRefs(refs)})
			if ferr == nil {
				locked = locked[:0]
				for _, q := range r.Locked {
					locked = append(locked, broker.QueueRef{Topic: q.Topic, Queue: q.Queue})
				}
			}
			return ferr
		})
	}
	if err != nil {
		a.log.Debug("lock refused", "group", body.ConsumerGroup, "client", body.ClientID, "error", err)
		return callErrResponse(req, err)
	}
	held := make(map[broker.QueueRef]bool, len(locked))
	for _, q := range locked {
		held[q] = true
	}
	out := struct {
		LockOKMQSet []messageQueue `json:"lockOKMQSet"`
	}{LockOKMQSet: []messageQueue{}}
	for i, q := range body.MQSet {
		if held[refs[i]] {
			out.LockOKMQSet = append(out.LockOKMQSet, q)
		}
	}
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body, _ = json.Marshal(out)
	return resp
}

// unlockBatch answers UNLOCK_BATCH_MQ with broker.UnlockQueues. The Go
// client sends it as a plain request even when it means one way (trap 2),
// so it is always answered.
func (a *Adapter) unlockBatch(ctx context.Context, req *rmq.Command) *rmq.Command {
	body, err := decodeLockBatch(req.Body)
	if err != nil {
		return callErrResponse(req, err)
	}
	ctx, cancel := a.callContext(ctx)
	defer cancel()
	refs := body.refs()
	err = a.b.UnlockQueues(ctx, body.ConsumerGroup, body.ClientID, refs)
	if err != nil {
		err = a.forwardAPI(ctx, err, func(ctx context.Context, c api.BrokerClient) error {
			_, ferr := c.UnlockQueues(ctx, &api.UnlockQueuesRequest{Group: body.ConsumerGroup, MemberId: body.ClientID, Queues: apiRefs(refs)})
			return ferr
		})
	}
	if err != nil {
		return callErrResponse(req, err)
	}
	return rmq.Response(req, rmq.Success, "")
}

// viewMessage answers VIEW_MESSAGE_BY_ID (the offsetMsgId's offset, i.e.
// the physical offset of a pulled or sent message) with broker.LookupMessage:
// the one message in the pull body's layout. A node that does not hold it
// asks the leader. A delayed message not delivered yet is answered as it
// will be delivered (its topic and queue, queue offset 0).
func (a *Adapter) viewMessage(ctx context.Context, req *rmq.Command) *rmq.Command {
	off, err := req.ExtInt("offset", -1)
	if err != nil || off <= 0 {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("view message: offset %q does not name a stored message", req.Ext["offset"]))
	}
	id := messageID(off)
	ctx, cancel := a.callContext(ctx)
	defer cancel()
	res, err := a.b.LookupMessage(ctx, id)
	if err != nil {
		err = a.forwardAPI(ctx, err, func(ctx context.Context, c api.BrokerClient) error {
			r, ferr := c.LookupMessage(ctx, &api.LookupMessageRequest{Id: id})
			if ferr == nil && r.Message != nil {
				m := r.Message
				res = broker.LookupResult{Message: broker.Message{Topic: m.Topic, Queue: m.Queue, Offset: m.Offset, ID: m.Id, Key: m.Key, Tag: m.Tag,
					Properties: m.Properties, Body: m.Body, Timestamp: m.TimestampMs}, ServedBy: r.ServedBy, Pending: r.Pending, DeliverAt: r.DeliverAtMs}
			}
			return ferr
		})
	}
	if err != nil {
		return rmq.Response(req, callCodeOf(err), "view message "+strconv.FormatInt(off, 10)+": "+err.Error())
	}
	body, err := a.encodeMessages([]broker.Message{res.Message})
	if err != nil {
		return rmq.Response(req, rmq.SystemError, "view message: "+err.Error())
	}
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body = body
	return resp
}
