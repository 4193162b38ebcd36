package remoting

import (
	"context"
	"errors"
	"fmt"
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
	return rmq.Response(req, rmq.Success, "")
}

// route answers GET_ROUTEINFO_BY_TOPIC sent to a broker by asking the name
// servers this node registers with.
func (a *Adapter) route(ctx context.Context, req *rmq.Command) *rmq.Command {
	var last *rmq.Command
	for _, ns := range a.cfg.NameServers {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := a.reg.cl.Invoke(ctx, ns, rmq.NewRequest(rmq.GetRouteInfoByTopic, map[string]string{"topic": req.Ext["topic"]}, nil))
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
