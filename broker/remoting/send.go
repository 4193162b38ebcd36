package remoting

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/mq"
	rmq "github.com/raftmq/raftmq/remoting"
)

// RocketMQ property names the adapter maps onto broker fields.
const (
	propKeys      = "KEYS"
	propTags      = "TAGS"
	propUniqKey   = "UNIQ_KEY"
	propReconsume = "RECONSUME_TIME"
	// propFlag carries a message's int32 flag, which the broker has no
	// field for, through the log.
	propFlag = "RAFTMQ_FLAG"
)

// relativeTimers are the Java 5.x client's delays relative to the send
// (Message.setDelayTimeSec, setDelayTimeMs). The Go client sets only DELAY
// and TIMER_DELIVER_MS, which the broker's delayed produce takes as they
// are (package broker/delay).
var relativeTimers = []string{"TIMER_DELAY_SEC", "TIMER_DELAY_MS"}

// v2Names maps SendMessageRequestHeaderV2's one-letter fields to the V1
// names.
var v2Names = map[string]string{"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
	"f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes", "k": "unitMode",
	"l": "maxReconsumeTimes", "m": "batch", "n": "bname"}

// v2Letters maps the V1 names to SendMessageRequestHeaderV2's letters.
var v2Letters = func() map[string]string {
	m := make(map[string]string, len(v2Names))
	for letter, name := range v2Names {
		m[name] = letter
	}
	return m
}()

type sendHeader struct {
	topic     string
	queue     int64
	sysFlag   int64
	bornTS    int64
	flag      int64
	props     map[string]string
	batch     bool
	reconsume int64
	maxTimes  int64 // maxReconsumeTimes: the limit of a send to a retry topic
}

func parseSendHeader(req *rmq.Command) (sendHeader, error) {
	field := func(name string) string { return req.Ext[name] }
	if req.Code == rmq.SendMessageV2 || req.Code == rmq.SendBatchMessage {
		if _, v1 := req.Ext["topic"]; !v1 {
			field = func(name string) string {
				if v, ok := req.Ext[v2Letters[name]]; ok {
					return v
				}
				return req.Ext[name]
			}
		}
	}
	var h sendHeader
	var err error
	h.topic = field("topic")
	if h.topic == "" {
		return h, fmt.Errorf("%w: send without a topic", broker.ErrInvalidArgument)
	}
	num := func(name string, def int64) int64 {
		if err != nil {
			return 0
		}
		var n int64
		n, err = rmq.ParseExtInt(name, field(name), def)
		return n
	}
	h.queue = num("queueId", -1)
	h.sysFlag = num("sysFlag", 0)
	h.bornTS = num("bornTimestamp", 0)
	h.flag = num("flag", 0)
	h.reconsume = num("reconsumeTimes", 0)
	h.maxTimes = num("maxReconsumeTimes", 0)
	if err != nil {
		return h, fmt.Errorf("%w: %w", broker.ErrInvalidArgument, err)
	}
	if h.queue < -1 || h.queue > 1<<20 {
		return h, fmt.Errorf("%w: queueId %d", broker.ErrInvalidArgument, h.queue)
	}
	h.props = rmq.DecodeProperties(field("properties"))
	if h.props == nil {
		h.props = map[string]string{}
	}
	h.batch = req.Code == rmq.SendBatchMessage || field("batch") == "true"
	if int32(h.sysFlag)&rmq.SysTransactionMask == rmq.SysTransactionPrepared && !h.batch {
		// The prepared type in sysFlag marks a half message as TRAN_MSG
		// does; the broker reads the property.
		h.props[mq.PropTransactionPrepared] = "true"
	}
	if mq.IsTransactionPrepared(h.props) {
		h.props[mq.PropTransactionPrepared] = "true"
		// RocketMQ's transaction id is the message's UNIQ_KEY
		// (TransactionalMessageBridge): the check-back hands it back.
		if u := h.props[propUniqKey]; u != "" {
			h.props[mq.PropTransactionID] = u
		}
	}
	for _, k := range relativeTimers {
		if _, ok := h.props[k]; ok {
			// A relative timer would become a delivery time here, at
			// receipt, and a retry of the send would then carry another
			// one than the first attempt: refused rather than delivered
			// at once (docs/rocketmq.md, "Not served").
			return h, fmt.Errorf("%w: property %s (a delay relative to the send) is not supported; use %s (a delivery time in unix ms) or %s (a delay level)",
				broker.ErrInvalidArgument, k, mq.PropTimerDeliverMS, mq.PropDelay)
		}
	}
	return h, nil
}

// produceMessage maps one RocketMQ message onto the broker's: KEYS is the
// key, TAGS the tag, every other property stays a property.
func produceMessage(props map[string]string, body []byte, flag int64, h *sendHeader) broker.ProduceMessage {
	m := broker.ProduceMessage{Key: props[propKeys], Tag: props[propTags], Body: body, Timestamp: h.bornTS}
	if h.queue >= 0 {
		m.Queue, m.HasQueue = int32(h.queue), true
	}
	rest := make(map[string]string, len(props))
	for k, v := range props {
		if k != propKeys && k != propTags {
			rest[k] = v
		}
	}
	if flag != 0 {
		rest[propFlag] = strconv.FormatInt(flag, 10)
	}
	// RocketMQ keeps a re-sent message's count in its header (the Go
	// client's send-back fallback to %RETRY%<group> sets it there); the
	// stored message carries it as RECONSUME_TIME, which pulls report.
	if h.reconsume > 0 {
		rest[propReconsume] = strconv.FormatInt(h.reconsume, 10)
	}
	// A send to %RETRY%<group> names its limit in the header, as
	// CONSUMER_SEND_MSG_BACK does (RocketMQ's SendMessageProcessor takes it
	// over the group's); the broker reads it from MAX_RECONSUME_TIMES when
	// it decides whether the copy is a dead letter (broker/retry_produce.go).
	if mq.IsRetryTopic(h.topic) && h.maxTimes > 0 {
		rest[mq.PropMaxReconsumeTimes] = strconv.FormatInt(min(h.maxTimes, mq.MaxMaxReconsumeTimes), 10)
	}
	if len(rest) > 0 {
		m.Properties = rest
	}
	return m
}

// produceRequest decodes a send into one broker request. The client's
// UNIQ_KEY (set once per message and kept across its retries) is the
// idempotent producer id, sequence 1: a retry after a lost answer or a
// leader change is stored once. A batch is keyed by its first message's
// UNIQ_KEY when every message has one (the Java client sets them; the Go
// client does not, and its batches are then not deduplicated).
func (a *Adapter) produceRequest(req *rmq.Command) (broker.ProduceRequest, error) {
	h, err := parseSendHeader(req)
	if err != nil {
		return broker.ProduceRequest{}, err
	}
	cfg := a.b.Config()
	preq := broker.ProduceRequest{Topic: h.topic}
	if !h.batch {
		body := req.Body
		if h.sysFlag&int64(rmq.SysCompressed) != 0 {
			if body, err = rmq.Uncompress(body, cfg.MaxMessageBytes); err != nil {
				return preq, fmt.Errorf("%w: %w", broker.ErrInvalidArgument, err)
			}
		}
		if body == nil {
			body = []byte{}
		}
		preq.Messages = []broker.ProduceMessage{produceMessage(h.props, body, h.flag, &h)}
		if u := h.props[propUniqKey]; u != "" {
			preq.ProducerID, preq.Seq = "rmq-"+u, 1
			if mq.IsRetryTopic(h.topic) {
				// The client's send-back fallback keeps the message's
				// UNIQ_KEY: each retry of it is a message of its own
				// (one per reconsume count), not a retry of the first send.
				preq.ProducerID = fmt.Sprintf("rmq-%s/r%d", u, h.reconsume)
			}
		}
		return preq, nil
	}
	msgs, err := rmq.DecodeBatch(req.Body, broker.MaxMessagesPerRequest)
	if err != nil {
		return preq, fmt.Errorf("%w: batch body: %w", broker.ErrInvalidArgument, err)
	}
	if len(msgs) == 0 {
		return preq, fmt.Errorf("%w: empty batch", broker.ErrInvalidArgument)
	}
	keyed := true
	for _, m := range msgs {
		body := m.Body
		if body == nil {
			body = []byte{}
		}
		preq.Messages = append(preq.Messages, produceMessage(m.Properties, body, int64(m.Flag), &h))
		keyed = keyed && m.Properties[propUniqKey] != ""
	}
	if keyed {
		preq.ProducerID, preq.Seq = "rmqb-"+msgs[0].Properties[propUniqKey], 1
	}
	return preq, nil
}

func (a *Adapter) send(ctx context.Context, conn *rmq.Conn, req *rmq.Command) *rmq.Command {
	preq, err := a.produceRequest(req)
	if err != nil {
		return errResponse(req, err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.b.Config().WriteTimeout)
	defer cancel()
	if len(preq.Messages) == 1 && preq.Messages[0].Properties[propReplyToClient] != "" {
		a.requestSent(ctx, conn, preq.Messages[0].Properties[propReplyToClient])
	}
	acks, err := a.produce(ctx, preq)
	if err != nil {
		a.log.Debug("send refused", "topic", preq.Topic, "error", err)
		return errResponse(req, err)
	}
	resp := rmq.Response(req, rmq.Success, "")
	ids := make([]string, len(acks))
	for i, ack := range acks {
		ids[i] = rmq.OffsetMessageID(a.store, physicalOffset(ack.id))
	}
	resp.Ext["msgId"] = strings.Join(ids, ",")
	resp.Ext["queueId"] = strconv.Itoa(int(acks[0].queue))
	resp.Ext["queueOffset"] = strconv.FormatUint(acks[0].offset, 10)
	resp.Ext["MSG_REGION"] = "DefaultRegion"
	resp.Ext["TRACE_ON"] = "false"
	if len(preq.Messages) == 1 && mq.IsTransactionPrepared(preq.Messages[0].Properties) {
		resp.Ext["transactionId"] = preq.Messages[0].Properties[mq.PropTransactionID]
	}
	return resp
}

type ack struct {
	queue  int32
	offset uint64
	id     string
}

// produce stores preq here, or on the leader when this node is not it.
// A client's send is checked as the gRPC API checks it (no system topics,
// write permission: broker.ClientProduce), except a send to a group's retry
// topic: that is how RocketMQ clients send a failed message back when
// CONSUMER_SEND_MSG_BACK fails, and RocketMQ's broker takes it. Such a
// send is only taken by the leader (the node-to-node API forwards client
// sends, which may not name a system topic); elsewhere it is answered
// SERVICE_NOT_AVAILABLE, which the client's route update resolves.
func (a *Adapter) produce(ctx context.Context, preq broker.ProduceRequest) ([]ack, error) {
	produce := a.b.ClientProduce
	retry := mq.IsRetryTopic(preq.Topic)
	if retry {
		produce = a.b.Produce
	}
	var out []ack
	local := func(ctx context.Context) error {
		res, err := produce(ctx, preq)
		if err == nil {
			out = make([]ack, len(res.Acks))
			for i, x := range res.Acks {
				out[i] = ack{int32(x.Queue), x.Offset, x.ID()}
			}
		}
		return err
	}
	if retry {
		return out, local(ctx)
	}
	// A send that finds the leader gone waits for the next one within ctx
	// (onLeader): stored once, as the UNIQ_KEY is its producer id.
	err := a.onLeader(ctx, local, func(ctx context.Context, addr string) error {
		cc, err := a.peers.Conn(addr)
		if err != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		r, err := a.peers.Produce(ctx, cc, produceProto(preq))
		if err != nil {
			return err
		}
		acks, err := r.AcksFor(len(preq.Messages))
		if err != nil {
			return err
		}
		out = out[:0]
		for _, x := range acks {
			out = append(out, ack{x.Queue, x.Offset, x.Id})
		}
		return nil
	})
	if err == nil && len(out) != len(preq.Messages) {
		err = fmt.Errorf("leader acknowledged %d of %d messages", len(out), len(preq.Messages))
	}
	return out, err
}

func produceProto(r broker.ProduceRequest) *api.ProduceRequest {
	out := &api.ProduceRequest{Topic: r.Topic, ProducerId: r.ProducerID, Sequence: r.Seq, Messages: make([]*api.ProduceMessage, len(r.Messages)), PackedAcks: true}
	for i, m := range r.Messages {
		pm := &api.ProduceMessage{Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body, TimestampMs: m.Timestamp}
		if m.HasQueue {
			q := m.Queue
			pm.Queue = &q
		}
		out.Messages[i] = pm
	}
	return out
}

// physicalOffset is a pulled or sent message's RocketMQ commitlog offset:
// the raft log index of its entry and its ordinal there (the broker's
// message id, 16 + 8 hex digits), as index<<24 | ordinal. It names the
// stored message, so a client that hands it back (send-back, view by id)
// names that message.
func physicalOffset(id string) int64 {
	if len(id) != mq.MessageIDLen {
		return 0
	}
	index, err1 := strconv.ParseUint(id[:16], 16, 64)
	ord, err2 := strconv.ParseUint(id[16:], 16, 32)
	if err1 != nil || err2 != nil || index >= 1<<39 || ord >= 1<<24 {
		return 0
	}
	return int64(index<<24 | ord)
}

// messageID is the inverse of physicalOffset.
func messageID(phys int64) string {
	return string(mq.AppendMessageID(nil, uint64(phys)>>24, uint32(phys&(1<<24-1))))
}
