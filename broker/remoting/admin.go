package remoting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/broker"
	rmq "github.com/raftmq/raftmq/remoting"
)

// createTopic answers UPDATE_AND_CREATE_TOPIC (RocketMQ's admin tools):
// it creates the topic with writeQueueNums queues; an existing topic with
// that count is fine, another count is refused (raftmq does not change a
// topic's queue count).
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
