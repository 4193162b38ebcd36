package grpcapi

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The Reply service carries a RocketMQ reply message (request-reply) from
// the node the replier sent it to, which does not hold the requester's
// connection, to the other nodes of the group: each pushes it to the
// requester if it holds its connection. It is node-to-node, like Txn, and
// its request is a JSON document in a BytesValue, so it needs no
// generated code.
const (
	replyServiceName = "raftmq.v1.Reply"
	// ReplyPushMethod is the full name of the push call.
	ReplyPushMethod = "/" + replyServiceName + "/Push"
)

// ReplyPushCall is a reply to push to the client named Client: the
// PUSH_REPLY_MESSAGE_TO_CLIENT header and body as the receiving node built
// them.
type ReplyPushCall struct {
	Client string            `json:"client"`
	Header map[string]string `json:"header"`
	Body   []byte            `json:"body,omitempty"`
}

// ReplyPusher pushes a reply to a client connected to this node; it
// reports false when no connection of that client is here. The remoting
// adapter implements it.
type ReplyPusher interface {
	PushReplyHere(ctx context.Context, c ReplyPushCall) (bool, error)
}

// ReplyRelay is the Reply service's handle on this node's pusher, which
// starts after the gRPC server (the remoting adapter); until Set the node
// holds no connections and answers false.
type ReplyRelay struct {
	p atomic.Pointer[ReplyPusher]
}

// Set makes p the pusher of the node's Reply service.
func (r *ReplyRelay) Set(p ReplyPusher) { r.p.Store(&p) }

func (r *ReplyRelay) push(ctx context.Context, c ReplyPushCall) (bool, error) {
	p := r.p.Load()
	if p == nil {
		return false, nil
	}
	return (*p).PushReplyHere(ctx, c)
}

type replyServer interface {
	push(ctx context.Context, c ReplyPushCall) (bool, error)
}

var replyServiceDesc = grpc.ServiceDesc{
	ServiceName: replyServiceName,
	HandlerType: (*replyServer)(nil),
	Methods: []grpc.MethodDesc{jsonMethod("Push", ReplyPushMethod, "push reply", func(srv any, ctx context.Context, c ReplyPushCall) (any, error) {
		ok, err := srv.(replyServer).push(ctx, c)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "push reply to %s: %v", c.Client, err)
		}
		return wrapperspb.Bool(ok), nil
	})},
	Metadata: "broker/grpcapi/reply.go",
}

// RegisterReplyService registers the Reply service of relay on gs.
func RegisterReplyService(gs *grpc.Server, relay *ReplyRelay) {
	gs.RegisterService(&replyServiceDesc, relay)
}

// PushReply asks the node at cc to push a reply to its client; it reports
// whether that node held the client's connection and the client took it.
func PushReply(ctx context.Context, cc grpc.ClientConnInterface, c ReplyPushCall) (bool, error) {
	out := new(wrapperspb.BoolValue)
	if err := invokeJSON(ctx, cc, ReplyPushMethod, "push reply", c, out); err != nil {
		return false, err
	}
	return out.Value, nil
}
