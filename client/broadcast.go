package client

import (
	"context"

	"github.com/raftmq/raftmq/api"
)

// CommitMemberOffsets stores a broadcasting member's own offsets.
func (c *Client) CommitMemberOffsets(ctx context.Context, group, member string, offsets []*api.QueueOffset) error {
	_, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.CommitOffsetsResponse, error) {
		return cl.CommitOffsets(ctx, &api.CommitOffsetsRequest{Group: group, MemberId: member, Offsets: offsets})
	})
	return err
}

// FetchMemberOffsets returns a broadcasting member's own committed offsets
// for a topic.
func (c *Client) FetchMemberOffsets(ctx context.Context, group, member, topic string) (map[int32]uint64, error) {
	r, err := call(ctx, c, func(ctx context.Context, cl api.BrokerClient) (*api.FetchOffsetsResponse, error) {
		return cl.FetchOffsets(ctx, &api.FetchOffsetsRequest{Group: group, MemberId: member, Topic: topic})
	})
	out := map[int32]uint64{}
	for _, o := range r.GetOffsets() {
		out[o.Queue] = o.Offset
	}
	return out, err
}

// commitOffsets commits for the group, or for this member of a
// broadcasting group.
func (cn *Consumer) commitOffsets(ctx context.Context, offs []*api.QueueOffset) error {
	if cn.cfg.Group == "" {
		return nil // a reader keeps its positions to itself
	}
	if cn.cfg.Broadcast {
		return cn.c.CommitMemberOffsets(ctx, cn.cfg.Group, cn.cfg.MemberID, offs)
	}
	return cn.c.CommitOffsets(ctx, cn.cfg.Group, offs)
}

func (cn *Consumer) fetchOffsets(ctx context.Context) (map[int32]uint64, error) {
	if cn.cfg.Group == "" {
		return nil, nil
	}
	if cn.cfg.Broadcast {
		return cn.c.FetchMemberOffsets(ctx, cn.cfg.Group, cn.cfg.MemberID, cn.cfg.Topic)
	}
	return cn.c.FetchOffsets(ctx, cn.cfg.Group, cn.cfg.Topic)
}
