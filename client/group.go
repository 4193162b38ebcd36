package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/raftmq/raftmq/api"
)

// A client pins the id of the group it first reaches (a Status answer's
// group_id) and names it in every call (api.GroupIDKey). A node of another
// group at one of its addresses (a container restarted with another
// group's node, a port reused) then refuses the call before acting on it
// (FailedPrecondition with api.ReasonOtherGroup): nothing is stored there,
// and the call goes on with the group's other nodes.

// GroupID is the id of the group this client talks to ("" until a node
// that knows it answered).
func (c *Client) GroupID() string {
	if p := c.group.Load(); p != nil {
		return *p
	}
	return ""
}

// ofGroup reports whether the Status answer st comes from this client's
// group, pinning st's group when none is pinned yet. An answer without a
// group id (a group not named yet, or an older node) counts as this
// client's until one is pinned.
func (c *Client) ofGroup(st *api.StatusResponse) bool {
	if st.GroupId == "" {
		return c.GroupID() == ""
	}
	id := st.GroupId
	if c.group.CompareAndSwap(nil, &id) {
		return true
	}
	return c.GroupID() == id
}

// groupOptions add the pinned group id to every call of a connection.
func (c *Client) groupOptions() []grpc.DialOption {
	with := func(ctx context.Context) context.Context {
		if id := c.GroupID(); id != "" {
			return metadata.AppendToOutgoingContext(ctx, api.GroupIDKey, id)
		}
		return ctx
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(with(ctx), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(with(ctx), desc, cc, method, opts...)
		}),
	}
}

// otherGroup reports whether err is a node's refusal of a call meant for
// another group (api.ReasonOtherGroup): nothing of the call was done.
func otherGroup(err error) bool {
	return hasReason(err, codes.FailedPrecondition, api.ReasonOtherGroup)
}
