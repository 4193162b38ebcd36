package client

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/mq"
)

// LookupMessage reads one message by id and names the node that served
// it. It asks the first configured server, which answers when it holds the
// message and passes the request to the leader when it does not; if that
// server does not answer, the call goes to the leader as any other.
func (c *Client) LookupMessage(ctx context.Context, id string) (*api.LookupMessageResponse, error) {
	req := &api.LookupMessageRequest{Id: id}
	if cl, err := c.conn(c.cfg.Servers[0]); err == nil {
		actx, cancel := context.WithTimeout(ctx, c.attemptTimeout(0, 0))
		r, err := cl.LookupMessage(actx, req)
		cancel()
		if err == nil || !Retryable(err) {
			return r, err
		}
	}
	return call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.LookupMessageResponse, error) {
		return cl.LookupMessage(ctx, req)
	})
}

// SendBack hands a consumed message back to the group: the group stores a
// copy in %RETRY%<group>, delivered again after delay level 3 + its
// reconsume count (or delayLevel when above 0), or in %DLQ%<group> once the
// count passes maxReconsume (the group's setting when 0) or when delayLevel
// is -1. A call retried after a timeout stores one copy while the group's
// dedupe window holds it, else possibly two: at least once.
func (c *Client) SendBack(ctx context.Context, group, id string, delayLevel, maxReconsume int32) (*api.SendBackResponse, error) {
	return call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.SendBackResponse, error) {
		return cl.SendBack(ctx, &api.SendBackRequest{Group: group, Id: id, DelayLevel: delayLevel, MaxReconsumeTimes: maxReconsume})
	})
}

// ResendDeadLetter produces a dead letter of group back to its original
// topic, with the retry properties cleared.
func (c *Client) ResendDeadLetter(ctx context.Context, group, id string) (*api.ResendDeadLetterResponse, error) {
	return call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.ResendDeadLetterResponse, error) {
		return cl.ResendDeadLetter(ctx, &api.ResendDeadLetterRequest{Group: group, Id: id})
	})
}

// SetMaxReconsumeTimes sets how often a group's messages are retried before
// they are dead-lettered (0..64).
func (c *Client) SetMaxReconsumeTimes(ctx context.Context, group string, n int32) (*api.GroupSettings, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.UpdateGroupResponse, error) {
		return cl.UpdateGroup(ctx, &api.UpdateGroupRequest{Group: group, MaxReconsumeTimes: &n})
	})
	return r.GetSettings(), err
}

// LockQueues takes or renews orderly-consumption locks on queues for member
// and returns the queues it holds and the lease.
func (c *Client) LockQueues(ctx context.Context, group, member string, queues []*api.QueueRef) (*api.LockQueuesResponse, error) {
	return call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.LockQueuesResponse, error) {
		return cl.LockQueues(ctx, &api.LockQueuesRequest{Group: group, MemberId: member, Queues: queues})
	})
}

// UnlockQueues releases member's orderly-consumption locks on queues.
func (c *Client) UnlockQueues(ctx context.Context, group, member string, queues []*api.QueueRef) error {
	_, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.UnlockQueuesResponse, error) {
		return cl.UnlockQueues(ctx, &api.UnlockQueuesRequest{Group: group, MemberId: member, Queues: queues})
	})
	return err
}

// ListDeadLetters reads up to max (0: all) messages of group's dead-letter
// topic %DLQ%<group>, oldest first, without committing anything. A group
// that never dead-lettered a message has none (no error).
func (c *Client) ListDeadLetters(ctx context.Context, group string, max int) ([]*api.Message, error) {
	topic := mq.DeadLetterTopic(group)
	ti, err := c.DescribeTopic(ctx, topic)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*api.Message
	for _, qi := range ti.QueueInfo {
		for off := qi.MinOffset; off < qi.MaxOffset && (max == 0 || len(out) < max); {
			req := &api.PullRequest{Topic: topic, Queue: qi.Queue, Offset: off, MaxMessages: 256}
			r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.PullResponse, error) { return cl.Pull(ctx, req) })
			if err == nil && r.Status == api.PullStatus_PULL_STATUS_RETRY_ELSEWHERE && r.GetSuggestion().GetAddress() != "" {
				// The leader no longer holds these bodies: the node it names does.
				var cl api.BrokerClient
				if cl, err = c.conn(r.GetSuggestion().GetAddress()); err == nil {
					actx, cancel := context.WithTimeout(ctx, c.attemptTimeout(0, 0))
					r, err = cl.Pull(actx, req)
					cancel()
				}
			}
			if err != nil {
				return nil, err
			}
			if r.Status != api.PullStatus_PULL_STATUS_FOUND && r.Status != api.PullStatus_PULL_STATUS_OFFSET_MOVED {
				break
			}
			if r.NextOffset <= off {
				break
			}
			for _, m := range r.Messages {
				if max == 0 || len(out) < max {
					out = append(out, m)
				}
			}
			off = r.NextOffset
		}
	}
	return out, nil
}
