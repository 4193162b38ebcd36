package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/raftmq/raftmq/api"
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
	plan := Spread(queues, groups)
	var mu sync.Mutex
	var errs []error
	done := map[string]int{}
	var wg sync.WaitGroup
	for g, n := range plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := c.Client(ctx, g)
			if err == nil {
				_, err = cl.CreateTopic(ctx, topic, int32(n), ifNotExists)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, &GroupError{Group: g, Err: err})
				return
			}
			done[g] = n
		}()
	}
	wg.Wait()
	return done, errors.Join(errs...)
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
