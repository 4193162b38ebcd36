package grpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// The Users service (api/users.go) calls the broker's user management; a
// follower forwards the call to the leader, as every Broker call.

type usersServer interface {
	call(ctx context.Context, c api.UsersCall) (api.UsersReply, error)
}

type usersService struct {
	b     *broker.Broker
	peers *Peers
}

func (s *usersService) call(ctx context.Context, c api.UsersCall) (api.UsersReply, error) {
	return forward(ctx, s.b, s.peers, func() (api.UsersReply, error) {
		return s.local(ctx, c)
	}, func(ctx context.Context, cc grpc.ClientConnInterface) (api.UsersReply, error) {
		return api.CallUsers(ctx, cc, c)
	})
}

func (s *usersService) local(ctx context.Context, c api.UsersCall) (api.UsersReply, error) {
	var r api.UsersReply
	switch c.Op {
	case api.UsersAdd:
		return r, s.b.AddUser(ctx, c.User, c.Secret)
	case api.UsersPasswd:
		return r, s.b.SetUserSecret(ctx, c.User, c.Secret)
	case api.UsersRemove:
		return r, s.b.RemoveUser(ctx, c.User)
	case api.UsersGrant:
		return r, s.b.GrantUser(ctx, c.User, c.Resource, c.Actions)
	case api.UsersRevoke:
		return r, s.b.RevokeUser(ctx, c.User, c.Resource, c.Actions)
	case api.UsersList:
		us, err := s.b.ListUsers(ctx)
		for _, u := range us {
			ui := api.UserInfo{Name: u.Name}
			for _, g := range u.Grants {
				ui.Grants = append(ui.Grants, api.GrantInfo{Resource: g.Resource, Actions: g.Actions})
			}
			r.Users = append(r.Users, ui)
		}
		return r, err
	}
	return r, fmt.Errorf("%w: users operation %q: want add, remove, passwd, list, grant or revoke", broker.ErrInvalidArgument, c.Op)
}

var usersServiceDesc = grpc.ServiceDesc{
	ServiceName: api.UsersServiceName,
	HandlerType: (*usersServer)(nil),
	Methods: []grpc.MethodDesc{jsonMethod("Call", api.UsersCallMethod, "users", func(srv any, ctx context.Context, c api.UsersCall) (any, error) {
		r, err := srv.(usersServer).call(ctx, c)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "users: %v", err)
		}
		return wrapperspb.Bytes(b), nil
	})},
	Metadata: "broker/grpcapi/users.go",
}
