package remoting

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	rmq "github.com/raftmq/raftmq/remoting"
)

// The statistics and connection lists RocketMQ's admin tools read
// (mqadmin topicList, topicStatus, consumerProgress, consumerConnection,
// producerConnection, the dashboard's topic and consumer pages), answered
// from the broker's applied state and this node's client connections.

// ConsumerNotOnline is RocketMQ's CONSUMER_NOT_ONLINE (ResponseCode 206).
const consumerNotOnline int32 = 206

// queueEntry is one entry of a map keyed by MessageQueue (messageQueue,
// semantics.go).
type queueEntry struct {
	mq  messageQueue
	val any
}

// queueTable writes entries as fastjson writes a Map<MessageQueue, V>:
// each key is the MessageQueue's JSON object, not a string (so the result
// is not strict JSON; RocketMQ's tools parse it with fastjson). Sorted by
// topic, then queue.
func queueTable(entries []queueEntry) ([]byte, error) {
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].mq.Topic != entries[j].mq.Topic {
			return entries[i].mq.Topic < entries[j].mq.Topic
		}
		return entries[i].mq.QueueID < entries[j].mq.QueueID
	})
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.mq)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.val)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// topicConfig mirrors RocketMQ's TopicConfig (common/.../TopicConfig.java).
type topicConfig struct {
	Attributes      map[string]string `json:"attributes"`
	Order           bool              `json:"order"`
	Perm            uint32            `json:"perm"`
	ReadQueueNums   int               `json:"readQueueNums"`
	TopicFilterType string            `json:"topicFilterType"`
	TopicName       string            `json:"topicName"`
	TopicSysFlag    int               `json:"topicSysFlag"`
	WriteQueueNums  int               `json:"writeQueueNums"`
}

// topicConfigWrapper mirrors RocketMQ's TopicConfigSerializeWrapper
// (remoting/.../protocol/body/TopicConfigSerializeWrapper.java).
type topicConfigWrapper struct {
	DataVersion      dataVersion            `json:"dataVersion"`
	TopicConfigTable map[string]topicConfig `json:"topicConfigTable"`
}

// allTopicConfigs answers GET_ALL_TOPIC_CONFIG (no header; body
// TopicConfigSerializeWrapper): every topic this node has applied, system
// topics included, as RocketMQ lists them.
func (a *Adapter) allTopicConfigs(req *rmq.Command) *rmq.Command {
	w := topicConfigWrapper{DataVersion: dataVersion{Timestamp: time.Now().UnixMilli()}, TopicConfigTable: map[string]topicConfig{}}
	for _, t := range a.b.Topics() {
		perm := t.Perm
		if perm == 0 {
			perm = 6
		}
		w.TopicConfigTable[t.Name] = topicConfig{Attributes: map[string]string{}, Perm: perm, ReadQueueNums: len(t.Queues), WriteQueueNums: len(t.Queues),
			TopicFilterType: "SINGLE_TAG", TopicName: t.Name}
	}
	return jsonResponse(req, w)
}

// topicOffset mirrors RocketMQ's TopicOffset (remoting/.../protocol/admin/TopicOffset.java).
type topicOffset struct {
	LastUpdateTimestamp int64  `json:"lastUpdateTimestamp"`
	MaxOffset           uint64 `json:"maxOffset"`
	MinOffset           uint64 `json:"minOffset"`
}

// storeTime is the store time of the message at offset of topic's queue q
// as this node reads it, 0 when it cannot be read here.
func (a *Adapter) storeTime(ctx context.Context, topic string, q int32, offset uint64) int64 {
	res, err := a.b.Pull(ctx, broker.PullRequest{Topic: topic, Queue: q, Offset: offset, MaxMessages: 1})
	if err != nil || res.Status != broker.PullFound || len(res.Messages) == 0 {
		return 0
	}
	return res.Messages[0].Timestamp
}

// topicStats answers GET_TOPIC_STATS_INFO (GetTopicStatsInfoRequestHeader:
// topic; body TopicStatsTable, remoting/.../protocol/admin/TopicStatsTable.java):
// each queue's range as this node has applied it, and the store time of
// its last message.
func (a *Adapter) topicStats(ctx context.Context, req *rmq.Command) *rmq.Command {
	topic := req.Ext["topic"]
	ti, err := a.b.Topic(topic)
	if err != nil {
		return rmq.Response(req, rmq.TopicNotExist, fmt.Sprintf("topic[%s] not exist: %v", topic, err))
	}
	entries := make([]queueEntry, 0, len(ti.Queues))
	for q, rng := range ti.Queues {
		off := topicOffset{MinOffset: rng.Min, MaxOffset: rng.Max}
		if rng.Max > rng.Min {
			off.LastUpdateTimestamp = a.storeTime(ctx, topic, int32(q), rng.Max-1)
		}
		entries = append(entries, queueEntry{messageQueue{BrokerName: a.b.Config().Group, QueueID: int32(q), Topic: topic}, off})
	}
	table, err := queueTable(entries)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body = append(append([]byte(`{"offsetTable":`), table...), `,"topicPutTps":0.0}`...)
	return resp
}

// offsetWrapper mirrors RocketMQ's OffsetWrapper (remoting/.../protocol/admin/OffsetWrapper.java).
type offsetWrapper struct {
	BrokerOffset   uint64 `json:"brokerOffset"`
	ConsumerOffset uint64 `json:"consumerOffset"`
	LastTimestamp  int64  `json:"lastTimestamp"`
	PullOffset     uint64 `json:"pullOffset"`
}

// describeGroup is broker.DescribeGroup on the leader (it holds the live
// members), as the queues' rows.
func (a *Adapter) describeGroup(ctx context.Context, group string) ([]broker.GroupQueue, error) {
	var rows []broker.GroupQueue
	err := a.onLeader(ctx, func(ctx context.Context) error {
		g, err := a.b.DescribeGroup(ctx, group)
		rows = g.Queues
		return err
	}, func(ctx context.Context, addr string) error {
		cc, err := a.peers.Conn(addr)
		if err != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		resp, err := api.NewBrokerClient(cc).DescribeGroup(ctx, &api.DescribeGroupRequest{Group: group})
		rows = nil
		for _, q := range resp.GetQueues() {
			rows = append(rows, broker.GroupQueue{Topic: q.Topic, Queue: q.Queue, Committed: q.Committed, MaxOffset: q.MaxOffset, Lag: q.Lag, Member: q.MemberId})
		}
		return err
	})
	return rows, err
}

// consumeStats answers GET_CONSUME_STATS (GetConsumeStatsRequestHeader:
// consumerGroup, topic (optional); body ConsumeStats,
// remoting/.../protocol/admin/ConsumeStats.java): per queue of the
// group's topics, the queue's end (brokerOffset), the committed offset
// (consumerOffset and pullOffset; 0 when none, as RocketMQ answers) and
// the store time of the last message consumed. A group raftmq does not
// know has an empty table. A broadcasting group's queues show the lowest
// of its members' offsets.
func (a *Adapter) consumeStats(ctx context.Context, req *rmq.Command) *rmq.Command {
	group, only := req.Ext["consumerGroup"], req.Ext["topic"]
	if group == "" {
		return rmq.Response(req, rmq.SystemError, "consume stats: field consumerGroup: empty")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := a.describeGroup(ctx, group)
	if err != nil && !isNotFound(err) {
		return callErrResponse(req, fmt.Errorf("consume stats of %s: %w", group, err))
	}
	byQueue := map[messageQueue]offsetWrapper{}
	for _, r := range rows {
		if only != "" && r.Topic != only {
			continue
		}
		mq := messageQueue{BrokerName: a.b.Config().Group, QueueID: r.Queue, Topic: r.Topic}
		off := uint64(max(r.Committed, 0))
		if prev, ok := byQueue[mq]; ok && prev.ConsumerOffset <= off {
			continue
		}
		byQueue[mq] = offsetWrapper{BrokerOffset: r.MaxOffset, ConsumerOffset: off, PullOffset: off}
	}
	entries := make([]queueEntry, 0, len(byQueue))
	for mq, w := range byQueue {
		if w.ConsumerOffset > 0 {
			w.LastTimestamp = a.storeTime(ctx, mq.Topic, mq.QueueID, w.ConsumerOffset-1)
		}
		entries = append(entries, queueEntry{mq, w})
	}
	table, err := queueTable(entries)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body = append(append([]byte(`{"consumeTps":0.0,"offsetTable":`), table...), '}')
	return resp
}

// connection mirrors RocketMQ's Connection (remoting/.../protocol/body/Connection.java).
type connection struct {
	ClientAddr string `json:"clientAddr"`
	ClientID   string `json:"clientId"`
	Language   string `json:"language"`
	Version    int32  `json:"version"`
}

func connectionsOf(ms []memberView) []connection {
	out := make([]connection, 0, len(ms))
	for _, m := range ms {
		out = append(out, connection{ClientAddr: m.info.addr, ClientID: m.clientID, Language: m.info.language, Version: m.info.version})
	}
	return out
}

// consumerConnection mirrors RocketMQ's ConsumerConnection
// (remoting/.../protocol/body/ConsumerConnection.java).
type consumerConnection struct {
	ConnectionSet     []connection               `json:"connectionSet"`
	ConsumeFromWhere  string                     `json:"consumeFromWhere,omitempty"`
	ConsumeType       string                     `json:"consumeType,omitempty"`
	MessageModel      string                     `json:"messageModel,omitempty"`
	SubscriptionTable map[string]json.RawMessage `json:"subscriptionTable"`
}

// consumerConnections answers GET_CONSUMER_CONNECTION_LIST
// (GetConsumerConnectionListRequestHeader: consumerGroup): the group's
// clients whose heartbeats this node holds (every client heartbeats every
// node of the group), with the subscriptions they sent; none:
// CONSUMER_NOT_ONLINE, as RocketMQ answers.
func (a *Adapter) consumerConnections(req *rmq.Command) *rmq.Command {
	group := req.Ext["consumerGroup"]
	ms := a.consumers.members(group)
	if len(ms) == 0 {
		return rmq.Response(req, consumerNotOnline, fmt.Sprintf("the consumer group[%s] not online", group))
	}
	cc := consumerConnection{ConnectionSet: connectionsOf(ms), SubscriptionTable: map[string]json.RawMessage{}}
	for _, m := range ms {
		cc.ConsumeType, cc.MessageModel, cc.ConsumeFromWhere = m.info.consumeType, m.info.messageModel, m.info.consumeFromWhere
		for _, sub := range m.info.subscriptions {
			var s struct {
				Topic string `json:"topic"`
			}
			if json.Unmarshal(sub, &s) == nil && s.Topic != "" {
				cc.SubscriptionTable[s.Topic] = sub
			}
		}
	}
	return jsonResponse(req, cc)
}

// producerConnections answers GET_PRODUCER_CONNECTION_LIST
// (GetProducerConnectionListRequestHeader: producerGroup; body
// ProducerConnection, remoting/.../protocol/body/ProducerConnection.java);
// none: SYSTEM_ERROR, as RocketMQ answers.
func (a *Adapter) producerConnections(req *rmq.Command) *rmq.Command {
	group := req.Ext["producerGroup"]
	ms := a.producers.members(group)
	if len(ms) == 0 {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("the producer group[%s] not exist", group))
	}
	return jsonResponse(req, struct {
		ConnectionSet []connection `json:"connectionSet"`
	}{connectionsOf(ms)})
}

// topicConsumers answers QUERY_TOPIC_CONSUME_BY_WHO
// (QueryTopicConsumeByWhoRequestHeader: topic; body GroupList,
// remoting/.../protocol/body/GroupList.java): the groups with committed
// offsets of the topic and the live consumer groups subscribed to it.
func (a *Adapter) topicConsumers(req *rmq.Command) *rmq.Command {
	topic := req.Ext["topic"]
	set := map[string]bool{}
	for _, g := range a.b.TopicGroups(topic) {
		set[g] = true
	}
	for _, g := range a.consumers.groupNames() {
		for _, m := range a.consumers.members(g) {
			for _, sub := range m.info.subscriptions {
				var s struct {
					Topic string `json:"topic"`
				}
				if json.Unmarshal(sub, &s) == nil && s.Topic == topic {
					set[g] = true
				}
			}
		}
	}
	list := make([]string, 0, len(set))
	for g := range set {
		list = append(list, g)
	}
	sort.Strings(list)
	return jsonResponse(req, map[string][]string{"groupList": list})
}
