package remoting

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/mq"
	rmq "github.com/raftmq/raftmq/remoting"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Consumer group administration as RocketMQ's admin tools send it
// (mqadmin updateSubGroup / deleteSubGroup, the dashboard's consumer page,
// the Go client's admin.GetAllSubscriptionGroup). RocketMQ keeps a
// subscription group's config on each broker; raftmq keeps a group's
// settings in its Raft log (broker.GroupSettings), so these map onto them.

// subscriptionGroupConfig mirrors RocketMQ's SubscriptionGroupConfig
// (remoting/.../protocol/subscription/SubscriptionGroupConfig.java), the
// fields its tools read and write. Pointers: a field the request leaves out
// keeps raftmq's setting.
type subscriptionGroupConfig struct {
	GroupName                      string `json:"groupName"`
	ConsumeEnable                  *bool  `json:"consumeEnable,omitempty"`
	ConsumeFromMinEnable           bool   `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         *bool  `json:"consumeBroadcastEnable,omitempty"`
	ConsumeMessageOrderly          bool   `json:"consumeMessageOrderly"`
	RetryQueueNums                 int32  `json:"retryQueueNums"`
	RetryMaxTimes                  *int32 `json:"retryMaxTimes,omitempty"`
	BrokerID                       int64  `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   int64  `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable bool   `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int32  `json:"groupSysFlag"`
	ConsumeTimeoutMinute           int32  `json:"consumeTimeoutMinute"`
}

// dataVersion mirrors RocketMQ's DataVersion (remoting/.../protocol/DataVersion.java).
type dataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"`
	Counter      int64 `json:"counter"`
}

// subscriptionGroupWrapper mirrors RocketMQ's SubscriptionGroupWrapper
// (remoting/.../protocol/body/SubscriptionGroupWrapper.java), the body of
// GET_ALL_SUBSCRIPTIONGROUP_CONFIG.
type subscriptionGroupWrapper struct {
	SubscriptionGroupTable map[string]subscriptionGroupConfig `json:"subscriptionGroupTable"`
	// ForbiddenTable (RocketMQ 5: group -> topic -> forbidden bits) is
	// empty: raftmq forbids through its grants.
	ForbiddenTable map[string]map[string]int `json:"forbiddenTable"`
	DataVersion    dataVersion               `json:"dataVersion"`
}

func boolPtr(b bool) *bool { return &b }

// groupConfig is a group's settings as RocketMQ's SubscriptionGroupConfig.
func (a *Adapter) groupConfig(group string) subscriptionGroupConfig {
	retry := a.b.GroupSettings(group).MaxReconsumeTimes
	return subscriptionGroupConfig{GroupName: group, ConsumeEnable: boolPtr(true), ConsumeFromMinEnable: true, ConsumeBroadcastEnable: boolPtr(true),
		RetryQueueNums: 1, RetryMaxTimes: &retry, WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true, ConsumeTimeoutMinute: 15}
}

// allGroups answers GET_ALL_SUBSCRIPTIONGROUP_CONFIG (no header; body
// SubscriptionGroupWrapper): the groups the leader knows (broker.ListGroups:
// committed offsets, settings, live members), with their settings.
func (a *Adapter) allGroups(ctx context.Context, req *rmq.Command) *rmq.Command {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var names []string
	err := a.onLeader(ctx, func(ctx context.Context) error {
		var err error
		names, err = a.b.ListGroups(ctx)
		return err
	}, func(ctx context.Context, addr string) error {
		cc, err := a.peers.Conn(addr)
		if err != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		resp, err := api.NewBrokerClient(cc).ListGroups(ctx, &api.ListGroupsRequest{})
		if err == nil {
			names = resp.GetGroups()
		}
		return err
	})
	if err != nil {
		return callErrResponse(req, fmt.Errorf("list consumer groups: %w", err))
	}
	w := subscriptionGroupWrapper{SubscriptionGroupTable: map[string]subscriptionGroupConfig{}, ForbiddenTable: map[string]map[string]int{}, DataVersion: dataVersion{Timestamp: time.Now().UnixMilli()}}
	sort.Strings(names)
	for _, g := range names {
		w.SubscriptionGroupTable[g] = a.groupConfig(g)
	}
	return jsonResponse(req, w)
}

// jsonResponse answers req with v as its JSON body (RocketMQ's
// RemotingSerializable: compact).
func jsonResponse(req *rmq.Command, v any) *rmq.Command {
	body, err := json.Marshal(v)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body = body
	return resp
}

// decodeGroupConfig reads UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's body and
// checks what raftmq can honour: a group name, a retry count in range,
// consumption and broadcasting enabled (raftmq neither pauses a group nor
// restricts its message model; its clients choose the model).
func decodeGroupConfig(body []byte) (subscriptionGroupConfig, error) {
	var c subscriptionGroupConfig
	if len(body) == 0 {
		return c, errors.New("no body: want a SubscriptionGroupConfig")
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, fmt.Errorf("body is not a SubscriptionGroupConfig: %w", err)
	}
	if c.GroupName == "" {
		return c, errors.New("groupName: empty")
	}
	if c.RetryMaxTimes != nil && (*c.RetryMaxTimes < 0 || *c.RetryMaxTimes > mq.MaxMaxReconsumeTimes) {
		return c, fmt.Errorf("retryMaxTimes %d: want 0..%d", *c.RetryMaxTimes, mq.MaxMaxReconsumeTimes)
	}
	if c.ConsumeEnable != nil && !*c.ConsumeEnable {
		return c, errors.New("consumeEnable false: raftmq does not pause a consumer group's consumption; stop its consumers instead")
	}
	if c.ConsumeBroadcastEnable != nil && !*c.ConsumeBroadcastEnable {
		return c, errors.New("consumeBroadcastEnable false: raftmq does not restrict a group's message model; its consumers choose it")
	}
	return c, nil
}

// updateGroup answers UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (body
// SubscriptionGroupConfig): retryMaxTimes becomes the group's max
// reconsume times (broker.UpdateGroup, on the leader). The fields raftmq
// has no setting for (retryQueueNums, brokerId, ...) are ignored; the ones
// it cannot honour are refused by name (decodeGroupConfig).
func (a *Adapter) updateGroup(ctx context.Context, req *rmq.Command) *rmq.Command {
	c, err := decodeGroupConfig(req.Body)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, "update subscription group: "+err.Error())
	}
	retry := c.RetryMaxTimes
	if retry == nil {
		r := int32(mq.DefaultMaxReconsume) // SubscriptionGroupConfig.retryMaxTimes defaults to 16 too
		retry = &r
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = a.onLeader(ctx, func(ctx context.Context) error {
		_, err := a.b.UpdateGroup(ctx, c.GroupName, retry)
		return err
	}, func(ctx context.Context, addr string) error {
		cc, err := a.peers.Conn(addr)
		if err != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		_, err = api.NewBrokerClient(cc).UpdateGroup(ctx, &api.UpdateGroupRequest{Group: c.GroupName, MaxReconsumeTimes: retry})
		return err
	})
	if err != nil {
		return callErrResponse(req, fmt.Errorf("update subscription group %s: %w", c.GroupName, err))
	}
	return rmq.Response(req, rmq.Success, "")
}

// deleteGroup answers DELETE_SUBSCRIPTIONGROUP (DeleteSubscriptionGroupRequestHeader:
// groupName, cleanOffset): broker.DeleteGroup on the leader drops the
// group's offsets, settings, retry and dead-letter topics (raftmq keeps no
// group config apart from its offsets, so cleanOffset changes nothing).
// Refused while the group has connected members; a group raftmq does not
// know is answered SUCCESS, as RocketMQ answers it.
func (a *Adapter) deleteGroup(ctx context.Context, req *rmq.Command) *rmq.Command {
	group := req.Ext["groupName"]
	if group == "" {
		return rmq.Response(req, rmq.SystemError, "delete subscription group: field groupName: empty")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := a.onLeader(ctx, func(ctx context.Context) error {
		return a.b.DeleteGroup(ctx, group, false)
	}, func(ctx context.Context, addr string) error {
		cc, err := a.peers.Conn(addr)
		if err != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, err)
		}
		_, err = api.NewBrokerClient(cc).DeleteGroup(ctx, &api.DeleteGroupRequest{Group: group})
		return err
	})
	if err != nil && !isNotFound(err) {
		return callErrResponse(req, fmt.Errorf("delete subscription group %s: %w", group, err))
	}
	return rmq.Response(req, rmq.Success, "")
}

// isNotFound reports a broker's not-found answer, here or forwarded.
func isNotFound(err error) bool {
	return errors.Is(err, broker.ErrNotFound) || status.Code(err) == codes.NotFound
}
