package grpcapi

import (
	"context"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// UpdateTopic changes a topic's permission.
func (s *Server) UpdateTopic(ctx context.Context, req *api.UpdateTopicRequest) (*api.UpdateTopicResponse, error) {
	return call(ctx, s, func() (*api.UpdateTopicResponse, error) {
		ti, err := s.b.UpdateTopic(ctx, req.Name, req.Perm)
		if err != nil {
			return nil, err
		}
		return &api.UpdateTopicResponse{Topic: topicInfo(ti)}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.UpdateTopicResponse, error) {
		return c.UpdateTopic(ctx, req)
	})
}

// DeleteTopic deletes a topic.
func (s *Server) DeleteTopic(ctx context.Context, req *api.DeleteTopicRequest) (*api.DeleteTopicResponse, error) {
	return call(ctx, s, func() (*api.DeleteTopicResponse, error) {
		return &api.DeleteTopicResponse{}, s.b.DeleteTopic(ctx, req.Name, req.Force)
	}, func(ctx context.Context, c api.BrokerClient) (*api.DeleteTopicResponse, error) {
		return c.DeleteTopic(ctx, req)
	})
}

// DeleteGroup deletes a consumer group.
func (s *Server) DeleteGroup(ctx context.Context, req *api.DeleteGroupRequest) (*api.DeleteGroupResponse, error) {
	return call(ctx, s, func() (*api.DeleteGroupResponse, error) {
		return &api.DeleteGroupResponse{}, s.b.DeleteGroup(ctx, req.Group, req.Force)
	}, func(ctx context.Context, c api.BrokerClient) (*api.DeleteGroupResponse, error) {
		return c.DeleteGroup(ctx, req)
	})
}

// FindMessages looks a topic's messages up by key in this node's key index;
// it is answered where it arrives (every node indexes its own log).
func (s *Server) FindMessages(ctx context.Context, req *api.FindMessagesRequest) (*api.FindMessagesResponse, error) {
	msgs, err := s.b.FindMessages(broker.FindRequest{Topic: req.Topic, Key: req.Key, Max: int(req.MaxMessages), BeginMS: req.BeginMs, EndMS: req.EndMs})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &api.FindMessagesResponse{ServedBy: s.b.ID(), Messages: make([]*api.Message, len(msgs))}
	for i := range msgs {
		m := &msgs[i]
		out.Messages[i] = &api.Message{Topic: m.Topic, Queue: m.Queue, Offset: m.Offset, Id: m.ID, Key: m.Key, Tag: m.Tag,
			Properties: m.Properties, Body: m.Body, TimestampMs: m.Timestamp}
	}
	return out, nil
}
