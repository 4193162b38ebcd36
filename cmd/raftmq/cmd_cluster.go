package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// namesrvFlag is --namesrv for the commands that can reach a whole cluster
// through its name servers instead of one group through -s. It reads
// RAFTMQ_NAMESRV, the variable `server` registers with: the same name
// servers in both.
func namesrvFlag() cli.Flag {
	return &cli.StringFlag{Name: "namesrv", Usage: "name servers ADDR[;ADDR...]: reach every group of the cluster through them instead of one group's nodes (-s)"}
}

// viaNamesrv reports whether c runs against the whole cluster of
// --namesrv: --namesrv without --broker-name (with it, the command talks
// to that one group, as with -s: groupServers).
func viaNamesrv(c *cli.Context) (bool, error) {
	ok, err := namesrvGiven(c)
	return ok && c.String("broker-name") == "", err
}

// namesrvGiven reports whether c finds its nodes through --namesrv. -s
// and --namesrv both on the command line (or both only from the
// environment) are a usage error; a flag given beats the other's variable
// (the image sets RAFTMQ_SERVERS to its own node).
func namesrvGiven(c *cli.Context) (bool, error) {
	if c.String("namesrv") == "" {
		return false, nil
	}
	if !c.IsSet("servers") {
		return true, nil
	}
	nsEnv, sEnv := fromEnv(c, "namesrv"), fromEnv(c, "servers")
	if nsEnv == sEnv {
		return false, usageError(c, "give -s/--servers (RAFTMQ_SERVERS: one group) or --namesrv (RAFTMQ_NAMESRV: the cluster), not both")
	}
	return sEnv, nil
}

// fromEnv: flag's value is its variable's (given by it, or the same again
// on the command line).
func fromEnv(c *cli.Context, flag string) bool {
	v, ok := os.LookupEnv("RAFTMQ_" + strings.ToUpper(flag))
	return ok && v == c.String(flag)
}

// withCluster runs f with a cluster client of --namesrv and the command's
// timeout (withClient's twin).
func withCluster(c *cli.Context, f func(context.Context, *cluster.Cluster) error) error {
	cl, err := newCluster(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := opCtx(c)
	defer cancel()
	return f(ctx, cl)
}

func newCluster(c *cli.Context) (*cluster.Cluster, error) {
	giveUp := time.Duration(0)
	if !c.Bool("follow") {
		giveUp = unreachableGiveUp
	}
	return newClusterWith(c, giveUp)
}

// newClusterWith is newCluster giving up on a group whose every node
// refuses after giveUp (0: never; client.Config.GiveUpUnreachable).
func newClusterWith(c *cli.Context, giveUp time.Duration) (*cluster.Cluster, error) {
	cfg := cluster.DefaultConfig()
	cfg.NameServers = []string{c.String("namesrv")}
	cfg.Client.RetryTimeout = c.Duration("timeout")
	cfg.Client.GiveUpUnreachable = giveUp
	errw := c.App.ErrWriter
	cfg.Client.OnWaiting = func(msg string) { fmt.Fprintln(errw, "raftmq:", msg) }
	// Every group's client speaks TLS and signs its calls as -s's does.
	var err error
	if cfg.Client.TLS, err = clientTLS(c); err != nil {
		return nil, err
	}
	if cfg.Client.Credentials, err = clientCredentials(c); err != nil {
		return nil, err
	}
	return cluster.New(cfg)
}

func clusterCommand() *cli.Command {
	flags := func(extra ...cli.Flag) []cli.Flag {
		return append([]cli.Flag{
			&cli.StringFlag{Name: "namesrv", Value: "127.0.0.1:9876", Usage: "name servers ADDR[;ADDR...]"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "give up on one group's answer after this long"},
		}, append(clientTLSFlags(), extra...)...)
	}
	return &cli.Command{
		Name:  "cluster",
		Usage: "every group of a cluster, through its name servers",
		Subcommands: []*cli.Command{{
			Name:  "status",
			Usage: "show every group: leader, followers, lag and health; exit 1 unless all are healthy",
			Description: "Healthy: the group answers, knows a leader, and every member is healthy (heard from recently,\n" +
				"applying, undamaged). Exit status 0: every registered group is healthy; 1: one is not, or none is\n" +
				"registered; 2: usage; 3: no name server answers.",
			Flags:  flags(jsonFlag()),
			Action: runClusterStatus,
		}, {
			Name:   "health",
			Usage:  "exit 0 once every registered group is healthy (for scripts)",
			Flags:  flags(&cli.DurationFlag{Name: "wait", Usage: "keep checking this long before giving up (0: check once)"}, &cli.IntFlag{Name: "groups", Usage: "also wait for at least this many groups to register"}),
			Action: runClusterHealth,
		}},
	}
}

type clusterNodeJSON struct {
	ID      string  `json:"id"`
	Role    string  `json:"role"`
	Client  string  `json:"client_address"`
	Healthy bool    `json:"healthy"`
	Lag     uint64  `json:"lag"`
	Load    float64 `json:"load"`
	Error   string  `json:"error,omitempty"`
}

type clusterGroupJSON struct {
	Group   string            `json:"group"`
	Cluster string            `json:"cluster"`
	Term    uint64            `json:"term"`
	Leader  string            `json:"leader_id"`
	Healthy bool              `json:"healthy"`
	Error   string            `json:"error,omitempty"`
	Nodes   []clusterNodeJSON `json:"nodes"`
	Topics  map[string]int    `json:"topics"`
}

func clusterStatus(c *cli.Context) ([]clusterGroupJSON, bool, error) {
	cl, err := newClusterWith(c, min(unreachableGiveUp, c.Duration("timeout")))
	if err != nil {
		return nil, false, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.Context, 2*c.Duration("timeout"))
	defer cancel()
	sts, err := cl.Status(ctx)
	if err != nil {
		return nil, false, &exitError{3, err}
	}
	all := len(sts) > 0
	var out []clusterGroupJSON
	for _, s := range sts {
		g := clusterGroupJSON{Group: s.Group.Name, Cluster: s.Group.Cluster, Term: s.Group.Term, Healthy: s.Healthy(), Topics: s.Group.Topics, Nodes: []clusterNodeJSON{}}
		all = all && g.Healthy
		if s.Err != nil {
			g.Error = clean(s.Err).Error()
		}
		if st := s.Status; st != nil {
			g.Term, g.Leader = st.Term, st.LeaderId
			for _, n := range st.Nodes {
				g.Nodes = append(g.Nodes, clusterNodeJSON{ID: n.Id, Role: n.Role, Client: n.ClientAddress, Healthy: n.Healthy && !n.Damaged, Lag: n.Lag, Load: n.Load, Error: n.Error})
			}
		}
		out = append(out, g)
	}
	return out, all, nil
}

func runClusterStatus(c *cli.Context) error {
	out, healthy, err := clusterStatus(c)
	if err != nil {
		return err
	}
	if out == nil {
		out = []clusterGroupJSON{}
	}
	if c.Bool("json") {
		if err := printJSON(c.App.Writer, out); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "GROUP\tCLUSTER\tTERM\tNODE\tROLE\tCLIENT\tLAG\tLOAD\tHEALTH")
		for _, g := range out {
			h := "healthy"
			if !g.Healthy {
				h = "UNHEALTHY"
				if g.Error != "" {
					h += ": " + g.Error
				} else if g.Leader == "" {
					h += ": no leader"
				}
			}
			if len(g.Nodes) == 0 {
				fmt.Fprintf(w, "%s\t%s\t%d\t-\t-\t-\t-\t-\t%s\n", g.Group, g.Cluster, g.Term, h)
			}
			for i, n := range g.Nodes {
				nh := "ok"
				if !n.Healthy {
					nh = "down"
					if n.Error != "" {
						nh += ": " + n.Error
					}
				}
				if i == 0 {
					nh = h + " (" + nh + ")"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%.2f\t%s\n", g.Group, g.Cluster, g.Term, n.ID, n.Role, n.Client, n.Lag, n.Load, nh)
			}
		}
		w.Flush()
		if len(out) == 0 {
			fmt.Fprintln(c.App.Writer, "no groups registered")
		}
	}
	if !healthy {
		return reported{code: 1}
	}
	return nil
}

func runClusterHealth(c *cli.Context) error {
	deadline := time.Now().Add(c.Duration("wait"))
	want := c.Int("groups")
	for {
		out, healthy, err := clusterStatus(c)
		var why string
		switch {
		case err != nil:
			why = err.Error()
		case len(out) < max(want, 1):
			why = fmt.Sprintf("%d groups registered, want %d", len(out), max(want, 1))
		case !healthy:
			var bad []string
			for _, g := range out {
				if !g.Healthy {
					bad = append(bad, g.Group)
				}
			}
			why = "unhealthy groups: " + strings.Join(bad, ", ")
		default:
			fmt.Fprintf(c.App.Writer, "ok: %d groups healthy\n", len(out))
			return nil
		}
		if !time.Now().Before(deadline) {
			return &exitError{1, errors.New(why)}
		}
		select {
		case <-c.Context.Done():
			return &exitError{1, errors.New(why)}
		case <-time.After(time.Second):
		}
	}
}

// runTopicCreateCluster creates a topic over the cluster's groups.
func runTopicCreateCluster(c *cli.Context) error {
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		made, err := cl.CreateTopic(ctx, c.Args().First(), c.Int("queues"), groupsArg(c), c.Bool("if-not-exists"))
		for _, g := range sortedKeys(made) {
			fmt.Fprintf(c.App.Writer, "created topic %s with %d queues on group %s\n", c.Args().First(), made[g], g)
		}
		if err != nil {
			return clean(err)
		}
		printRouteOnceListed(ctx, c, cl, c.Args().First(), made)
		return nil
	})
}

// groupsArg is --groups G1,G2 as a list.
func groupsArg(c *cli.Context) []string {
	var groups []string
	for _, g := range strings.Split(c.String("groups"), ",") {
		if g = strings.TrimSpace(g); g != "" {
			groups = append(groups, g)
		}
	}
	return groups
}

// runTopicGrowCluster is topic update --add-queues: the topic is created
// on groups that do not hold it; then it waits (a few seconds at most) for
// the name servers to list the new queues and prints the route.
func runTopicGrowCluster(c *cli.Context) error {
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		topic := c.Args().First()
		made, err := cl.GrowTopic(ctx, topic, c.Int("add-queues"), groupsArg(c))
		for _, g := range sortedKeys(made) {
			fmt.Fprintf(c.App.Writer, "added topic %s with %d queues on group %s\n", topic, made[g], g)
		}
		if err != nil {
			return clean(err)
		}
		printRouteOnceListed(ctx, c, cl, topic, made)
		return nil
	})
}

// printRouteOnceListed waits (a few seconds at most) until the name servers
// list the queues just made, then prints the topic's route: what producers
// and consumers through the name servers will see.
func printRouteOnceListed(ctx context.Context, c *cli.Context, cl *cluster.Cluster, topic string, made map[string]int) {
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	for {
		r, err := cl.Route(wctx, topic)
		if err == nil {
			listed := true
			for g, n := range made {
				listed = listed && r.Groups[g] == n
			}
			if listed {
				var parts []string
				for _, g := range sortedKeys(r.Groups) {
					parts = append(parts, fmt.Sprintf("%d on %s", r.Groups[g], g))
				}
				fmt.Fprintf(c.App.Writer, "topic %s: %d queues, %s\n", topic, len(r.Queues), strings.Join(parts, ", "))
				return
			}
		}
		select {
		case <-wctx.Done():
			fmt.Fprintln(c.App.ErrWriter, "raftmq: the name servers do not list the new queues yet; they will at the groups' next registration")
			return
		case <-time.After(250 * time.Millisecond):
		}
		cl.Refresh(wctx)
	}
}

// runTopicPermCluster is topic update --perm through the name servers.
func runTopicPermCluster(c *cli.Context, perm uint32) error {
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		got, err := cl.UpdateTopic(ctx, c.Args().First(), perm, groupsArg(c))
		for _, g := range sortedKeys(got) {
			fmt.Fprintf(c.App.Writer, "topic %s on group %s: perm %s\n", got[g].Name, g, permName(got[g].Perm))
		}
		return clean(err)
	})
}

// runTopicDeleteCluster is topic delete through the name servers: on
// every group that holds the topic, or on those --groups names.
func runTopicDeleteCluster(c *cli.Context) error {
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		topic := c.Args().First()
		deleted, err := cl.DeleteTopic(ctx, topic, c.Bool("force"), groupsArg(c))
		for _, g := range deleted {
			fmt.Fprintf(c.App.Writer, "deleted topic %s on group %s\n", topic, g)
		}
		return clean(err)
	})
}

// brokerGroupJSON is a consumer group on one group (broker name) of a
// cluster.
type brokerGroupJSON struct {
	BrokerName string `json:"broker_name"`
	groupOut
}

// runGroupListCluster is group list through the name servers: every
// group's consumer groups, one row per consumer group and group. A group
// that does not answer is reported and the exit status is non-zero; the
// others are listed.
func runGroupListCluster(c *cli.Context) error {
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		groups, err := registeredGroups(ctx, cl)
		if err != nil {
			return err
		}
		rows := []brokerGroupRow{}
		var errs []error
		for _, g := range groups {
			gcl, err := cl.Client(ctx, g)
			var gr []consumerGroupRow
			if err == nil {
				gr, err = consumerGroupRows(ctx, gcl)
			}
			if err != nil {
				errs = append(errs, &cluster.GroupError{Group: g, Err: err})
				continue
			}
			for _, r := range gr {
				rows = append(rows, brokerGroupRow{BrokerName: g, consumerGroupRow: r})
			}
		}
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].Group < rows[j].Group })
		if c.Bool("json") {
			if err := printJSON(c.App.Writer, rows); err != nil {
				return err
			}
		} else {
			w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "CONSUMER GROUP\tGROUP\tMEMBERS\tLAG\tTOPICS")
			for _, r := range rows {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", r.Group, r.BrokerName, r.Members, r.Lag, strings.Join(r.Topics, ","))
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
		return clean(errors.Join(errs...))
	})
}

// everyGroupFlag is --namesrv of the commands that run on every group of
// a cluster in turn (onGroups).
func everyGroupFlag() cli.Flag {
	return &cli.StringFlag{Name: "namesrv", Usage: "name servers ADDR[;ADDR...]: run on every group of the cluster in turn (with --broker-name: on that group only)"}
}

// onGroups runs f on the group of -s (or of --namesrv with --broker-name),
// with the group name "". Through --namesrv without --broker-name it runs
// f on each group pick names (only then is pick called; nil pick: every
// registered group), one after
// the other, each group's output under a "group G:" line (none with --json
// or --format json); a group that fails is reported and the others go on, and the
// command then exits 1 naming the groups that failed.
func onGroups(c *cli.Context, pick func(context.Context, *cluster.Cluster) ([]string, error), f func(ctx context.Context, group string, cl *client.Client) error) error {
	all, err := viaNamesrv(c)
	if err != nil {
		return err
	}
	if !all {
		return withClient(c, func(ctx context.Context, cl *client.Client) error { return clean(f(ctx, "", cl)) })
	}
	if pick == nil {
		pick = registeredGroups
	}
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		groups, err := pick(ctx, cl)
		if err != nil {
			return err
		}
		var failed []string
		for _, g := range groups {
			if !c.Bool("json") && c.String("format") != "json" {
				fmt.Fprintf(c.App.Writer, "group %s:\n", g)
			}
			gcl, err := cl.Client(ctx, g)
			if err == nil {
				err = f(ctx, g, gcl)
			}
			if err != nil {
				fmt.Fprintf(c.App.ErrWriter, "raftmq: group %s: %v\n", g, clean(err))
				failed = append(failed, g)
			}
		}
		if len(failed) > 0 {
			return &exitError{1, fmt.Errorf("failed on %s of %s; the others went through", strings.Join(failed, ", "), plural(len(groups), "group"))}
		}
		return nil
	})
}

// registeredGroups is every group registered with the name servers, in
// name order.
func registeredGroups(ctx context.Context, cl *cluster.Cluster) ([]string, error) {
	groups, err := cl.Groups(ctx)
	if err != nil {
		return nil, &exitError{3, err}
	}
	return sortedKeys(groups), nil
}

// holdersOf is the groups that hold topic, as the name servers list them.
func holdersOf(topic string) func(context.Context, *cluster.Cluster) ([]string, error) {
	return func(ctx context.Context, cl *cluster.Cluster) ([]string, error) {
		r, err := cl.Route(ctx, topic)
		if err != nil {
			return nil, clean(err)
		}
		return sortedKeys(r.Groups), nil
	}
}

// resetGroups are the groups group reset through the name servers runs on:
// those that hold req's topic (without --topic: the one topic the consumer
// group has offsets of on any group, which it sets in req).
func resetGroups(c *cli.Context, req *api.ResetGroupRequest) func(context.Context, *cluster.Cluster) ([]string, error) {
	return func(ctx context.Context, cl *cluster.Cluster) ([]string, error) {
		if req.Topic == "" {
			byGroup, err := cl.DescribeConsumerGroup(ctx, req.Group)
			if byGroup == nil {
				return nil, clean(err)
			}
			seen := map[string]bool{}
			for _, g := range byGroup {
				for _, t := range groupTopics(g) {
					seen[t] = true
				}
			}
			if req.Topic, err = onlyTopic(c, req.Group, sortedKeys(seen)); err != nil {
				return nil, err
			}
		}
		return holdersOf(req.Topic)(ctx, cl)
	}
}

// brokerGroupRow is a consumer group on one group of a cluster.
type brokerGroupRow struct {
	BrokerName string `json:"broker_name"`
	consumerGroupRow
}

// runGroupDescribeCluster is group describe through the name servers: the
// consumer group's queues, offsets and lag on every group that knows it.
// A group that does not answer is reported and the exit status is
// non-zero; the others are shown.
func runGroupDescribeCluster(c *cli.Context) error {
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		byGroup, derr := cl.DescribeConsumerGroup(ctx, c.Args().First())
		if byGroup == nil {
			return clean(derr)
		}
		groups := sortedKeys(byGroup)
		if c.Bool("json") {
			rows := []brokerGroupJSON{}
			for _, g := range groups {
				rows = append(rows, brokerGroupJSON{BrokerName: g, groupOut: groupJSON(byGroup[g])})
			}
			if err := printJSON(c.App.Writer, rows); err != nil {
				return err
			}
			return clean(derr)
		}
		var lag uint64
		var members []string
		for _, g := range groups {
			for _, q := range byGroup[g].Queues {
				lag += q.Lag
			}
			members = append(members, fmt.Sprintf("%s %d", g, len(byGroup[g].Members)))
		}
		w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "consumer group %s on %s, total lag %d; members: %s\n", c.Args().First(), plural(len(groups), "group"), lag, strings.Join(members, ", "))
		fmt.Fprintln(w, "GROUP\tTOPIC\tQUEUE\tCOMMITTED\tMAX\tLAG\tMEMBER")
		for _, g := range groups {
			for _, q := range byGroup[g].Queues {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%d\t%s\n", g, q.Topic, q.Queue, committedCell(q.Committed), q.MaxOffset, q.Lag, q.MemberId)
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return clean(derr)
	})
}

// groupTopicJSON is a topic on one group of a cluster.
type groupTopicJSON struct {
	Group string `json:"group"`
	topicJSON
}

// runTopicListCluster is topic list through the name servers: every
// group's topics, as each group answers. A group that does not answer is
// reported and the exit status is non-zero; the others are listed.
func runTopicListCluster(c *cli.Context) error {
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		byGroup, lerr := cl.ListTopics(ctx)
		if byGroup == nil {
			return clean(lerr)
		}
		type row struct {
			group string
			t     *api.TopicInfo
		}
		var all []row // by topic, then group
		for _, g := range sortedKeys(byGroup) {
			for _, t := range byGroup[g] {
				all = append(all, row{g, t})
			}
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].t.Name < all[j].t.Name })
		if c.Bool("json") {
			rows := []groupTopicJSON{}
			for _, r := range all {
				rows = append(rows, groupTopicJSON{Group: r.group, topicJSON: topicsJSON([]*api.TopicInfo{r.t})[0]})
			}
			if err := printJSON(c.App.Writer, rows); err != nil {
				return err
			}
			return clean(lerr)
		}
		w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "TOPIC\tGROUP\tQUEUES\tMESSAGES\tPERM")
		for _, r := range all {
			var n uint64
			for _, q := range r.t.QueueInfo {
				n += q.MaxOffset - q.MinOffset
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", r.t.Name, r.group, r.t.Queues, n, permName(r.t.Perm))
		}
		w.Flush()
		return clean(lerr)
	})
}

// runTopicDescribeCluster is topic describe through the name servers:
// the topic's queues on every group that holds it.
func runTopicDescribeCluster(c *cli.Context) error {
	return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
		topic := c.Args().First()
		byGroup, derr := cl.DescribeTopic(ctx, topic)
		if byGroup == nil {
			return clean(derr)
		}
		groups := sortedKeys(byGroup)
		if c.Bool("json") {
			rows := []groupTopicJSON{}
			for _, g := range groups {
				rows = append(rows, groupTopicJSON{Group: g, topicJSON: topicsJSON([]*api.TopicInfo{byGroup[g]})[0]})
			}
			if err := printJSON(c.App.Writer, rows); err != nil {
				return err
			}
			return clean(derr)
		}
		total := 0
		for _, g := range groups {
			total += int(byGroup[g].Queues)
		}
		w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
		fmt.Fprintf(w, "topic %s, %d queues on %s\n", topic, total, plural(len(groups), "group"))
		fmt.Fprintln(w, "GROUP\tQUEUE\tMIN\tMAX\tPERM")
		for _, g := range groups {
			t := byGroup[g]
			for _, q := range t.QueueInfo {
				fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\n", g, q.Queue, q.MinOffset, q.MaxOffset, permName(t.Perm))
			}
		}
		w.Flush()
		return clean(derr)
	})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// runProduceCluster is produce through the name servers: messages spread
// over every group's queues (a key keeps one queue).
func runProduceCluster(c *cli.Context, topic, format string, props map[string]string, delay delaySpec) error {
	if c.Int("queue") >= 0 {
		return usageError(c, "--queue pins a queue of one group: use -s with that group's nodes, not --namesrv")
	}
	cl, err := newCluster(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cl.NewProducer(client.DefaultProducerConfig())
	defer p.Close()
	lines := c.Args().Slice()
	noun := "arguments"
	if len(lines) == 0 {
		noun = "lines"
		sc := bufio.NewScanner(c.App.Reader)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("reading input stopped after line %d: %w", len(lines), err)
		}
	}
	batch, inflight := max(c.Int("batch"), 1), max(c.Int("inflight"), 1)
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		tally sendTally
	)
	out := bufio.NewWriter(c.App.Writer)
	sem := make(chan struct{}, inflight)
	for first := 0; first < len(lines) && c.Context.Err() == nil; first += batch {
		part := lines[first:min(first+batch, len(lines))]
		sem <- struct{}{}
		wg.Add(1)
		go func(first int, part []string) {
			defer func() { <-sem; wg.Done() }()
			msgs := make([]cluster.Message, len(part))
			for i, l := range part {
				msgs[i] = cluster.Message{Message: client.Message{Key: c.String("key"), Tag: c.String("tag"), Properties: props, Body: []byte(l)}}
				delay.apply(&msgs[i].Message)
			}
			ctx, cancel := opCtx(c)
			acks, err := p.Send(ctx, topic, msgs...)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			tally.add(first+1, len(part), err)
			for i, a := range acks {
				if a.Ack == nil {
					continue
				}
				if format == "json" {
					j, _ := json.Marshal(struct {
						Group string `json:"group"`
						ackJSON
					}{a.Group, ackJSON{Queue: a.Queue, Offset: a.Offset, ID: a.Id, Body: part[i], DeliverAt: ackDeliverAt(a.Ack)}})
					out.Write(append(j, '\n'))
				} else {
					fmt.Fprintf(out, "group %s queue %d offset %d id %s\n", a.Group, a.Queue, a.Offset, a.Id)
				}
			}
		}(first, part)
	}
	wg.Wait()
	out.Flush()
	var notes []string
	if c.Context.Err() != nil {
		notes = append(notes, "interrupted: the input after it was not sent")
	}
	return tally.report(c.App.ErrWriter, "produce", noun, notes)
}

// runConsumeCluster is consume through the name servers: one member of
// the consumer group on every group of the topic.
func runConsumeCluster(c *cli.Context, topic, format string) error {
	if len(c.IntSlice("queue")) > 0 || c.Bool("broadcast") || pushMode(c) {
		return usageError(c, "--queue, --broadcast, --retry-every and --exec work on one group: use -s with that group's nodes, not --namesrv")
	}
	if c.String("group") == "" || c.IsSet("offset") {
		return usageError(c, "with --namesrv consume reads as a consumer group (give --group); a reader without a group, and --offset, work on one group's nodes (-s)")
	}
	encode, err := bodyEncoder(c)
	if err != nil {
		return err
	}
	cl, err := newCluster(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	cfg := client.DefaultConsumerConfig(topic, c.String("group"))
	cfg.From = c.String("from")
	cfg.FollowerReads = c.Bool("follower-reads")
	if !c.Bool("follow") {
		cfg.Wait = 200 * time.Millisecond
	}
	if err := consumeOptions(c, &cfg); err != nil {
		return err
	}
	ctx, cancel := opCtx(c)
	defer cancel()
	var end map[cluster.Queue]uint64
	if !c.Bool("follow") {
		if end, err = cl.EndOffsets(ctx, topic); err != nil {
			return clean(err)
		}
	}
	errw := c.App.ErrWriter
	cons, err := cl.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: cfg, OnError: func(err error) { fmt.Fprintln(errw, "raftmq:", clean(err)) }})
	if err != nil {
		return clean(err)
	}
	out := bufio.NewWriter(c.App.Writer)
	defer out.Flush()
	limit, n := c.Int("max"), 0
	idle := time.Now()
	var runErr error
	for c.Context.Err() == nil && (limit == 0 || n < limit) {
		recs, err := cons.Poll(c.Context)
		if err != nil {
			break // interrupted
		}
		if len(recs) > 0 {
			idle = time.Now()
		}
		sort.SliceStable(recs, func(i, j int) bool {
			if recs[i].Group != recs[j].Group {
				return recs[i].Group < recs[j].Group
			}
			if recs[i].Queue != recs[j].Queue {
				return recs[i].Queue < recs[j].Queue
			}
			return recs[i].Offset < recs[j].Offset
		})
		for _, r := range recs {
			if limit > 0 && n >= limit {
				// Not printed: rewind so that the group does not commit it.
				cons.Seek(cluster.Queue{Group: r.Group, Queue: r.Queue}, r.Offset)
				continue
			}
			n++
			if format == "json" {
				body, enc := jsonBody(c, r.Body)
				b, _ := json.Marshal(struct {
					Group string `json:"group"`
					msgJSON
				}{r.Group, msgJSON{Topic: r.Topic, Queue: r.Queue, Offset: r.Offset, ID: r.Id, Key: r.Key, Tag: r.Tag,
					Properties: r.Properties, Body: body, BodyEncoding: enc, Timestamp: r.TimestampMs, Node: r.ServedBy, Next: r.Next, Reason: r.Reason}})
				out.Write(append(b, '\n'))
			} else {
				fmt.Fprintf(out, "%s/%d:%d\t%s\n", r.Group, r.Queue, r.Offset, encode(r.Body))
			}
		}
		out.Flush()
		if end != nil && cons.CaughtUp(end) {
			break
		}
		if end != nil && time.Since(idle) > c.Duration("timeout") {
			runErr = fmt.Errorf("no progress for %s (queues held: %d)", c.Duration("timeout"), len(cons.Assigned()))
			break
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if err := cons.Close(cctx); err != nil && runErr == nil {
		runErr = clean(err)
	}
	return runErr
}
