package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// groupHit is a message that one group of the cluster holds under an id.
type groupHit struct {
	group string
	cl    *client.Client
	r     *api.LookupMessageResponse
}

// groupLookup is what lookupEveryGroup found.
type groupLookup struct {
	hits   []groupHit
	groups int      // asked
	failed []string // groups that could not answer
}

// lookupEveryGroup looks id up on every group of the cluster, in name
// order: a message id is a group's own (its log index and ordinal), so
// several groups may hold a message under it. It keeps the hits want
// accepts (nil: every hit); a group that cannot answer is reported on
// standard error. An id no group could hold (not 24 hex digits) is an
// error at once.
func lookupEveryGroup(ctx context.Context, c *cli.Context, cl *cluster.Cluster, id string, want func(*api.Message) bool) (groupLookup, error) {
	var l groupLookup
	groups, err := registeredGroups(ctx, cl)
	if err != nil {
		return l, err
	}
	l.groups = len(groups)
	for _, g := range groups {
		gcl, err := cl.Client(ctx, g)
		var r *api.LookupMessageResponse
		if err == nil {
			r, err = gcl.LookupMessage(ctx, id)
		}
		switch status.Code(err) {
		case codes.OK:
			if want == nil || want(r.Message) {
				l.hits = append(l.hits, groupHit{g, gcl, r})
			}
		case codes.NotFound:
		case codes.InvalidArgument:
			return l, clean(err)
		default:
			fmt.Fprintf(c.App.ErrWriter, "raftmq: group %s: %v\n", g, clean(err))
			l.failed = append(l.failed, g)
		}
	}
	return l, nil
}

// none is the error of a lookup that found what (a message, a dead letter
// of a consumer group) under id in no group.
func (l groupLookup) none(id, what string) error {
	if len(l.failed) > 0 {
		return fmt.Errorf("no group that answered holds %s %s; %s of %s could not answer (%s)", what, id, plural(len(l.failed), "group"), plural(l.groups, "group"), strings.Join(l.failed, ", "))
	}
	return fmt.Errorf("no group of %s holds %s %s", plural(l.groups, "group"), what, id)
}

// only is the one hit, or an error when there is none or several (then
// the group must be named).
func (l groupLookup) only(id, what string) (groupHit, error) {
	switch len(l.hits) {
	case 0:
		return groupHit{}, l.none(id, what)
	case 1:
		return l.hits[0], nil
	}
	var gs []string
	for _, h := range l.hits {
		gs = append(gs, h.group)
	}
	return groupHit{}, fmt.Errorf("groups %s each hold %s %s (an id is a group's own): name one with --broker-name", strings.Join(gs, ", "), what, id)
}

// showHits prints the messages found, each under its group (in JSON,
// with a "group" field).
func showHits(c *cli.Context, format string, hits []groupHit) error {
	for _, h := range hits {
		if format == "json" {
			s := shownJSON(c, h.r.Message, h.r.ServedBy)
			s.Group = h.group
			if err := printJSON(c.App.Writer, s); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(c.App.Writer, "group %s:\n", h.group)
		printMessage(c.App.Writer, h.r.Message)
		fmt.Fprintf(c.App.Writer, "served by   %s\n", h.r.ServedBy)
	}
	if len(hits) > 1 {
		fmt.Fprintf(c.App.ErrWriter, "raftmq: %s hold a message under this id (an id is a group's own): name one with --broker-name\n", plural(len(hits), "group"))
	}
	return nil
}
