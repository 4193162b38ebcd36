package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/raftmq/raftmq/api"
)

// Users runs one operation on the group's user table (add, remove,
// passwd, list, grant, revoke; api.UsersCall). Any node takes it and
// forwards a change to the leader; list answers as the leader holds the
// table. Retried like every call: an add whose first attempt was stored
// and whose answer was lost answers that the user exists.
func (c *Client) Users(ctx context.Context, call api.UsersCall) (api.UsersReply, error) {
	var out api.UsersReply
	err := c.doConn(ctx, 0, 0, func(ctx context.Context, cc grpc.ClientConnInterface) error {
		r, err := api.CallUsers(ctx, cc, call)
		if err == nil {
			out = r
		}
		return err
	})
	return out, err
}
