package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Users and their grants are replicated state: every node verifies a
// request's signature and checks its permissions against the same table,
// and a change applies on every node without a restart.
//
// The store keeps each user's secret as the opaque bytes it was given: the
// auth layer (broker/auth) seals secrets before they are written, so the
// log and the snapshots hold no secret in the clear. Grants are opaque too:
// a resource string and a set of action bits, which broker/auth names and
// evaluates.

// Commands of the user table.
const (
	opUserAdd       = "user_add"
	opUserPasswd    = "user_passwd"
	opUserRemove    = "user_remove"
	opUserGrant     = "user_grant"
	opUserRevoke    = "user_revoke"
	opUserBootstrap = "user_bootstrap"
)

// Limits of the user table.
const (
	// MaxUsers bounds the table (it is in every snapshot).
	MaxUsers = 4096
	// MaxGrants bounds one user's grants.
	MaxGrants = 1024
	// MaxSecretBytes bounds a sealed secret.
	MaxSecretBytes = 1024
	// ActionMask holds every action bit a grant may carry (publish 1,
	// subscribe 2, admin 4; named in broker/auth).
	ActionMask = 7
)

// Grant is one permission of a user: the actions (bits of ActionMask) on a
// resource ("topic:<name or prefix*>", "group:<name or prefix*>",
// "cluster"), as broker/auth spells them.
type Grant struct {
	Resource string
	Actions  uint32
}

// User is a user as the store holds it. Secret is sealed (broker/auth).
type User struct {
	Name   string
	Secret []byte
	Grants []Grant // sorted by resource
}

func (u *User) clone() User {
	return User{Name: u.Name, Secret: slices.Clone(u.Secret), Grants: slices.Clone(u.Grants)}
}

// ValidateUserName checks a user name (an access key): the characters of
// ValidateName.
func ValidateUserName(name string) error { return ValidateName("user", name) }

func validateResource(r string) error {
	if r == "" || len(r) > MaxNameLen+8 || strings.ContainsAny(r, " \t\r\n") {
		return fmt.Errorf("%w: resource %q", ErrInvalidName, r)
	}
	return nil
}

// EncodeUserAdd encodes a command that adds a user with a sealed secret;
// it fails (ErrUserExists) when the user exists.
func EncodeUserAdd(name string, sealed []byte) []byte {
	return encodeMeta(&metaCmd{Op: opUserAdd, User: name, Secret: sealed})
}

// EncodeUserPasswd encodes a command that replaces a user's sealed secret.
func EncodeUserPasswd(name string, sealed []byte) []byte {
	return encodeMeta(&metaCmd{Op: opUserPasswd, User: name, Secret: sealed})
}

// EncodeUserRemove encodes a command that removes a user and its grants.
func EncodeUserRemove(name string) []byte {
	return encodeMeta(&metaCmd{Op: opUserRemove, User: name})
}

// EncodeUserGrant encodes a command that adds actions on a resource to a
// user's grants.
func EncodeUserGrant(name, resource string, actions uint32) []byte {
	return encodeMeta(&metaCmd{Op: opUserGrant, User: name, Resource: resource, Actions: actions})
}

// EncodeUserRevoke encodes a command that takes actions on a resource from a
// user's grants.
func EncodeUserRevoke(name, resource string, actions uint32) []byte {
	return encodeMeta(&metaCmd{Op: opUserRevoke, User: name, Resource: resource, Actions: actions})
}

// EncodeUserBootstrap encodes a command that adds a user with one grant
// only while the table is empty (the first admin, from the server's
// configuration); on a table with users it changes nothing.
func EncodeUserBootstrap(name string, sealed []byte, resource string, actions uint32) []byte {
	return encodeMeta(&metaCmd{Op: opUserBootstrap, User: name, Secret: sealed, Resource: resource, Actions: actions})
}

func (f *FSM) applyUserLocked(c *metaCmd) (interface{}, bool) {
	switch c.Op {
	case opUserAdd, opUserPasswd, opUserRemove, opUserGrant, opUserRevoke, opUserBootstrap:
	default:
		return nil, false
	}
	if err := ValidateUserName(c.User); err != nil {
		return err, true
	}
	u := f.users[c.User]
	switch c.Op {
	case opUserAdd, opUserPasswd, opUserBootstrap:
		if len(c.Secret) == 0 || len(c.Secret) > MaxSecretBytes {
			return fmt.Errorf("%w: user %q: secret of %d bytes, want 1..%d", ErrInvalidName, c.User, len(c.Secret), MaxSecretBytes), true
		}
	}
	switch c.Op {
	case opUserGrant, opUserRevoke, opUserBootstrap:
		if err := validateResource(c.Resource); err != nil {
			return err, true
		}
		if c.Actions == 0 || c.Actions&^ActionMask != 0 {
			return fmt.Errorf("%w: actions %#x, want bits of %#x", ErrInvalidName, c.Actions, ActionMask), true
		}
	}
	switch c.Op {
	case opUserBootstrap:
		if len(f.users) > 0 {
			return nil, true
		}
		f.users[c.User] = &User{Name: c.User, Secret: c.Secret, Grants: []Grant{{Resource: c.Resource, Actions: c.Actions}}}
	case opUserAdd:
		if u != nil {
			return fmt.Errorf("%w: %q", ErrUserExists, c.User), true
		}
		if len(f.users) >= MaxUsers {
			return fmt.Errorf("%w: %d users, at most %d", ErrInvalidName, len(f.users), MaxUsers), true
		}
		f.users[c.User] = &User{Name: c.User, Secret: c.Secret}
	case opUserPasswd:
		if u == nil {
			return fmt.Errorf("%w: %q", ErrUnknownUser, c.User), true
		}
		u.Secret = c.Secret
	case opUserRemove:
		if u == nil {
			return fmt.Errorf("%w: %q", ErrUnknownUser, c.User), true
		}
		delete(f.users, c.User)
	case opUserGrant:
		if u == nil {
			return fmt.Errorf("%w: %q", ErrUnknownUser, c.User), true
		}
		i, found := slices.BinarySearchFunc(u.Grants, c.Resource, func(g Grant, r string) int { return strings.Compare(g.Resource, r) })
		switch {
		case found:
			u.Grants[i].Actions |= c.Actions
		case len(u.Grants) >= MaxGrants:
			return fmt.Errorf("%w: user %q has %d grants, at most %d", ErrInvalidName, c.User, len(u.Grants), MaxGrants), true
		default:
			u.Grants = slices.Insert(u.Grants, i, Grant{Resource: c.Resource, Actions: c.Actions})
		}
	case opUserRevoke:
		if u == nil {
			return fmt.Errorf("%w: %q", ErrUnknownUser, c.User), true
		}
		i, found := slices.BinarySearchFunc(u.Grants, c.Resource, func(g Grant, r string) int { return strings.Compare(g.Resource, r) })
		if found {
			if u.Grants[i].Actions &^= c.Actions; u.Grants[i].Actions == 0 {
				u.Grants = slices.Delete(u.Grants, i, i+1)
			}
		}
	}
	return nil, true
}

// User returns a copy of a user and whether it exists.
func (f *FSM) User(name string) (User, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	u, ok := f.users[name]
	if !ok {
		return User{}, false
	}
	return u.clone(), true
}

// Users returns copies of every user, sorted by name.
func (f *FSM) Users() []User {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]User, 0, len(f.users))
	for _, u := range f.users {
		out = append(out, u.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *FSM) captureUsersLocked() []User {
	out := make([]User, 0, len(f.users))
	for _, u := range f.users {
		out = append(out, u.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *FSM) loadUsersLocked(users []User) {
	f.users = make(map[string]*User, len(users))
	for i := range users {
		u := users[i]
		f.users[u.Name] = &u
	}
}

func (s *Store) applyUser(ctx context.Context, what string, cmd []byte) error {
	if err := s.applyMeta(ctx, cmd); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// AddUser replicates a new user with a sealed secret.
func (s *Store) AddUser(ctx context.Context, name string, sealed []byte) error {
	return s.applyUser(ctx, "add user "+name, EncodeUserAdd(name, sealed))
}

// SetUserSecret replicates a user's new sealed secret.
func (s *Store) SetUserSecret(ctx context.Context, name string, sealed []byte) error {
	return s.applyUser(ctx, "change secret of user "+name, EncodeUserPasswd(name, sealed))
}

// RemoveUser replicates the removal of a user and its grants.
func (s *Store) RemoveUser(ctx context.Context, name string) error {
	return s.applyUser(ctx, "remove user "+name, EncodeUserRemove(name))
}

// GrantUser replicates actions on a resource added to a user's grants.
func (s *Store) GrantUser(ctx context.Context, name, resource string, actions uint32) error {
	return s.applyUser(ctx, "grant to user "+name, EncodeUserGrant(name, resource, actions))
}

// RevokeUser replicates actions on a resource taken from a user's grants.
func (s *Store) RevokeUser(ctx context.Context, name, resource string, actions uint32) error {
	return s.applyUser(ctx, "revoke from user "+name, EncodeUserRevoke(name, resource, actions))
}

// BootstrapUser replicates the first user with one grant; a table that
// already has users is left as it is.
func (s *Store) BootstrapUser(ctx context.Context, name string, sealed []byte, resource string, actions uint32) error {
	return s.applyUser(ctx, "bootstrap user "+name, EncodeUserBootstrap(name, sealed, resource, actions))
}

// User returns a copy of a user and whether it exists on this node.
func (s *Store) User(name string) (User, bool) { return s.fsm.User(name) }

// Users returns copies of every user on this node, sorted by name.
func (s *Store) Users() []User { return s.fsm.Users() }
