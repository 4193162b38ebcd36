package broker

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/store"
)

// UserTable is the replicated user table the broker manages
// (store.Store); secrets reach it sealed.
type UserTable interface {
	AddUser(ctx context.Context, name string, sealed []byte) error
	SetUserSecret(ctx context.Context, name string, sealed []byte) error
	RemoveUser(ctx context.Context, name string) error
	GrantUser(ctx context.Context, name, resource string, actions uint32) error
	RevokeUser(ctx context.Context, name, resource string, actions uint32) error
	Users() []store.User
}

var _ UserTable = (*store.Store)(nil)

type userAdmin struct {
	table  UserTable
	sealer *acl.Sealer
}

// usersOf holds the user table and sealer SetUsers gave (nil: none).
type usersOf = atomic.Pointer[userAdmin]

// SetUsers gives the broker the user table it manages and the sealer of
// the secrets it writes; a node without an auth key has a nil sealer and
// refuses to add users or change secrets.
func (b *Broker) SetUsers(t UserTable, s *acl.Sealer) {
	b.users.Store(&userAdmin{table: t, sealer: s})
}

func (b *Broker) userAdmin(sealing bool) (*userAdmin, error) {
	u := b.users.Load()
	if u == nil {
		return nil, fmt.Errorf("%w: this node manages no users", ErrFailedPrecondition)
	}
	if sealing && u.sealer == nil {
		return nil, fmt.Errorf("%w: this node has no --auth-key-file to seal secrets with", ErrFailedPrecondition)
	}
	return u, nil
}

// UserView is a user without its secret.
type UserView struct {
	Name   string      `json:"name"`
	Grants []GrantView `json:"grants,omitempty"`
}

// GrantView is one grant as users write it.
type GrantView struct {
	Resource string `json:"resource"`
	Actions  string `json:"actions"`
}

func (b *Broker) sealFor(ctx context.Context, name, secret string) (*userAdmin, []byte, error) {
	if err := store.ValidateUserName(name); err != nil {
		return nil, nil, storeErr(err)
	}
	if secret == "" {
		return nil, nil, fmt.Errorf("%w: user %s: empty secret", ErrInvalidArgument, name)
	}
	u, err := b.userAdmin(true)
	if err != nil {
		return nil, nil, err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return nil, nil, err
	}
	sealed, err := u.sealer.Seal(name, []byte(secret))
	return u, sealed, err
}

// AddUser adds a user with a secret (leader only).
func (b *Broker) AddUser(ctx context.Context, name, secret string) error {
	u, sealed, err := b.sealFor(ctx, name, secret)
	if err != nil {
		return err
	}
	return b.replicaErr(u.table.AddUser(ctx, name, sealed))
}

// SetUserSecret replaces a user's secret (leader only).
func (b *Broker) SetUserSecret(ctx context.Context, name, secret string) error {
	u, sealed, err := b.sealFor(ctx, name, secret)
	if err != nil {
		return err
	}
	return b.replicaErr(u.table.SetUserSecret(ctx, name, sealed))
}

// RemoveUser removes a user and its grants (leader only).
func (b *Broker) RemoveUser(ctx context.Context, name string) error {
	u, err := b.userAdmin(false)
	if err != nil {
		return err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	return b.replicaErr(u.table.RemoveUser(ctx, name))
}

func parseGrant(resource, actions string) (string, auth.Action, error) {
	r, err := auth.ParseResource(resource)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	a, err := auth.ParseActions(actions)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return r, a, nil
}

// GrantUser adds actions ("publish,subscribe") on a resource
// ("topic:orders*", "group:cg", "cluster") to a user's grants (leader only).
func (b *Broker) GrantUser(ctx context.Context, name, resource, actions string) error {
	return b.changeGrant(ctx, name, resource, actions, true)
}

// RevokeUser takes actions on a resource from a user's grants (leader only).
func (b *Broker) RevokeUser(ctx context.Context, name, resource, actions string) error {
	return b.changeGrant(ctx, name, resource, actions, false)
}

func (b *Broker) changeGrant(ctx context.Context, name, resource, actions string, grant bool) error {
	r, a, err := parseGrant(resource, actions)
	if err != nil {
		return err
	}
	u, err := b.userAdmin(false)
	if err != nil {
		return err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return err
	}
	if grant {
		return b.replicaErr(u.table.GrantUser(ctx, name, r, uint32(a)))
	}
	return b.replicaErr(u.table.RevokeUser(ctx, name, r, uint32(a)))
}

// ListUsers lists the users and their grants as the leader holds them,
// without secrets (leader only).
func (b *Broker) ListUsers(ctx context.Context) ([]UserView, error) {
	u, err := b.userAdmin(false)
	if err != nil {
		return nil, err
	}
	if err := b.awaitLeader(ctx); err != nil {
		return nil, err
	}
	var out []UserView
	for _, s := range u.table.Users() {
		v := UserView{Name: s.Name}
		for _, g := range s.Grants {
			v.Grants = append(v.Grants, GrantView{Resource: g.Resource, Actions: auth.Action(g.Actions).String()})
		}
		out = append(out, v)
	}
	return out, nil
}
