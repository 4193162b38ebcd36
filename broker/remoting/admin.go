package remoting

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/namesrv"
	rmq "github.com/raftmq/raftmq/remoting"
)

// createTopic answers UPDATE_AND_CREATE_TOPIC (RocketMQ's admin tools;
// CreateTopicRequestHeader: topic, readQueueNums, writeQueueNums, perm,
// ...): it creates the topic with writeQueueNums queues. For a topic this
// group holds, the same count is fine, a larger one grows the topic onto
// other groups of the cluster (growTopic), and a smaller one is refused:
// raftmq does not change a topic's queue count within a group.
func (a *Adapter) createTopic(ctx context.Context, req *rmq.Command) *rmq.Command {
	topic := req.Ext["topic"]
	n, err := req.ExtInt("writeQueueNums", 0)
	if err == nil && n <= 0 {
		n, err = req.ExtInt("readQueueNums", int64(a.b.Config().DefaultQueues))
	}
	if err != nil || n <= 0 || n > 1<<16 {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("create topic %s: queue count %q", topic, req.Ext["writeQueueNums"]))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if ti, err := a.b.Topic(topic); err == nil && len(ti.Queues) != int(n) {
		if int(n) < len(ti.Queues) {
			return rmq.Response(req, rmq.SystemError, fmt.Sprintf("update topic %s: %d queues asked, it has %d in broker group %s: raftmq does not remove a topic's queues",
				topic, n, len(ti.Queues), a.b.Config().Group))
		}
		return a.growTopic(ctx, req, topic, int(n)-len(ti.Queues))
	}
	if err := a.createTopicOnLeader(ctx, topic, int32(n)); err != nil {
		code := codeOf(err)
		if errors.Is(err, broker.ErrAlreadyExists) || code == rmq.MessageIllegal {
			code = rmq.SystemError
		}
		return rmq.Response(req, code, fmt.Sprintf("create topic %s: %v", topic, err))
	}
	a.reg.kickNow()
	a.awaitRouted(ctx, topic)
	return rmq.Response(req, rmq.Success, "")
}

// routedWait bounds how long a topic creation waits for the name servers to
// route the new topic before it is answered.
const routedWait = 3 * time.Second

// awaitRouted waits until every name server this node registers with
// routes topic (the leader registers a new topic at once), so that a
// client's route lookup right after the create finds it, as with
// RocketMQ's broker, which registers within the create request. A name
// server that does not answer within routedWait is not waited for longer:
// the topic exists, and the registrar keeps trying.
func (a *Adapter) awaitRouted(ctx context.Context, topic string) {
	ctx, cancel := context.WithTimeout(ctx, routedWait)
	defer cancel()
	for _, ns := range a.cfg.NameServers {
		for {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			resp, err := a.reg.cl.Invoke(rctx, ns, a.reg.sign(rmq.NewRequest(rmq.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)))
			rcancel()
			if err == nil && resp.Code == rmq.Success {
				break
			}
			select {
			case <-ctx.Done():
				a.log.Warn("created topic not routed by a name server yet", "topic", topic, "namesrv", ns)
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// route answers GET_ROUTEINFO_BY_TOPIC sent to a broker by asking the name
// servers this node registers with.
func (a *Adapter) route(ctx context.Context, req *rmq.Command) *rmq.Command {
	var last *rmq.Command
	for _, ns := range a.cfg.NameServers {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := a.reg.cl.Invoke(ctx, ns, a.reg.sign(rmq.NewRequest(rmq.GetRouteInfoByTopic, map[string]string{"topic": req.Ext["topic"]}, nil)))
		cancel()
		if err != nil {
			continue
		}
		out := rmq.Response(req, resp.Code, resp.Remark)
		out.Body = resp.Body
		if resp.Code == rmq.Success {
			return out
		}
		last = out
	}
	if last != nil {
		return last
	}
	return rmq.Response(req, rmq.TopicNotExist, "no name server answered for topic "+req.Ext["topic"])
}

// queryMessage answers QUERY_MESSAGE (query by key: mqadmin
// queryMsgByKey, the clients' QueryMessage) from this node's key index:
// the messages of the topic whose key has the word, newest first, in the
// pull body's layout.
func (a *Adapter) queryMessage(req *rmq.Command) *rmq.Command {
	limit, err := req.ExtInt("maxNum", 32)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, "query message: "+err.Error())
	}
	begin, err1 := req.ExtInt("beginTimestamp", 0)
	end, err2 := req.ExtInt("endTimestamp", 0)
	if err1 != nil || err2 != nil {
		return rmq.Response(req, rmq.SystemError, "query message: bad timestamps")
	}
	msgs, err := a.b.FindMessages(broker.FindRequest{Topic: req.Ext["topic"], Key: req.Ext["key"], Max: int(min(max(limit, 1), 1024)), BeginMS: begin, EndMS: end})
	if err != nil {
		return errResponse(req, err)
	}
	if len(msgs) == 0 {
		return rmq.Response(req, rmq.QueryNotFound, fmt.Sprintf("no message of topic %s with key %s", req.Ext["topic"], req.Ext["key"]))
	}
	body, err := a.encodeMessages(msgs)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, "query message: "+err.Error())
	}
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body = body
	resp.Ext["indexLastUpdateTimestamp"] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	resp.Ext["indexLastUpdatePhyoffset"] = "0"
	return resp
}

// ClusterInfo is the cluster as the first name server that answers lists
// it, asked with the node credential when this node has one.
func (a *Adapter) ClusterInfo(ctx context.Context) (*namesrv.ClusterInfo, error) {
	var errs []error
	for _, ns := range a.cfg.NameServers {
		ci, err := namesrv.FetchClusterInfo(ctx, a.reg.cl, ns, func(c *rmq.Command) { a.reg.sign(c) })
		if err == nil {
			return ci, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ns, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("no name server configured")
	}
	return nil, fmt.Errorf("no name server answered: %w", errors.Join(errs...))
}

// growTopic adds queues to topic, which this group holds, as `raftmq topic
// update --add-queues` does: raftmq does not change a topic's queue count
// within a group, so the queues are created on groups of this node's
// cluster that do not hold the topic (as the name servers' cluster info
// lists them), spread evenly, each through its leader with
// UPDATE_AND_CREATE_TOPIC. Refused by name when no such group is
// registered.
func (a *Adapter) growTopic(ctx context.Context, req *rmq.Command, topic string, add int) *rmq.Command {
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("update topic %s: to add %d queues, the cluster's groups are needed: %v", topic, add, err))
	}
	var targets []string
	for name, g := range ci.RaftmqGroups {
		if _, has := g.Topics[topic]; has || g.Cluster != a.cfg.Cluster || ci.BrokerAddrTable[name].BrokerAddrs[0] == "" {
			continue
		}
		targets = append(targets, name)
	}
	sort.Strings(targets)
	if len(targets) == 0 {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("update topic %s: %d more queues asked, but every broker group of cluster %s holds the topic already, "+
			"and raftmq does not change a topic's queue count within a group; add a broker group to grow it", topic, add, a.cfg.Cluster))
	}
	targets = targets[:min(len(targets), add)]
	for i, name := range targets {
		share := add / len(targets)
		if i < add%len(targets) {
			share++
		}
		ext := map[string]string{"topic": topic, "readQueueNums": strconv.Itoa(share), "writeQueueNums": strconv.Itoa(share), "perm": "6"}
		resp, err := a.reg.cl.Invoke(ctx, ci.BrokerAddrTable[name].BrokerAddrs[0], a.reg.sign(rmq.NewRequest(rmq.UpdateAndCreateTopic, ext, nil)))
		if err == nil && resp.Code != rmq.Success {
			err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
		}
		if err != nil {
			return rmq.Response(req, rmq.SystemError, fmt.Sprintf("update topic %s: create %d queues on broker group %s: %v", topic, share, name, err))
		}
	}
	return rmq.Response(req, rmq.Success, "")
}

// deleteTopic answers DELETE_TOPIC_IN_BROKER (DeleteTopicRequestHeader:
// topic) with broker.DeleteTopic on the leader; the registrar then
// registers the group without it. A topic the group does not hold is
// answered SUCCESS, as RocketMQ's AdminBrokerProcessor answers it; one
// whose consumer groups have connected members is refused, as raftmq's own
// delete refuses it without --force.
func (a *Adapter) deleteTopic(ctx context.Context, req *rmq.Command) *rmq.Command {
	topic := req.Ext["topic"]
	if topic == "" {
		return rmq.Response(req, rmq.SystemError, "delete topic: field topic: empty")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := a.onLeader(ctx, func(ctx context.Context) error {
		return a.b.DeleteTopic(ctx, topic, false)
	}, func(ctx context.Context, addr string) error {
		cc, err := a.peers.Conn(addr)
		if err != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		_, err = api.NewBrokerClient(cc).DeleteTopic(ctx, &api.DeleteTopicRequest{Name: topic})
		return err
	})
	if err != nil && !isNotFound(err) {
		return callErrResponse(req, fmt.Errorf("delete topic %s: %w", topic, err))
	}
	a.reg.kickNow()
	return rmq.Response(req, rmq.Success, "")
}
