package auth

import (
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// Action is a set of permission bits (store.ActionMask).
type Action uint32

// The actions a grant carries.
const (
	Publish   Action = 1
	Subscribe Action = 2
	Admin     Action = 4
)

// ClusterResource is the resource of admin operations on the group itself;
// admin on it allows every action on every resource.
const ClusterResource = "cluster"

// Resource kinds: "topic:<name>", "group:<name>". A grant's name may end in
// '*', which matches every name with the part before it as prefix ("*"
// alone: every name).
const (
	topicKind = "topic:"
	groupKind = "group:"
)

// Topic returns the resource of a topic. A retry topic (%RETRY%<group>)
// is its consumer group's resource, as RocketMQ checks it.
func Topic(name string) string {
	if mq.IsRetryTopic(name) {
		return Group(name)
	}
	return topicKind + name
}

// Group returns the resource of a consumer or producer group;
// %RETRY%<group> names <group>.
func Group(name string) string { return groupKind + strings.TrimPrefix(name, mq.RetryTopic("")) }

// String names the actions: "publish,subscribe".
func (a Action) String() string {
	var parts []string
	for _, n := range []struct {
		a    Action
		name string
	}{{Publish, "publish"}, {Subscribe, "subscribe"}, {Admin, "admin"}} {
		if a&n.a != 0 {
			parts = append(parts, n.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// ParseActions reads "publish,subscribe" (also "pub", "sub", "all").
func ParseActions(s string) (Action, error) {
	var a Action
	for _, p := range strings.Split(s, ",") {
		switch strings.ToLower(strings.TrimSpace(p)) {
		case "publish", "pub":
			a |= Publish
		case "subscribe", "sub":
			a |= Subscribe
		case "admin":
			a |= Admin
		case "all":
			a |= Publish | Subscribe | Admin
		default:
			return 0, fmt.Errorf("action %q: want publish, subscribe, admin or all", p)
		}
	}
	return a, nil
}

// ParseResource checks a resource as a user writes it: "topic:<name>",
// "group:<name>" (each name may end in '*') or "cluster".
func ParseResource(s string) (string, error) {
	if s == ClusterResource {
		return s, nil
	}
	for _, kind := range []string{topicKind, groupKind} {
		if name, ok := strings.CutPrefix(s, kind); ok {
			base := strings.TrimSuffix(name, "*")
			if base == "" && name == "*" {
				return s, nil
			}
			if err := store.ValidateName(strings.TrimSuffix(kind, ":"), base); err != nil {
				return "", fmt.Errorf("resource %q: %w", s, err)
			}
			return s, nil
		}
	}
	return "", fmt.Errorf("resource %q: want topic:<name>, group:<name> (a name may end in *) or cluster", s)
}

// matches reports whether a grant's resource covers resource r.
func matches(grant, r string) bool {
	if prefix, ok := strings.CutSuffix(grant, "*"); ok {
		// "topic:*" covers topics only: the kind is part of the prefix.
		return strings.HasPrefix(r, prefix)
	}
	return grant == r
}

// Need is one permission a request needs.
type Need struct {
	Action   Action
	Resource string
}

// Allowed reports whether grants allow need: a grant whose resource
// covers it carries the action, or the user is an admin of the cluster.
func Allowed(grants []store.Grant, need Need) bool {
	for _, g := range grants {
		a := Action(g.Actions)
		if g.Resource == ClusterResource && a&Admin != 0 {
			return true
		}
		if a&need.Action == need.Action && matches(g.Resource, need.Resource) {
			return true
		}
	}
	return false
}

// describe names a need for a refusal: "publish to topic orders".
func (n Need) describe() string {
	verb := map[Action]string{Publish: "publish to", Subscribe: "subscribe to", Admin: "administer"}[n.Action]
	if verb == "" {
		verb = n.Action.String() + " on"
	}
	kind, name, ok := strings.Cut(n.Resource, ":")
	if !ok {
		return verb + " the " + n.Resource
	}
	return fmt.Sprintf("%s %s %s", verb, kind, name)
}
