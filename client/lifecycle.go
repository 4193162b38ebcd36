package client

import (
	"context"

	"github.com/raftmq/raftmq/api"
)

// Topic permissions (RocketMQ's PermName): a topic without PermRead cannot
// be pulled, one without PermWrite cannot be produced to.
const (
	PermWrite     uint32 = 2
	PermRead      uint32 = 4
	PermReadWrite        = PermRead | PermWrite
)

// UpdateTopic sets a topic's permission (PermRead, PermWrite or both).
func (c *Client) UpdateTopic(ctx context.Context, name string, perm uint32) (*api.TopicInfo, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.UpdateTopicResponse, error) {
		return cl.UpdateTopic(ctx, &api.UpdateTopicRequest{Name: name, Perm: &perm})
	})
	return r.GetTopic(), err
}

// DeleteTopic deletes a topic and every group's offsets of it; without
// force it is refused while consumers of the topic are connected.
func (c *Client) DeleteTopic(ctx context.Context, name string, force bool) error {
	_, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.DeleteTopicResponse, error) {
		return cl.DeleteTopic(ctx, &api.DeleteTopicRequest{Name: name, Force: force})
	})
	return err
}

// DeleteGroup deletes a consumer group's offsets (its broadcasting members'
// too) and its retry and dead-letter topics; without force it is refused
// while the group has connected members.
func (c *Client) DeleteGroup(ctx context.Context, group string, force bool) error {
	_, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.DeleteGroupResponse, error) {
		return cl.DeleteGroup(ctx, &api.DeleteGroupRequest{Group: group, Force: force})
	})
	return err
}

// FindMessages looks up to max messages of a topic up by key (one word of a
// message's key, or its UNIQ_KEY), newest first, within [beginMS, endMS] of
// their timestamps (0: open). It asks one node, which answers from its own
// index; the response names it.
func (c *Client) FindMessages(ctx context.Context, topic, key string, max uint32, beginMS, endMS int64) (*api.FindMessagesResponse, error) {
	return call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.FindMessagesResponse, error) {
		return cl.FindMessages(ctx, &api.FindMessagesRequest{Topic: topic, Key: key, MaxMessages: max, BeginMs: beginMS, EndMs: endMS})
	})
}
