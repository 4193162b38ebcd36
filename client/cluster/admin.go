package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// Spread splits queues over groups (sorted by name): every group gets
// queues/len(groups), the first ones one more until the remainder is
// used. A group that would get none is left out.
func Spread(queues int, groups []string) map[string]int {
	names := append([]string(nil), groups...)
	sort.Strings(names)
	out := map[string]int{}
	if len(names) == 0 || queues <= 0 {
		return out
	}
	for i, g := range names {
		n := queues / len(names)
		if i < queues%len(names) {
			n++
		}
		if n > 0 {
			out[g] = n
		}
	}
	return out
}

// CreateTopic creates topic with queues spread over groups, or over every
// group that has a leader registered when groups is empty. It returns the
// queues created per group; the error joins a *GroupError per group that
// failed (the others have the topic). A group named that is not registered
// fails the whole call before anything is created.
func (c *Cluster) CreateTopic(ctx context.Context, topic string, queues int, groups []string, ifNotExists bool) (map[string]int, error) {
	if queues <= 0 {
		return nil, fmt.Errorf("topic %s: %d queues: want at least 1", topic, queues)
	}
	all, err := c.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		for name, g := range all {
			if g.Leader != "" {
				groups = append(groups, name)
			}
		}
		if len(groups) == 0 {
			return nil, fmt.Errorf("topic %s: %w: no group with a leader is registered", topic, ErrUnknownGroup)
		}
	}
	for _, g := range groups {
		if all[g] == nil {
			return nil, fmt.Errorf("group %s: %w (registered: %s)", g, ErrUnknownGroup, strings.Join(sortedNames(all), ", "))
		}
	}
	return c.createOn(ctx, topic, Spread(queues, groups), ifNotExists)
}

// createOn creates topic on every group of plan with its queue count, all
// at once, and returns the groups it was created on.
func (c *Cluster) createOn(ctx context.Context, topic string, plan map[string]int, ifNotExists bool) (map[string]int, error) {
	var mu sync.Mutex
	done := map[string]int{}
	err := c.eachGroup(ctx, sortedNames(plan), func(g string, cl *client.Client) error {
		if _, err := cl.CreateTopic(ctx, topic, int32(plan[g]), ifNotExists); err != nil {
			return err
		}
		mu.Lock()
		done[g] = plan[g]
		mu.Unlock()
		return nil
	})
	return done, err
}

// GroupStatus is one group's health as its own nodes tell it.
type GroupStatus struct {
	Group  *Group
	Status *api.StatusResponse // nil when no node answered
	Err    error
}

// Healthy reports whether the group has a leader and every member is
// healthy and undamaged.
func (s *GroupStatus) Healthy() bool {
	if s.Status == nil || s.Err != nil || s.Status.LeaderId == "" || len(s.Status.Nodes) == 0 {
		return false
	}
	for _, n := range s.Status.Nodes {
		if !n.Healthy || n.Damaged {
			return false
		}
	}
	return true
}

// Status asks every registered group for its status, at once.
func (c *Cluster) Status(ctx context.Context) ([]GroupStatus, error) {
	groups, err := c.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	names := sortedNames(groups)
	out := make([]GroupStatus, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		out[i].Group = groups[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.Client(ctx, name)
			if err == nil {
				out[i].Status, err = cl.Status(ctx)
			}
			if err != nil {
				out[i].Err = &GroupError{Group: name, Err: err}
			}
		}()
	}
	wg.Wait()
	return out, nil
}

// ErrGroupHasTopic: a group asked to take a topic on holds it already.
// raftmq does not change a topic's queue count within a group, so growing
// a topic only adds groups that do not hold it.
var ErrGroupHasTopic = errors.New("the group holds the topic already: raftmq does not change a topic's queue count within a group")

// GrowTopic grows an existing topic onto groups that do not hold it yet:
// queues (in all) are spread over groups as CreateTopic does, and created
// on each as a new topic there. The groups that hold the topic keep their
// queues and their data; nothing moves. When groups is empty it grows
// onto every group with a leader registered that does not hold the topic.
//
// Before anything is created, every group named must be registered (else
// ErrUnknownGroup), must get at least one queue, and must not hold the
// topic, as the name server lists it or as the group itself answers (else
// ErrGroupHasTopic); the topic must be held by some group (else
// ErrTopicNotFound: create it with CreateTopic). It returns the queues
// created per group; the error joins a *GroupError per group that failed
// (the others have the topic). Producers and consumers of this Cluster
// (and others, after their next refresh) use the new queues once the
// groups have registered them with the name servers.
func (c *Cluster) GrowTopic(ctx context.Context, topic string, queues int, groups []string) (map[string]int, error) {
	if queues <= 0 {
		return nil, fmt.Errorf("topic %s: %d queues to add: want at least 1", topic, queues)
	}
	all, err := c.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	r := routeOf(topic, all)
	if len(r.Groups) == 0 {
		return nil, fmt.Errorf("topic %s: %w (create it first)", topic, ErrTopicNotFound)
	}
	if len(groups) == 0 {
		for _, name := range sortedNames(all) {
			if _, has := all[name].Topics[topic]; !has && all[name].Leader != "" {
				groups = append(groups, name)
			}
		}
		if len(groups) == 0 {
			return nil, fmt.Errorf("topic %s: every registered group with a leader holds it already (%s): name the groups to grow onto", topic, strings.Join(sortedNames(r.Groups), ", "))
		}
	}
	seen := map[string]bool{}
	for _, g := range groups {
		if seen[g] {
			return nil, fmt.Errorf("group %s named twice", g)
		}
		seen[g] = true
		if all[g] == nil {
			return nil, fmt.Errorf("group %s: %w (registered: %s)", g, ErrUnknownGroup, strings.Join(sortedNames(all), ", "))
		}
		if n, has := all[g].Topics[topic]; has {
			return nil, &GroupError{Group: g, Err: fmt.Errorf("topic %s with %d queues: %w", topic, n, ErrGroupHasTopic)}
		}
	}
	if queues < len(groups) {
		return nil, fmt.Errorf("topic %s: %d queues to add over %d groups: want at least one per group", topic, queues, len(groups))
	}
	// The name server's answer may be a registration period old: ask each
	// group itself too, all before creating anything.
	if err := c.eachGroup(ctx, groups, func(g string, cl *client.Client) error { return holds(ctx, cl, g, topic) }); err != nil {
		return nil, err
	}
	return c.createOn(ctx, topic, Spread(queues, groups), false)
}

// holds fails with ErrGroupHasTopic when group (cl) answers that it holds
// topic, and with a *GroupError when it does not answer.
func holds(ctx context.Context, cl *client.Client, group, topic string) error {
	ts, err := cl.ListTopics(ctx)
	if err != nil {
		return &GroupError{Group: group, Err: err}
	}
	for _, t := range ts {
		if t.Name == topic {
			return &GroupError{Group: group, Err: fmt.Errorf("topic %s with %d queues: %w", topic, t.Queues, ErrGroupHasTopic)}
		}
	}
	return nil
}

// UpdateTopic sets topic's permission (client.PermRead, PermWrite,
// PermReadWrite) on every group that holds it, or on the groups named
// (each must hold it, else ErrTopicNotFound before anything changes). It
// returns each group's answer; the error joins a *GroupError per group
// that failed.
func (c *Cluster) UpdateTopic(ctx context.Context, topic string, perm uint32, groups []string) (map[string]*api.TopicInfo, error) {
	groups, err := c.holders(ctx, topic, groups)
	if err != nil {
		return nil, err
	}
	return answers(ctx, c, groups, func(cl *client.Client) (*api.TopicInfo, bool, error) {
		ti, err := cl.UpdateTopic(ctx, topic, perm)
		return ti, true, err
	})
}

// DeleteTopic deletes topic on every group that holds it, or on the
// groups named (each must hold it, else ErrTopicNotFound before anything
// is deleted); force deletes it while consumers of it are connected
// (client.Client.DeleteTopic). It returns the groups it was deleted on;
// the error joins a *GroupError per group that refused or failed, where
// the topic is left as it was.
func (c *Cluster) DeleteTopic(ctx context.Context, topic string, force bool, groups []string) ([]string, error) {
	groups, err := c.holders(ctx, topic, groups)
	if err != nil {
		return nil, err
	}
	deleted, err := answers(ctx, c, groups, func(cl *client.Client) (struct{}, bool, error) {
		return struct{}{}, true, cl.DeleteTopic(ctx, topic, force)
	})
	return sortedNames(deleted), err
}

// holders is the groups an admin change of topic applies to: those named,
// each of which must hold topic as the name servers list it now, or else
// every group that holds it (ErrTopicNotFound when none does).
func (c *Cluster) holders(ctx context.Context, topic string, groups []string) ([]string, error) {
	all, err := c.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	r := routeOf(topic, all)
	if len(r.Groups) == 0 {
		return nil, fmt.Errorf("topic %s: %w", topic, ErrTopicNotFound)
	}
	if len(groups) == 0 {
		return sortedNames(r.Groups), nil
	}
	for _, g := range groups {
		if _, ok := r.Groups[g]; !ok {
			return nil, &GroupError{Group: g, Err: fmt.Errorf("topic %s: %w here (held by %s)", topic, ErrTopicNotFound, strings.Join(sortedNames(r.Groups), ", "))}
		}
	}
	return groups, nil
}

// eachGroup calls f for every group named, at once, and joins their
// errors, each a *GroupError.
func (c *Cluster) eachGroup(ctx context.Context, groups []string, f func(g string, cl *client.Client) error) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.Client(ctx, g)
			if err == nil {
				err = f(g, cl)
			}
			if err != nil {
				var ge *GroupError
				if !errors.As(err, &ge) {
					err = &GroupError{Group: g, Err: err}
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// answers asks each of groups at once and gathers the answers by group.
// A group whose ask fails is left out and the error joins a *GroupError
// for it; one whose ask finds nothing there (false) is left out silently.
func answers[T any](ctx context.Context, c *Cluster, groups []string, ask func(cl *client.Client) (T, bool, error)) (map[string]T, error) {
	var mu sync.Mutex
	out := map[string]T{}
	err := c.eachGroup(ctx, groups, func(g string, cl *client.Client) error {
		v, there, err := ask(cl)
		if err != nil || !there {
			return err
		}
		mu.Lock()
		out[g] = v
		mu.Unlock()
		return nil
	})
	return out, err
}

// ListTopics lists every registered group's topics, as each group itself
// answers (with queue offsets). Groups that fail are left out of the map;
// the error joins a *GroupError for each.
func (c *Cluster) ListTopics(ctx context.Context) (map[string][]*api.TopicInfo, error) {
	all, err := c.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	return answers(ctx, c, sortedNames(all), func(cl *client.Client) ([]*api.TopicInfo, bool, error) {
		ts, err := cl.ListTopics(ctx)
		return ts, true, err
	})
}

// DescribeConsumerGroup describes the consumer group on every registered
// group that knows it (its members, queues, committed offsets and lag
// there), as each group answers; ErrConsumerGroupNotFound when none does.
// Groups that fail are left out; the error joins a *GroupError for each.
func (c *Cluster) DescribeConsumerGroup(ctx context.Context, group string) (map[string]*api.DescribeGroupResponse, error) {
	all, err := c.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	out, err := answers(ctx, c, sortedNames(all), func(cl *client.Client) (*api.DescribeGroupResponse, bool, error) {
		d, err := cl.DescribeGroup(ctx, group)
		if status.Code(err) == codes.NotFound {
			return nil, false, nil
		}
		return d, true, err
	})
	if len(out) == 0 && err == nil {
		return nil, fmt.Errorf("consumer group %s: %w", group, ErrConsumerGroupNotFound)
	}
	return out, err
}

// DescribeTopic describes topic on every group that holds it (as the name
// servers list it), as each group answers; ErrTopicNotFound when none
// does. Groups that fail are left out; the error joins a *GroupError for
// each.
func (c *Cluster) DescribeTopic(ctx context.Context, topic string) (map[string]*api.TopicInfo, error) {
	r, err := c.Route(ctx, topic)
	if err != nil {
		return nil, err
	}
	return answers(ctx, c, sortedNames(r.Groups), func(cl *client.Client) (*api.TopicInfo, bool, error) {
		ti, err := cl.DescribeTopic(ctx, topic)
		return ti, true, err
	})
}
