package remoting

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/route"
	rmq "github.com/raftmq/raftmq/remoting"
)

// Pull sysFlag bits (RocketMQ's PullSysFlag).
const (
	pullCommitOffset = 1 << 0
	pullSuspend      = 1 << 1
)

// A follower a consumer was sent to waits up to notAppliedTries ×
// notAppliedPause for the consumer's offset to be applied here before it
// sends the consumer back (ReadsOnFollowers).
const (
	notAppliedTries = 10
	notAppliedPause = 10 * time.Millisecond
)

// retryPause spaces a PULL_RETRY_IMMEDIATELY answer for a node that cannot
// serve at all right now (no leader, a new leader applying): the client
// pulls again at once, and without it would spin.
const retryPause = 100 * time.Millisecond

func (a *Adapter) pull(ctx context.Context, req *rmq.Command) *rmq.Command {
	group, topic := req.Ext["consumerGroup"], req.Ext["topic"]
	var vals [6]int64
	for i, f := range []struct {
		name string
		def  int64
	}{{"queueId", -1}, {"queueOffset", 0}, {"maxMsgNums", 32}, {"sysFlag", 0}, {"commitOffset", -1}, {"suspendTimeoutMillis", 0}} {
		v, err := req.ExtInt(f.name, f.def)
		if err != nil {
			return rmq.Response(req, rmq.SystemError, "pull: "+err.Error())
		}
		vals[i] = v
	}
	queue, offset, maxMsgs, sysFlag, commit, suspend := vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	if queue < 0 || queue > 1<<20 || offset < 0 {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("pull: queueId %d, queueOffset %d", queue, offset))
	}
	if sysFlag&pullCommitOffset != 0 && commit >= 0 && group != "" {
		a.commits.lazy(group, topic, int32(queue), uint64(commit))
	}
	var wait time.Duration
	if sysFlag&pullSuspend != 0 && suspend > 0 {
		wait = min(time.Duration(suspend)*time.Millisecond, a.cfg.MaxPullWait)
	}
	// The subscription is filtered on this node (tags or SQL92); the
	// client re-checks tags itself, as it does with RocketMQ's broker.
	ftype, fexpr := req.Ext["expressionType"], req.Ext["subscription"]
	if ftype == "" {
		ftype = "TAG"
	}
	if fexpr == "" {
		fexpr = "*"
	}
	preq := broker.PullRequest{Topic: topic, Queue: int32(queue), Offset: uint64(offset),
		MaxMessages: int(min(max(maxMsgs, 1), 1024)), Wait: wait, FilterType: ftype, Filter: fexpr, ReadsOnFollowers: a.cfg.ReadsOnFollowers}
	res, err := a.b.Pull(ctx, preq)
	if a.cfg.ReadsOnFollowers && wait > 0 {
		// The leader sends a consumer to a follower, which may not have
		// applied the consumer's offset yet (at the tail): rather than send
		// it straight back, wait moments for it here.
		for i := 0; i < notAppliedTries && err == nil && res.Status == broker.PullRetryElsewhere && res.Suggestion.Reason == route.ReasonNotApplied; i++ {
			select {
			case <-time.After(notAppliedPause):
			case <-ctx.Done():
			}
			res, err = a.b.Pull(ctx, preq)
		}
	}
	v := a.reg.current()
	if err != nil {
		return a.pullError(ctx, req, err, topic, int32(queue), uint64(offset), v)
	}
	resp := rmq.Response(req, rmq.Success, "")
	resp.Ext["nextBeginOffset"] = strconv.FormatUint(res.NextOffset, 10)
	resp.Ext["minOffset"] = strconv.FormatUint(res.MinOffset, 10)
	resp.Ext["maxOffset"] = strconv.FormatUint(res.MaxOffset, 10)
	if node := res.Suggestion.NodeID; node != "" {
		if v.oldLeader(node) {
			// The previous leader, which a new leader's view may still
			// count as healthy for a while after it died: a client whose
			// pulls fail on it keeps trying it until its route poll. This
			// node serves instead.
			node = v.self
		}
		resp.Ext["suggestWhichBrokerId"] = strconv.FormatInt(v.suggestID(node), 10)
	} else {
		resp.Ext["suggestWhichBrokerId"] = strconv.FormatInt(v.retryID(), 10)
	}
	switch res.Status {
	case broker.PullFound:
		if len(res.Messages) == 0 {
			// Every message in the window failed the subscription's
			// filter: RocketMQ's NO_MATCHED_MESSAGE, answered at once with
			// the next offset past them (the client pulls again from
			// there without a pause).
			resp.Code = rmq.PullRetryImmediately
			break
		}
		body, err := a.encodeMessages(res.Messages)
		if err != nil {
			return rmq.Response(req, rmq.SystemError, "pull: "+err.Error())
		}
		resp.Body = body
	case broker.PullNoNew:
		resp.Code = rmq.PullNotFound
	case broker.PullRetryElsewhere:
		// This node lacks the offset (a follower behind, a body it does
		// not hold): pull again where the suggestion says, never
		// OFFSET_MOVED (trap 4).
		resp.Code = rmq.PullRetryImmediately
		resp.Ext["nextBeginOffset"] = strconv.FormatInt(offset, 10)
	case broker.PullOffsetMoved:
		if !res.ServedByLeader {
			resp.Code = rmq.PullRetryImmediately
			resp.Ext["nextBeginOffset"] = strconv.FormatInt(offset, 10)
			resp.Ext["suggestWhichBrokerId"] = strconv.FormatInt(v.retryID(), 10)
		} else {
			resp.Code = rmq.PullOffsetMoved
		}
	}
	return resp
}

// pullError answers a pull the broker refused. Only the leader ever says
// an offset is out of range; anything a wait may cure is "retry
// immediately, from the leader".
func (a *Adapter) pullError(ctx context.Context, req *rmq.Command, err error, topic string, queue int32, offset uint64, v *view) *rmq.Command {
	retry := func() *rmq.Command {
		select {
		case <-time.After(retryPause):
		case <-ctx.Done():
		}
		resp := rmq.Response(req, rmq.PullRetryImmediately, err.Error())
		resp.Ext["nextBeginOffset"] = strconv.FormatUint(offset, 10)
		resp.Ext["suggestWhichBrokerId"] = strconv.FormatInt(v.retryID(), 10)
		resp.Ext["minOffset"], resp.Ext["maxOffset"] = "0", "0"
		return resp
	}
	switch {
	case errors.Is(err, broker.ErrOutOfRange):
		if !v.isLeader() {
			return retry()
		}
		ti, terr := a.b.Topic(topic)
		if terr != nil || int(queue) >= len(ti.Queues) {
			return retry()
		}
		q := ti.Queues[queue]
		resp := rmq.Response(req, rmq.PullOffsetMoved, err.Error())
		resp.Ext["nextBeginOffset"] = strconv.FormatUint(q.Max, 10)
		resp.Ext["minOffset"], resp.Ext["maxOffset"] = strconv.FormatUint(q.Min, 10), strconv.FormatUint(q.Max, 10)
		resp.Ext["suggestWhichBrokerId"] = "0"
		return resp
	case errors.Is(err, broker.ErrNotFound):
		if !v.isLeader() {
			return retry() // a follower may not have applied the topic yet
		}
		return rmq.Response(req, rmq.TopicNotExist, err.Error())
	case errors.Is(err, broker.ErrInvalidArgument), errors.Is(err, broker.ErrFailedPrecondition):
		// A bad subscription expression, a topic without read permission.
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	return retry()
}

// propCluster is the property RocketMQ's broker sets on every message it
// stores: the name of its cluster.
const propCluster = "CLUSTER"

// encodeMessages is the pull body: the v1 layout of each message. Its
// physical offset is the raft index and ordinal (physicalOffset); the
// store host this node; a message without a CLUSTER property gets this
// node's cluster.
func (a *Adapter) encodeMessages(msgs []broker.Message) ([]byte, error) {
	var body []byte
	for i := range msgs {
		m := &msgs[i]
		props := make(map[string]string, len(m.Properties)+3)
		var flag, reconsume int64
		for k, v := range m.Properties {
			switch k {
			case propFlag:
				flag, _ = strconv.ParseInt(v, 10, 32)
			default:
				props[k] = v
			}
		}
		if m.Key != "" {
			props[propKeys] = m.Key
		}
		if m.Tag != "" {
			props[propTags] = m.Tag
		}
		if _, ok := props[propCluster]; !ok {
			// RocketMQ's broker stores its cluster's name in every
			// message; the Go client's request-reply path reads it.
			props[propCluster] = a.cfg.Cluster
		}
		if v, ok := props[propReconsume]; ok {
			reconsume, _ = strconv.ParseInt(v, 10, 32)
		}
		var err error
		body, err = rmq.AppendMessageExt(body, &rmq.MessageExt{
			Topic: m.Topic, QueueID: m.Queue, Flag: int32(flag), QueueOffset: int64(m.Offset), PhysicalOffset: physicalOffset(m.ID),
			BornTimestamp: m.Timestamp, BornHost: a.store, StoreTimestamp: m.Timestamp, StoreHost: a.store,
			ReconsumeTimes: int32(reconsume), Body: m.Body, Properties: props,
		})
		if err != nil {
			return nil, fmt.Errorf("message %s/%d@%d: %w", m.Topic, m.Queue, m.Offset, err)
		}
	}
	return body, nil
}
