package grpcapi

import (
	"context"

	"github.com/raftmq/raftmq/api"
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
