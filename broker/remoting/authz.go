package remoting

import (
	"encoding/json"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/mq"
	rmq "github.com/raftmq/raftmq/remoting"
)

// authorize checks a request against Config.Auth before it is served (nil:
// it may be served). The request code decides what it needs
// (authNeeds); the Authorizer verifies its signature and the user's
// grants and, in permissive mode, only counts what it would refuse.
func (a *Adapter) authorize(conn *rmq.Conn, req *rmq.Command) *rmq.Command {
	if a.cfg.Auth.Mode() == acl.Disabled {
		return nil
	}
	if err := a.cfg.Auth.Check(req.Ext, req.Body, authNeeds(req), rmq.DescribeCode(req.Code), conn.Remote); err != nil {
		if d, ok := err.(*auth.Denied); ok && d.Retryable() {
			return rmq.Response(req, rmq.SystemBusy, err.Error())
		}
		return rmq.Response(req, rmq.NoPermission, err.Error())
	}
	return nil
}

// topicNeed is what reading or writing topic needs: a retry topic
// (%RETRY%<group>) is its consumer group's, which subscribe covers, as
// RocketMQ checks it.
func topicNeed(action auth.Action, topic string) auth.Need {
	if mq.IsRetryTopic(topic) {
		return auth.Need{Action: auth.Subscribe, Resource: auth.Group(topic)}
	}
	return auth.Need{Action: action, Resource: auth.Topic(topic)}
}

// authNeeds returns the permissions a request needs beyond a valid
// signature of a known user: publish on the topic of a send; subscribe on
// the consumer group and the topic of pulls, offsets, heartbeats, locks and
// send-backs; admin on the cluster for topic creation. A request that
// names no topic or group (routes, a message by id, the list of
// subscription groups, as raftmq's ListGroups) needs only the signature.
// Deleting a topic, and creating, changing or deleting a subscription
// group, need admin on it, as raftmq's own calls do. Fields a request
// lacks are not checked here: the handler refuses the request.
func authNeeds(req *rmq.Command) []auth.Need {
	ext := req.Ext
	var needs []auth.Need
	topic := func(action auth.Action, name string) {
		if name != "" {
			needs = append(needs, topicNeed(action, name))
		}
	}
	group := func(name string) {
		if name != "" {
			needs = append(needs, auth.Need{Action: auth.Subscribe, Resource: auth.Group(name)})
		}
	}
	switch req.Code {
	case rmq.SendMessage, rmq.SendMessageV2, rmq.SendBatchMessage, rmq.SendReplyMessage, rmq.SendReplyMessageV2:
		t := ext["topic"]
		if t == "" {
			t = ext["b"] // SendMessageRequestHeaderV2
		}
		topic(auth.Publish, t)
	case rmq.PullMessage, rmq.LitePullMessage, rmq.QueryConsumerOffset, rmq.UpdateConsumerOffset:
		group(ext["consumerGroup"])
		topic(auth.Subscribe, ext["topic"])
	case rmq.GetConsumerListByGroup, rmq.CheckClientConfig, rmq.UnregisterClient:
		group(ext["consumerGroup"])
	case rmq.ConsumerSendMsgBack:
		group(ext["group"])
	case rmq.GetConsumeStats:
		group(ext["consumerGroup"])
		topic(auth.Subscribe, ext["topic"])
	case rmq.GetConsumerConnectionList:
		group(ext["consumerGroup"])
	case rmq.InvokeBrokerToResetOffset:
		// As raftmq's ResetGroup: admin on the group.
		if g := ext["group"]; g != "" {
			needs = append(needs, auth.Need{Action: auth.Admin, Resource: auth.Group(g)})
		}
	case rmq.GetConsumerRunningInfo, rmq.UpdateBrokerConfig, rmq.GetBrokerConfig:
		needs = append(needs, auth.Need{Action: auth.Admin, Resource: auth.ClusterResource})
	case rmq.GetMaxOffset, rmq.GetMinOffset, rmq.SearchOffsetByTimestamp, rmq.GetEarliestMsgStoreTime, rmq.QueryMessage,
		rmq.GetTopicStatsInfo, rmq.QueryTopicConsumeByWho:
		topic(auth.Subscribe, ext["topic"])
	case rmq.HeartBeat:
		var hb authHeartbeat
		if json.Unmarshal(req.Body, &hb) == nil {
			for _, cd := range hb.ConsumerData {
				group(cd.GroupName)
				for _, s := range cd.Subscriptions {
					topic(auth.Subscribe, s.Topic)
				}
			}
		}
	case rmq.LockBatchMQ, rmq.UnlockBatchMQ:
		if b, err := decodeLockBatch(req.Body); err == nil {
			group(b.ConsumerGroup)
			for _, q := range b.MQSet {
				topic(auth.Subscribe, q.Topic)
			}
		}
	case rmq.UpdateAndCreateTopic:
		needs = append(needs, auth.Need{Action: auth.Admin, Resource: auth.ClusterResource})
	case rmq.DeleteTopicInBroker:
		// As raftmq's DeleteTopic: admin on the topic.
		if t := ext["topic"]; t != "" {
			needs = append(needs, auth.Need{Action: auth.Admin, Resource: auth.Topic(t)})
		}
	case rmq.UpdateAndCreateSubscriptionGroup:
		// As raftmq's UpdateGroup: admin on the group named in the body
		// (SubscriptionGroupConfig); a body that names none needs admin
		// on the cluster (the handler refuses it anyway).
		var c struct {
			GroupName string `json:"groupName"`
		}
		if json.Unmarshal(req.Body, &c) == nil && c.GroupName != "" {
			needs = append(needs, auth.Need{Action: auth.Admin, Resource: auth.Group(c.GroupName)})
		} else {
			needs = append(needs, auth.Need{Action: auth.Admin, Resource: auth.ClusterResource})
		}
	case rmq.DeleteSubscriptionGroup:
		if g := ext["groupName"]; g != "" {
			needs = append(needs, auth.Need{Action: auth.Admin, Resource: auth.Group(g)})
		}
	}
	return dedupeNeeds(needs)
}

func dedupeNeeds(needs []auth.Need) []auth.Need {
	out := needs[:0]
	seen := make(map[auth.Need]bool, len(needs))
	for _, n := range needs {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// authHeartbeat is what authNeeds reads of a heartbeat body: the consumer
// groups and their subscriptions.
type authHeartbeat struct {
	ConsumerData []struct {
		GroupName     string `json:"groupName"`
		Subscriptions []struct {
			Topic string `json:"topic"`
		} `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
}
