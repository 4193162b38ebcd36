package grpcapi

import (
	"context"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// The calls of consume-retry, dead letters, lookup by id, group settings and
// orderly locks (broker/retry.go, lookup.go, locks.go).

func apiMessage(m *broker.Message) *api.Message {
	return &api.Message{Topic: m.Topic, Queue: m.Queue, Offset: m.Offset, Id: m.ID, Key: m.Key, Tag: m.Tag,
		Properties: m.Properties, Body: m.Body, TimestampMs: m.Timestamp}
}

// LookupMessage reads one message by id.
func (s *Server) LookupMessage(ctx context.Context, req *api.LookupMessageRequest) (*api.LookupMessageResponse, error) {
	return call(ctx, s, func() (*api.LookupMessageResponse, error) {
		r, err := s.b.LookupMessage(ctx, req.Id)
		if err != nil {
			return nil, err
		}
		return &api.LookupMessageResponse{Message: apiMessage(&r.Message), ServedBy: r.ServedBy, Pending: r.Pending, DeliverAtMs: r.DeliverAt}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.LookupMessageResponse, error) {
		return c.LookupMessage(ctx, req)
	})
}

// SendBack stores a consumed message again in the group's retry topic (or
// its dead-letter topic).
func (s *Server) SendBack(ctx context.Context, req *api.SendBackRequest) (*api.SendBackResponse, error) {
	return call(ctx, s, func() (*api.SendBackResponse, error) {
		r, err := s.b.SendBack(ctx, broker.SendBackRequest{Group: req.Group, ID: req.Id, DelayLevel: req.DelayLevel, MaxReconsumeTimes: req.MaxReconsumeTimes})
		if err != nil {
			return nil, err
		}
		return &api.SendBackResponse{Id: r.ID, Topic: r.Topic, DeadLettered: r.DeadLettered, ReconsumeTimes: r.ReconsumeTimes, DeliverAtMs: r.DeliverAt}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.SendBackResponse, error) {
		return c.SendBack(ctx, req)
	})
}

// ResendDeadLetter sends a dead letter back to its original topic.
func (s *Server) ResendDeadLetter(ctx context.Context, req *api.ResendDeadLetterRequest) (*api.ResendDeadLetterResponse, error) {
	return call(ctx, s, func() (*api.ResendDeadLetterResponse, error) {
		r, err := s.b.ResendDeadLetter(ctx, req.Group, req.Id)
		if err != nil {
			return nil, err
		}
		return &api.ResendDeadLetterResponse{Topic: r.Topic, Ack: &api.Ack{Queue: int32(r.Ack.Queue), Offset: r.Ack.Offset, Id: r.Ack.ID()}}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.ResendDeadLetterResponse, error) {
		return c.ResendDeadLetter(ctx, req)
	})
}

func groupSettings(g broker.GroupSettings) *api.GroupSettings {
	return &api.GroupSettings{MaxReconsumeTimes: g.MaxReconsumeTimes}
}

// UpdateGroup changes a group's settings.
func (s *Server) UpdateGroup(ctx context.Context, req *api.UpdateGroupRequest) (*api.UpdateGroupResponse, error) {
	return call(ctx, s, func() (*api.UpdateGroupResponse, error) {
		g, err := s.b.UpdateGroup(ctx, req.Group, req.MaxReconsumeTimes)
		if err != nil {
			return nil, err
		}
		return &api.UpdateGroupResponse{Settings: groupSettings(g)}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.UpdateGroupResponse, error) {
		return c.UpdateGroup(ctx, req)
	})
}

func queueRefs(qs []*api.QueueRef) []broker.QueueRef {
	out := make([]broker.QueueRef, 0, len(qs))
	for _, q := range qs {
		if q != nil {
			out = append(out, broker.QueueRef{Topic: q.Topic, Queue: q.Queue})
		}
	}
	return out
}

// LockQueues takes or renews orderly-consumption locks.
func (s *Server) LockQueues(ctx context.Context, req *api.LockQueuesRequest) (*api.LockQueuesResponse, error) {
	return call(ctx, s, func() (*api.LockQueuesResponse, error) {
		locked, lease, err := s.b.LockQueues(ctx, req.Group, req.MemberId, queueRefs(req.Queues))
		if err != nil {
			return nil, err
		}
		out := &api.LockQueuesResponse{LeaseMs: uint32(lease.Milliseconds())}
		for _, q := range locked {
			out.Locked = append(out.Locked, &api.QueueRef{Topic: q.Topic, Queue: q.Queue})
		}
		return out, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.LockQueuesResponse, error) {
		return c.LockQueues(ctx, req)
	})
}

// UnlockQueues releases orderly-consumption locks.
func (s *Server) UnlockQueues(ctx context.Context, req *api.UnlockQueuesRequest) (*api.UnlockQueuesResponse, error) {
	return call(ctx, s, func() (*api.UnlockQueuesResponse, error) {
		return &api.UnlockQueuesResponse{}, s.b.UnlockQueues(ctx, req.Group, req.MemberId, queueRefs(req.Queues))
	}, func(ctx context.Context, c api.BrokerClient) (*api.UnlockQueuesResponse, error) {
		return c.UnlockQueues(ctx, req)
	})
}
