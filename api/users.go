package api

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The Users service manages the users and grants that authenticate and
// authorize RocketMQ remoting requests (docs/security.md). It has one
// method, whose request and answer are JSON documents in BytesValues, so it
// needs no generated code. Any node serves it and forwards changes to the
// leader.
const (
	UsersServiceName = "raftmq.v1.Users"
	// UsersCallMethod is the full name of the one method.
	UsersCallMethod = "/" + UsersServiceName + "/Call"
)

// The operations of UsersCall.Op.
const (
	UsersAdd    = "add"
	UsersRemove = "remove"
	UsersPasswd = "passwd"
	UsersList   = "list"
	UsersGrant  = "grant"
	UsersRevoke = "revoke"
)

// UsersCall is one operation on the user table.
type UsersCall struct {
	Op       string `json:"op"`
	User     string `json:"user,omitempty"`
	Secret   string `json:"secret,omitempty"`   // add, passwd
	Resource string `json:"resource,omitempty"` // grant, revoke: topic:<name>, group:<name> (may end in *), cluster
	Actions  string `json:"actions,omitempty"`  // grant, revoke: publish,subscribe,admin or all
}

// UsersReply answers a UsersCall; Users is filled by list.
type UsersReply struct {
	Users []UserInfo `json:"users,omitempty"`
}

// UserInfo is a user without its secret.
type UserInfo struct {
	Name   string      `json:"name"`
	Grants []GrantInfo `json:"grants,omitempty"`
}

// GrantInfo is one grant of a user.
type GrantInfo struct {
	Resource string `json:"resource"`
	Actions  string `json:"actions"`
}

// CallUsers runs c on the node at cc.
func CallUsers(ctx context.Context, cc grpc.ClientConnInterface, c UsersCall) (UsersReply, error) {
	var r UsersReply
	b, err := json.Marshal(c)
	if err != nil {
		return r, fmt.Errorf("users %s: %w", c.Op, err)
	}
	out := new(wrapperspb.BytesValue)
	if err := cc.Invoke(ctx, UsersCallMethod, wrapperspb.Bytes(b), out); err != nil {
		return r, err
	}
	if len(out.Value) > 0 {
		if err := json.Unmarshal(out.Value, &r); err != nil {
			return r, fmt.Errorf("users %s: answer: %w", c.Op, err)
		}
	}
	return r, nil
}
