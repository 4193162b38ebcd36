package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
)

func healthCommand() *cli.Command {
	return &cli.Command{
		Name:  "health",
		Usage: "exit 0 when the node at -s answers, knows a leader and is ready (--all: every node of the group)",
		Flags: append([]cli.Flag{&cli.StringFlag{Name: "servers", Aliases: []string{"s"}, Value: defaultServers, Usage: "the node to check (with --all: any nodes of the group)"},
			&cli.BoolFlag{Name: "all", Usage: "check the whole group: a leader, and every member up and ready"},
			&cli.DurationFlag{Name: "wait", Usage: "check again every half second until healthy or this long has passed (0: check once)"}, jsonFlag()},
			clientTLSFlags()...),
		Description: "Without --all only the first address of -s is checked; one check takes at most 2 seconds.\n" +
			"Exit status 1: no answer; 3: no leader known; 4: not ready, with the reason (as /readyz: a leader\n" +
			"that cannot commit, a node whose applying is stuck, a follower that receives no entries; with\n" +
			"--all: any member down or not ready).",
		Action: func(c *cli.Context) error {
			servers, err := groupServers(c)
			if err != nil {
				return err
			}
			if len(servers) == 1 {
				servers = strings.Split(servers[0], ",")
			}
			if !c.Bool("all") {
				servers = servers[:1]
			}
			tc, err := clientTLS(c)
			if err != nil {
				return err
			}
			creds, err := clientCredentials(c)
			if err != nil {
				return err
			}
			cl, err := client.New(client.Config{Servers: servers, RequestTimeout: 2 * time.Second, TLS: tc, Credentials: creds})
			if err != nil {
				return err
			}
			defer cl.Close()
			deadline := time.Now().Add(c.Duration("wait"))
			for {
				msg, err := checkHealth(c.Context, cl, servers[0], c.Bool("all"))
				if err == nil {
					if c.Bool("json") {
						return printJSON(c.App.Writer, healthJSON{Healthy: true, Message: msg})
					}
					fmt.Fprintln(c.App.Writer, msg)
					return nil
				}
				if !time.Now().Before(deadline) || c.Context.Err() != nil {
					if c.Bool("json") {
						printJSON(c.App.Writer, healthJSON{ExitCode: exitCode(err), Message: err.Error()})
					}
					return err
				}
				select {
				case <-time.After(500 * time.Millisecond):
				case <-c.Context.Done():
				}
			}
		},
	}
}

// healthJSON is health's answer with --format json; ExitCode is the
// command's exit status (docs/cli.md).
type healthJSON struct {
	Healthy  bool   `json:"healthy"`
	ExitCode int    `json:"exit_code"`
	Message  string `json:"message"`
}

// checkHealth is one health check: of the node at addr, or of the whole
// group (all).
func checkHealth(ctx context.Context, cl *client.Client, addr string, all bool) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var st *api.StatusResponse
	var err error
	if all {
		st, err = cl.Status(cctx)
	} else {
		st, err = cl.StatusOf(cctx, addr)
	}
	if err != nil {
		return "", &exitError{1, fmt.Errorf("%s does not answer: %w", addr, clean(err))}
	}
	if st.LeaderId == "" {
		return "", &exitError{3, fmt.Errorf("%s answers but knows no leader", st.AnsweredBy)}
	}
	if all {
		if err := statusExit(st); err != nil {
			return "", err
		}
		return fmt.Sprintf("ok: group %s, %d nodes up and ready, leader %s, term %d", st.Group, len(st.Nodes), st.LeaderId, st.Term), nil
	}
	for _, n := range st.Nodes {
		if n.Id == st.AnsweredBy && !n.Healthy {
			return "", &exitError{4, fmt.Errorf("%s (%s) answers but is not ready: %s", addr, n.Id, n.Error)}
		}
	}
	return fmt.Sprintf("ok: %s, leader %s, term %d", st.AnsweredBy, st.LeaderId, st.Term), nil
}

// unwell describes every member of st that is down or not ready.
func unwell(st *api.StatusResponse) []string {
	var bad []string
	for _, n := range st.Nodes {
		if n.Healthy {
			continue
		}
		what := fmt.Sprintf("node %s is not ready", n.Id)
		if n.Role == mq.RoleDown || n.Role == mq.RoleUnknown {
			what = fmt.Sprintf("node %s is down", n.Id)
			if n.LastSeenMs > 0 {
				what += fmt.Sprintf(" (last heard %s ago)", time.Since(time.UnixMilli(n.LastSeenMs)).Round(time.Second))
			}
		}
		if n.Error != "" {
			what += ": " + shortError(n.Error)
		}
		bad = append(bad, what)
	}
	return bad
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the group: term, leader, and every node's role, indexes, load and health",
		Description: "Exit status 0: a leader and every member up and ready; 3: no leader; 4: a member down (not heard\n" +
			"for five state periods: its role shows DOWN) or not ready.\n" +
			"FIRST is the lowest log index whose messages a node holds (retention deletes below it; a node\n" +
			"that rejoined from the leader's snapshot starts after it). APPLIED, COMMIT and LAST are its raft\n" +
			"indexes, LAG how far its applied index is behind the leader's, LOAD the leader-load signal of\n" +
			"read routing. A node still in an older term than the group's is marked stale (a deposed leader\n" +
			"says leader until it hears of its successor); the header names the leader of the highest term.\n" +
			"--json prints every field.",
		Flags: clientFlags(jsonFlag()),
		Action: func(c *cli.Context) error {
			cl, err := newClient(c)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := opCtx(c)
			defer cancel()
			st, err := cl.Status(ctx)
			if err != nil {
				return clean(err)
			}
			if c.Bool("json") {
				if err := printJSON(c.App.Writer, statusJSON(st)); err != nil {
					return err
				}
				return statusExit(st)
			}
			stale := settleLeader(st)
			w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
			leader := st.LeaderId
			if leader == "" {
				leader = "(none)"
			}
			fmt.Fprintf(w, "group %s (id %s)   term %d   leader %s %s   (answered by %s)\n\n", st.Group, orDash(st.GroupId), st.Term, leader, st.LeaderAddress, st.AnsweredBy)
			fmt.Fprintln(w, "ID\tROLE\tTERM\tHEALTHY\tCLIENT\tRAFT\tFIRST\tAPPLIED\tCOMMIT\tLAST\tLAG\tLOAD\tVOTER")
			for _, n := range st.Nodes {
				if n.Role == mq.RoleDown || n.Role == mq.RoleUnknown {
					fmt.Fprintf(w, "%s\t%s\t-\t%v\t%s\t%s\t-\t-\t-\t-\t-\t-\t%v\n", n.Id, strings.ToUpper(n.Role), n.Healthy, n.ClientAddress, n.RaftAddress, n.Voter)
					continue
				}
				role := n.Role
				if stale[n.Id] {
					role += " (stale)"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%v\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%v\n", n.Id, role, n.Term, n.Healthy, n.ClientAddress, n.RaftAddress,
					n.FirstIndex, n.AppliedIndex, n.CommitIndex, n.LastIndex, n.Lag, n.Load, n.Voter)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for _, n := range st.Nodes {
				if n.Damaged {
					fmt.Fprintf(c.App.Writer, "\nnode %s is DAMAGED at log index %d: %s\n", n.Id, n.DamagedIndex, n.DamagedReason)
				}
			}
			return statusExit(st)
		},
	}
}

// shortError drops gRPC's wrapping of a dial error a node reported of a
// peer ("rpc error: code = Unavailable desc = connection error: desc =
// "transport: Error while dialing: dial tcp ...: connection refused"").
func shortError(msg string) string {
	if i := strings.LastIndex(msg, "dial tcp "); i >= 0 {
		return strings.TrimRight(msg[i:], `"`)
	}
	return msg
}

// plural is "1 queue", "4 queues".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// statusExit is status's exit: 0 when the group has a leader and every
// member is up and ready, 3 without a leader, 4 when a member is down or not
// ready (as health --all).
func statusExit(st *api.StatusResponse) error {
	if st.LeaderId == "" {
		return &exitError{3, fmt.Errorf("group %s has no leader (term %d)", st.Group, st.Term)}
	}
	if bad := unwell(st); len(bad) > 0 {
		return &exitError{4, fmt.Errorf("group %s: %s", st.Group, strings.Join(bad, "; "))}
	}
	return nil
}

type nodeJSON struct {
	ID            string  `json:"id"`
	Role          string  `json:"role"`
	RaftAddress   string  `json:"raft_address"`
	ClientAddress string  `json:"client_address"`
	HTTPAddress   string  `json:"http_address,omitempty"`
	AppliedIndex  uint64  `json:"applied_index"`
	CommitIndex   uint64  `json:"commit_index"`
	LastIndex     uint64  `json:"last_index"`
	FirstIndex    uint64  `json:"first_index"`
	Healthy       bool    `json:"healthy"`
	Voter         bool    `json:"voter"`
	Term          uint64  `json:"term"`
	Load          float64 `json:"load"`
	Lag           uint64  `json:"lag"`
	Error         string  `json:"error,omitempty"`
	Damaged       bool    `json:"damaged,omitempty"`
	DamagedIndex  uint64  `json:"damaged_index,omitempty"`
	DamagedReason string  `json:"damaged_reason,omitempty"`
	// ServedAsLeader and ServedAsFollower: messages the node served to
	// consumers since it started, as leader and as follower.
	ServedAsLeader   uint64 `json:"served_as_leader"`
	ServedAsFollower uint64 `json:"served_as_follower"`
	// Stale: the node still believes a term older than the group's (a
	// leader that has not yet heard of its successor says leader).
	Stale bool `json:"stale,omitempty"`
}

// settleLeader makes st name one leader: of the nodes that say they lead,
// the one of the highest term; the others, and every node of an older term
// than the group's, are marked stale (after a transfer or an election a
// deposed leader reports leader until it hears of the new term).
func settleLeader(st *api.StatusResponse) (stale map[string]bool) {
	stale = map[string]bool{}
	var top uint64
	for _, n := range st.Nodes {
		if n.Role != mq.RoleDown && n.Role != mq.RoleUnknown {
			top = max(top, n.Term)
		}
	}
	top = max(top, st.Term)
	for _, n := range st.Nodes {
		if n.Role == mq.RoleDown || n.Role == mq.RoleUnknown || n.Term == 0 {
			continue
		}
		if n.Term < top {
			stale[n.Id] = true
		}
	}
	for _, n := range st.Nodes {
		if n.Role == "leader" && !stale[n.Id] && n.Id != st.LeaderId && n.Term == top {
			// The answering node has not heard of this leader yet.
			st.LeaderId, st.LeaderAddress, st.Term = n.Id, n.ClientAddress, top
		}
	}
	return stale
}

type statusOut struct {
	Group         string     `json:"group"`
	GroupID       string     `json:"group_id"`
	Term          uint64     `json:"term"`
	LeaderID      string     `json:"leader_id"`
	LeaderAddress string     `json:"leader_address"`
	AnsweredBy    string     `json:"answered_by"`
	LeaderChanges uint64     `json:"leader_changes"`
	Nodes         []nodeJSON `json:"nodes"`
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func statusJSON(st *api.StatusResponse) statusOut {
	stale := settleLeader(st)
	out := statusOut{Group: st.Group, GroupID: st.GroupId, Term: st.Term, LeaderID: st.LeaderId, LeaderAddress: st.LeaderAddress,
		AnsweredBy: st.AnsweredBy, LeaderChanges: st.LeaderChanges, Nodes: []nodeJSON{}}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, nodeJSON{ID: n.Id, Role: n.Role, RaftAddress: n.RaftAddress, ClientAddress: n.ClientAddress,
			HTTPAddress: n.HttpAddress, AppliedIndex: n.AppliedIndex, CommitIndex: n.CommitIndex, LastIndex: n.LastIndex,
			FirstIndex: n.FirstIndex, Healthy: n.Healthy, Voter: n.Voter, Term: n.Term, Load: n.Load, Lag: n.Lag, Error: n.Error,
			Damaged: n.Damaged, DamagedIndex: n.DamagedIndex, DamagedReason: n.DamagedReason, Stale: stale[n.Id],
			ServedAsLeader: n.ServedAsLeader, ServedAsFollower: n.ServedAsFollower})
	}
	return out
}

func printJSON(w io.Writer, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
		v = []any{} // an empty list is [], never null
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func topicCommand() *cli.Command {
	return &cli.Command{
		Name:  "topic",
		Usage: "create, list, describe, update and delete topics",
		Subcommands: []*cli.Command{
			topicDeleteCommand(),
			topicUpdateCommand(),
			{
				Name:      "create",
				Usage:     "create a topic",
				ArgsUsage: "NAME",
				Flags: clientFlags(&cli.IntFlag{Name: "queues", Value: 4, Usage: "number of queues (1..1024; with --namesrv: in all, spread over the groups)"},
					&cli.BoolFlag{Name: "if-not-exists", Usage: "succeed when the topic exists with the same queue count"},
					namesrvFlag(), jsonFlag(),
					&cli.StringFlag{Name: "groups", Usage: "with --namesrv: create on these groups, G1,G2 (default: every group with a leader)"}),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError(c, "want exactly one NAME")
					}
					if q := c.Int("queues"); q < 1 || q > 1024 {
						return fmt.Errorf("--queues %d: want 1..1024", q)
					}
					if ok, err := viaNamesrv(c); err != nil || ok {
						if err != nil {
							return err
						}
						return runTopicCreateCluster(c)
					}
					if c.String("groups") != "" {
						return usageError(c, "--groups picks groups of a cluster: it needs --namesrv")
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						name, queues := c.Args().First(), int32(c.Int("queues"))
						if c.Bool("if-not-exists") {
							if ti, err := cl.DescribeTopic(ctx, name); err == nil && ti.Queues == queues {
								fmt.Fprintf(c.App.Writer, "topic %s exists with %s\n", ti.Name, plural(int(ti.Queues), "queue"))
								return nil
							}
						}
						ti, err := cl.CreateTopic(ctx, name, queues, c.Bool("if-not-exists"))
						if err != nil {
							return clean(err)
						}
						if c.Bool("json") {
							return printJSON(c.App.Writer, topicsJSON([]*api.TopicInfo{ti})[0])
						}
						fmt.Fprintf(c.App.Writer, "created topic %s with %s\n", ti.Name, plural(int(ti.Queues), "queue"))
						return nil
					})
				},
			},
			{
				Name:  "list",
				Usage: "list topics (with --namesrv: every group's, one row per topic and group)",
				Flags: clientFlags(jsonFlag(), namesrvFlag()),
				Action: func(c *cli.Context) error {
					if ok, err := viaNamesrv(c); err != nil || ok {
						if err != nil {
							return err
						}
						return runTopicListCluster(c)
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						ts, err := cl.ListTopics(ctx)
						if err != nil {
							return clean(err)
						}
						if c.Bool("json") {
							return printJSON(c.App.Writer, topicsJSON(ts))
						}
						w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
						fmt.Fprintln(w, "TOPIC\tQUEUES\tMESSAGES\tPERM")
						for _, t := range ts {
							var n uint64
							for _, q := range t.QueueInfo {
								n += q.MaxOffset - q.MinOffset
							}
							fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", t.Name, t.Queues, n, permName(t.Perm))
						}
						return w.Flush()
					})
				},
			},
			{
				Name:      "describe",
				Usage:     "show a topic's queues with their min and max offsets (with --namesrv: of every group that holds it)",
				ArgsUsage: "NAME",
				Flags:     clientFlags(jsonFlag(), namesrvFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError(c, "want exactly one NAME")
					}
					if ok, err := viaNamesrv(c); err != nil || ok {
						if err != nil {
							return err
						}
						return runTopicDescribeCluster(c)
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						t, err := cl.DescribeTopic(ctx, c.Args().First())
						if err != nil {
							return clean(err)
						}
						if c.Bool("json") {
							return printJSON(c.App.Writer, topicsJSON([]*api.TopicInfo{t})[0])
						}
						w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
						fmt.Fprintf(w, "topic %s, %d queues, perm %s\n", t.Name, t.Queues, permName(t.Perm))
						fmt.Fprintln(w, "QUEUE\tMIN\tMAX")
						for _, q := range t.QueueInfo {
							fmt.Fprintf(w, "%d\t%d\t%d\n", q.Queue, q.MinOffset, q.MaxOffset)
						}
						return w.Flush()
					})
				},
			},
		},
	}
}

type queueJSON struct {
	Queue     int32  `json:"queue"`
	MinOffset uint64 `json:"min_offset"`
	MaxOffset uint64 `json:"max_offset"`
}

type topicJSON struct {
	Name   string      `json:"name"`
	Queues []queueJSON `json:"queues"`
	Perm   uint32      `json:"perm"`
}

func topicsJSON(ts []*api.TopicInfo) []topicJSON {
	out := []topicJSON{}
	for _, t := range ts {
		tj := topicJSON{Name: t.Name, Queues: []queueJSON{}, Perm: t.Perm}
		for _, q := range t.QueueInfo {
			tj.Queues = append(tj.Queues, queueJSON{q.Queue, q.MinOffset, q.MaxOffset})
		}
		out = append(out, tj)
	}
	return out
}

func withClient(c *cli.Context, f func(context.Context, *client.Client) error) error {
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := opCtx(c)
	defer cancel()
	return f(ctx, cl)
}

func produceCommand() *cli.Command {
	return &cli.Command{
		Name:      "produce",
		Usage:     "send messages: the arguments, or else one message per line of stdin",
		ArgsUsage: "[MESSAGE...]",
		Flags: clientFlags(
			&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "topic (required)"},
			&cli.StringFlag{Name: "key", Aliases: []string{"k"}, Usage: "message key: one key goes to one queue, in order"},
			&cli.StringFlag{Name: "tag", Usage: "message tag"},
			&cli.IntFlag{Name: "queue", Aliases: []string{"q"}, Value: -1, Usage: "explicit queue (default: by key hash, else round robin)"},
			&cli.StringSliceFlag{Name: "property", Aliases: []string{"p"}, Usage: "message property k=v (repeatable)"},
			&cli.IntFlag{Name: "batch", Value: 64, Usage: "stdin lines per request"},
			&cli.StringFlag{Name: "delimiter", Aliases: []string{"D"}, Value: `\n`, Usage: "what ends a message on stdin (escapes \\n \\t \\0 \\r understood), e.g. '\\0' for bodies with newlines"},
			&cli.StringFlag{Name: "key-separator", Aliases: []string{"K"}, Usage: "each message on stdin (or argument) is KEY, this separator, BODY; one without it is all body"},
			&cli.StringFlag{Name: "body-format", Value: "text", Usage: "how bodies are given: text (as is), base64 or hex (for binary bodies)"},
			&cli.IntFlag{Name: "inflight", Value: 8, Usage: "requests in flight"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json (one object per acknowledged message)"},
			delayFlags[0], delayFlags[1], delayFlags[2],
			txnFlags[0], txnFlags[1],
			namesrvFlag(),
		),
		Action: runProduce,
	}
}

type ackJSON struct {
	Topic     string `json:"topic"`
	Key       string `json:"key,omitempty"`
	Tag       string `json:"tag,omitempty"`
	Queue     int32  `json:"queue"`
	Offset    uint64 `json:"offset"`
	ID        string `json:"id"`
	Body      string `json:"body,omitempty"`
	DeliverAt string `json:"deliver_at,omitempty"` // RFC 3339; a delayed message's offset is assigned then
	// Transaction is produce --transaction's decision (commit, rollback,
	// unknown); the offset is 0: a committed message's is assigned at
	// commit.
	Transaction string `json:"transaction,omitempty"`
}

// unanswered is the error every message of a produce fails with, unsent,
// when its topic probe got no answer within --timeout (nil when it got
// one): the sends would only wait as long again for the same silence.
// Whether the probe's last attempt may have reached a node does not
// matter, the messages are not sent at all.
func unanswered(probeErr error) error {
	switch {
	case errors.Is(probeErr, client.ErrNoConnection):
		return probeErr
	case errors.Is(probeErr, context.DeadlineExceeded), status.Code(probeErr) == codes.DeadlineExceeded:
		return fmt.Errorf("%w: %w: %w", client.ErrNotSent, client.ErrNoConnection, probeErr)
	}
	return nil
}

func runProduce(c *cli.Context) error {
	topic := c.String("topic")
	if topic == "" {
		return usageError(c, "produce: --topic is required")
	}
	format := c.String("format")
	if format != "text" && format != "json" {
		return fmt.Errorf("--format %q: want text or json", format)
	}
	props := map[string]string{}
	for _, p := range c.StringSlice("property") {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return fmt.Errorf("--property %q: want k=v", p)
		}
		props[k] = v
	}
	if len(props) == 0 {
		props = nil
	}
	var queue *int32
	if q := c.Int("queue"); q >= 0 {
		q32 := int32(q)
		queue = &q32
	}
	batchSize, inflight := max(c.Int("batch"), 1), max(c.Int("inflight"), 1)
	delim := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\r`, "\r", `\0`, "\x00", `\\`, `\`).Replace(c.String("delimiter"))
	if delim == "" {
		return usageError(c, "--delimiter %q: want a non-empty string (escapes \\n \\t \\0 \\r understood)", c.String("delimiter"))
	}
	decode, err := bodyDecoder(c)
	if err != nil {
		return err
	}
	keySep := c.String("key-separator")
	if keySep != "" && c.IsSet("key") {
		return usageError(c, "--key and --key-separator: give the key once, in the flag or in the input")
	}
	delay, err := parseDelayFlags(c)
	if err != nil {
		return err
	}
	txn, err := parseTxnFlags(c, delay)
	if err != nil {
		return err
	}
	if ok, err := viaNamesrv(c); err != nil {
		return err
	} else if ok {
		if txn != nil {
			return usageError(c, "--transaction is not built with --namesrv yet: produce through one group's nodes (-s) for it")
		}
		for _, f := range []string{"delimiter", "key-separator", "body-format"} {
			if c.IsSet(f) {
				return usageError(c, "--%s is not built with --namesrv yet: produce through one group's nodes (-s) for it", f)
			}
		}
		return runProduceCluster(c, topic, format, props, delay)
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cl.NewProducer()
	var tp *client.TransactionProducer
	if txn != nil {
		if tp, err = newTxnProducer(cl, txn); err != nil {
			return err
		}
		defer tp.Close()
	}
	// A topic that does not exist is created by the first send when the
	// servers auto-create topics (their default, as RocketMQ's brokers'):
	// say so, or a misspelt name goes unnoticed.
	dctx, dcancel := opCtx(c)
	_, derr := cl.DescribeTopic(dctx, topic)
	dcancel()
	missing := status.Code(derr) == codes.NotFound
	noNode := unanswered(derr)

	// The input is read in batches numbered by their first line (or
	// argument); reading stops at the interrupt, and no batch is sent
	// after it.
	type batch struct {
		first int // 1-based number of the first line
		lines []string
	}
	batches := make(chan batch)
	var scanErr error // set before batches is closed
	go func() {
		defer close(batches)
		if c.NArg() > 0 {
			select {
			case batches <- batch{1, c.Args().Slice()}:
			case <-c.Context.Done():
			}
			return
		}
		sc := bufio.NewScanner(c.App.Reader)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		if delim != "\n" {
			sc.Split(splitOn(delim))
		}
		var cur []string
		n := 0
		hand := func() bool {
			select {
			case batches <- batch{n - len(cur) + 1, cur}:
				cur = nil
				return true
			case <-c.Context.Done():
				return false
			}
		}
		for c.Context.Err() == nil && sc.Scan() {
			n++
			cur = append(cur, sc.Text())
			if len(cur) == batchSize && !hand() {
				return
			}
		}
		if len(cur) > 0 && c.Context.Err() == nil {
			hand()
		}
		if err := sc.Err(); err != nil {
			scanErr = fmt.Errorf("reading input stopped after line %d: %w", n, err)
		}
	}()
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		tally sendTally
		read  int  // lines handed to sending
		eof   bool // the reader is done (scanErr may be read)
	)
	sem := make(chan struct{}, inflight)
	out := bufio.NewWriter(c.App.Writer)
	send := func(b batch) {
		defer func() { <-sem; wg.Done() }()
		if noNode != nil {
			mu.Lock()
			tally.add(b.first, len(b.lines), noNode)
			mu.Unlock()
			return
		}
		msgs := make([]client.Message, len(b.lines))
		for i, l := range b.lines {
			key := c.String("key")
			if keySep != "" {
				if k, rest, ok := strings.Cut(l, keySep); ok {
					key, l = k, rest
				}
			}
			body, derr := decode(l)
			if derr != nil {
				mu.Lock()
				fmt.Fprintf(c.App.ErrWriter, "raftmq: message %d: %v; its request (messages %d..%d) is not sent\n", b.first+i, derr, b.first, b.first+len(b.lines)-1)
				tally.add(b.first, len(b.lines), fmt.Errorf("%w: message %d: %v", client.ErrNotSent, b.first+i, derr))
				mu.Unlock()
				return
			}
			msgs[i] = client.Message{Key: key, Tag: c.String("tag"), Properties: props, Body: body, Queue: queue}
			delay.apply(&msgs[i])
		}
		// The request itself gives up after --timeout (the client's
		// RetryTimeout) and then knows whether it ever reached a node;
		// waiting a moment longer for it turns "outcome unknown" into
		// "failed, not stored" when no node could be reached.
		ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout")+time.Second)
		defer cancel()
		if txn != nil {
			for i := range msgs {
				a, err := txn.send(ctx, tp, topic, msgs[i])
				mu.Lock()
				tally.add(b.first+i, 1, err)
				if err != nil && a != nil {
					fmt.Fprintf(c.App.ErrWriter, "raftmq: message %d: %v\n", b.first+i, clean(err))
				}
				if err == nil && format == "json" {
					j, _ := json.Marshal(ackJSON{Topic: topic, Key: msgs[i].Key, Tag: msgs[i].Tag, Queue: a.Queue, ID: a.Id, Body: b.lines[i], Transaction: txn.state.String()})
					out.Write(append(j, '\n'))
				} else if err == nil {
					fmt.Fprintf(out, "queue %d id %s %s\n", a.Queue, a.Id, txnDone(txn.state, a.Id))
				}
				mu.Unlock()
			}
			return
		}
		acks, err := p.Send(ctx, topic, msgs...)
		cancel()
		mu.Lock()
		defer mu.Unlock()
		tally.add(b.first, len(b.lines), err)
		for i, a := range acks {
			if format == "json" {
				j, _ := json.Marshal(ackJSON{Topic: topic, Key: msgs[i].Key, Tag: msgs[i].Tag, Queue: a.Queue, Offset: a.Offset, ID: a.Id, Body: b.lines[i], DeliverAt: ackDeliverAt(a)})
				out.Write(append(j, '\n'))
			} else if at := ackDeliverAt(a); at != "" {
				fmt.Fprintf(out, "queue %d id %s deliver-at %s (offset assigned at delivery)\n", a.Queue, a.Id, at)
			} else {
				fmt.Fprintf(out, "queue %d offset %d id %s\n", a.Queue, a.Offset, a.Id)
			}
		}
	}
loop:
	for {
		var b batch
		var ok bool
		select {
		case b, ok = <-batches:
			if !ok {
				eof = true
				break loop
			}
		case <-c.Context.Done():
			break loop
		}
		read = b.first + len(b.lines) - 1
		select {
		case sem <- struct{}{}:
		case <-c.Context.Done():
		}
		if c.Context.Err() != nil { // interrupted: this batch is never sent
			mu.Lock()
			tally.add(b.first, len(b.lines), fmt.Errorf("%w: interrupted", client.ErrNotSent))
			mu.Unlock()
			break loop
		}
		wg.Add(1)
		go send(b)
	}
	wg.Wait()
	out.Flush()
	noun := "lines"
	if c.NArg() > 0 {
		noun = "arguments"
	}
	var notes []string
	if eof && scanErr != nil {
		notes = append(notes, scanErr.Error())
	}
	if c.Context.Err() != nil {
		notes = append(notes, fmt.Sprintf("interrupted: read %s up to %d; the input after it was not sent", noun, read))
	}
	if missing && tally.acked > 0 {
		fmt.Fprintf(c.App.ErrWriter, "raftmq: produce: topic %s did not exist; the servers created it (they auto-create topics: server --auto-create-topics=false refuses such sends)\n", topic)
	}
	return tally.report(c.App.ErrWriter, "produce", noun, notes)
}

func consumeCommand() *cli.Command {
	return &cli.Command{
		Name:  "consume",
		Usage: "read messages of a topic, as a reader or as a member of a consumer group",
		Description: "Without --group it is a reader: it reads every queue (or --queue) from --offset and commits\n" +
			"nothing, so running it twice shows the same messages twice. With --group it reads the queues\n" +
			"the group assigns it from the group's committed offsets and commits as it goes and on exit.\n" +
			"Without --follow it exits once it has read up to the end every queue had when it started\n" +
			"(or after --max messages); with --follow it keeps reading until interrupted. A reader started\n" +
			"with --offset end waits for new messages: it exits after --max of them, or once none has come\n" +
			"for --timeout.",
		Flags: append(clientFlags(
			&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "topic (required)"},
			&cli.StringFlag{Name: "group", Aliases: []string{"g"}, Usage: "consumer group (default: none, read without committing)"},
			&cli.StringFlag{Name: "offset", Aliases: []string{"o"}, Usage: "where a reader starts each queue: start, end, N (that offset), +N (N after the start), -N (N before the end) or @TIME, the first message stored at or after it (@2026-12-04T10:00:00Z, @-10m, @<unix ms>) (default: --from)"},
			&cli.StringFlag{Name: "from", Value: "earliest", Usage: "where a queue without a committed offset starts: earliest or latest"},
			&cli.IntFlag{Name: "max", Aliases: []string{"n", "count"}, Usage: "stop after this many messages (0: no limit)"},
			bodyFormatFlag(),
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "keep consuming until interrupted"},
			&cli.BoolFlag{Name: "follower-reads", Value: true, Usage: "follow the broker's suggestion of which node to pull from"},
			&cli.IntSliceFlag{Name: "queue", Aliases: []string{"q"}, Usage: "read only this queue (repeatable); with --group, outside the group's assignment"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json (one object per message, with the node that served it and the reason of the routing suggestion)"},
			&cli.StringFlag{Name: "tag", Usage: "serve only messages with these tags: 'TagA || TagB' (default: all)"},
			&cli.StringFlag{Name: "sql", Usage: "serve only messages whose properties match this SQL92 expression, e.g. \"a > 5 AND TAGS = 'x'\""},
			&cli.BoolFlag{Name: "broadcast", Usage: "read every message of the topic whatever the group's other members read, with this member's own offsets"},
			&cli.StringFlag{Name: "member", Usage: "member id in the group (default: HOST@PID); give the same one again to resume a broadcasting member's offsets"},
		), append(pushConsumeFlags(), namesrvFlag())...),
		Action: runConsume,
	}
}

type msgJSON struct {
	Topic      string            `json:"topic"`
	Queue      int32             `json:"queue"`
	Offset     uint64            `json:"offset"`
	ID         string            `json:"id"`
	Key        string            `json:"key,omitempty"`
	Tag        string            `json:"tag,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Body       string            `json:"body"`
	// BodyEncoding is base64 or hex when Body is encoded (--body-format,
	// or a body that is not valid UTF-8); empty: Body is the text.
	BodyEncoding string `json:"body_encoding,omitempty"`
	Timestamp    int64  `json:"timestamp_ms"`
	Node         string `json:"node"`            // the node that served it
	Group        string `json:"group,omitempty"` // its group, when found through the name servers
	// Next and Reason: where the broker sent the next pull of this queue,
	// and why (the enum of /metrics raftmq_pull_suggestions_total{reason}).
	Next   string `json:"next_node,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func runConsume(c *cli.Context) error {
	topic := c.String("topic")
	if topic == "" {
		return usageError(c, "consume: --topic is required")
	}
	format := c.String("format")
	if format != "text" && format != "json" {
		return fmt.Errorf("--format %q: want text or json", format)
	}
	if ok, err := viaNamesrv(c); err != nil {
		return err
	} else if ok {
		return runConsumeCluster(c, topic, format)
	}
	if pushMode(c) {
		return runPushConsume(c, topic, format)
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	cfg := client.DefaultConsumerConfig(topic, c.String("group"))
	cfg.From = c.String("from")
	cfg.FollowerReads = c.Bool("follower-reads")
	for _, q := range c.IntSlice("queue") {
		cfg.Queues = append(cfg.Queues, int32(q))
	}
	encode, err := bodyEncoder(c)
	if err != nil {
		return err
	}
	if c.IsSet("offset") {
		if cfg.Group != "" {
			return usageError(c, "--offset positions a reader (no --group); a group resumes at its committed offsets: move them with 'raftmq group reset'")
		}
		ctx, cancel := opCtx(c)
		defer cancel()
		if spec, ok := strings.CutPrefix(c.String("offset"), "@"); ok {
			at, err := parseWhen(spec, time.Now())
			if err != nil {
				return usageError(c, "--offset @%s: %v", spec, err)
			}
			offs, err := cl.SearchOffsets(ctx, topic, at, cfg.Queues)
			if err != nil {
				return clean(err)
			}
			cfg.Start = map[int32]uint64{}
			for _, o := range offs {
				cfg.Start[o.Queue] = o.Offset
			}
		} else {
			ti, err := cl.DescribeTopic(ctx, topic)
			if err != nil {
				return clean(err)
			}
			if cfg.Start, err = startOffsets(c.String("offset"), ti, cfg.Queues); err != nil {
				return usageError(c, "%v", err)
			}
		}
	}
	if !c.Bool("follow") {
		cfg.Wait = 200 * time.Millisecond
	}
	if err := consumeOptions(c, &cfg); err != nil {
		return err
	}
	cfg.OnSkipped = func(q int32, from, to uint64) {
		fmt.Fprintf(c.App.ErrWriter, "raftmq: queue %d: offsets %d..%d were deleted by retention before they were read; continuing at %d\n", q, from, to-1, to)
	}
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		return err
	}
	var end map[int32]uint64
	// A reader that starts at the end is there for what comes next (as
	// `kcat -o end`): it waits for new messages until --max, or until none
	// came for --timeout, instead of stopping at the end it started from.
	atEnd := c.String("group") == "" && (c.String("offset") == "end" || c.String("offset") == "latest")
	if !c.Bool("follow") && !atEnd {
		ctx, cancel := opCtx(c)
		ti, err := cl.DescribeTopic(ctx, topic)
		cancel()
		if err != nil {
			return clean(err)
		}
		end = map[int32]uint64{}
		for _, q := range ti.QueueInfo {
			end[q.Queue] = q.MaxOffset
		}
	}
	out := bufio.NewWriter(c.App.Writer)
	defer out.Flush()
	limit, n := c.Int("max"), 0
	ctx := c.Context
	var runErr error
	idle := time.Now()
	for ctx.Err() == nil && (limit == 0 || n < limit) {
		recs, err := cons.Poll(ctx)
		if err != nil && ctx.Err() == nil {
			if !client.Retryable(err) {
				runErr = clean(err)
				break
			}
			if time.Since(idle) > c.Duration("timeout") {
				runErr = fmt.Errorf("no progress for %s: %w", c.Duration("timeout"), clean(err))
				break
			}
			continue
		}
		if len(recs) > 0 {
			idle = time.Now()
		}
		sort.SliceStable(recs, func(i, j int) bool {
			if recs[i].Queue != recs[j].Queue {
				return recs[i].Queue < recs[j].Queue
			}
			return recs[i].Offset < recs[j].Offset
		})
		for _, r := range recs {
			if limit > 0 && n >= limit {
				// Not printed: rewind so that the group does not commit it.
				cons.Seek(r.Queue, r.Offset)
				continue
			}
			n++
			if format == "json" {
				body, enc := jsonBody(c, r.Body)
				b, _ := json.Marshal(msgJSON{Topic: r.Topic, Queue: r.Queue, Offset: r.Offset, ID: r.Id, Key: r.Key, Tag: r.Tag,
					Properties: r.Properties, Body: body, BodyEncoding: enc, Timestamp: r.TimestampMs, Node: r.ServedBy, Next: r.Next, Reason: r.Reason})
				out.Write(append(b, '\n'))
			} else {
				fmt.Fprintf(out, "%d:%d\t%s\n", r.Queue, r.Offset, encode(r.Body))
			}
		}
		out.Flush()
		if end != nil && cons.CaughtUp(end) {
			break
		}
		if atEnd && !c.Bool("follow") && time.Since(idle) > c.Duration("timeout") {
			break
		}
		if end != nil && len(cons.Assigned()) == 0 && time.Since(idle) > 5*time.Second {
			runErr = errors.New("no queues assigned to this consumer: the group's other members hold them all")
			break
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cons.Close(cctx); err != nil && runErr == nil {
		runErr = clean(err)
	}
	return runErr
}

func leaderCommand() *cli.Command {
	return &cli.Command{
		Name:  "leader",
		Usage: "leadership operations",
		Subcommands: []*cli.Command{{
			Name:  "transfer",
			Usage: "move leadership to another node (default: the most caught-up follower)",
			Flags: clientFlags(&cli.StringFlag{Name: "to", Usage: "node id of the new leader"}, jsonFlag()),
			Action: func(c *cli.Context) error {
				return withClient(c, func(ctx context.Context, cl *client.Client) error {
					r, err := cl.TransferLeader(ctx, c.String("to"))
					if err != nil {
						return clean(err)
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, struct {
							Leader string  `json:"leader_id"`
							TookMs float64 `json:"took_ms"`
						}{r.LeaderId, float64(r.TookUs) / 1000})
					}
					fmt.Fprintf(c.App.Writer, "leader is now %s (transfer took %.1f ms)\n", r.LeaderId, float64(r.TookUs)/1000)
					return nil
				})
			},
		}},
	}
}

func memberCommand() *cli.Command {
	return &cli.Command{
		Name:  "member",
		Usage: "add or remove nodes of the group",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a node (started with --join) as a non-voter and promote it once caught up; a node that holds a log of its own is refused",
				ArgsUsage: "ID@RAFTADDR",
				Flags:     clientFlags(),
				Action: func(c *cli.Context) error {
					id, addr, ok := strings.Cut(c.Args().First(), "@")
					if c.NArg() != 1 || !ok || id == "" || addr == "" {
						return usageError(c, "want exactly one ID@RAFTADDR")
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						r, err := cl.AddMember(ctx, id, addr)
						if err != nil {
							return clean(err)
						}
						fmt.Fprintf(c.App.Writer, "%s added (voter: %v)\n", id, r.Voter)
						return nil
					})
				},
			},
			{
				Name:      "remove",
				Usage:     "remove a node from the group",
				ArgsUsage: "ID",
				Flags:     clientFlags(&cli.BoolFlag{Name: "force", Usage: "remove even the leader, or below a fault-tolerant quorum"}),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError(c, "want exactly one ID")
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						if err := cl.RemoveMember(ctx, c.Args().First(), c.Bool("force")); err != nil {
							return clean(err)
						}
						fmt.Fprintf(c.App.Writer, "%s removed\n", c.Args().First())
						return nil
					})
				},
			},
		},
	}
}

// groupOut is group describe --json: every field, zero values included.
type groupOut struct {
	Group             string           `json:"group"`
	Generation        uint64           `json:"generation"`
	Members           []groupMemberOut `json:"members"`
	Queues            []groupQueueOut  `json:"queues"`
	MaxReconsumeTimes int32            `json:"max_reconsume_times"`
	Broadcast         bool             `json:"broadcast"`
}

type groupMemberOut struct {
	ID         string             `json:"member_id"`
	Queues     map[string][]int32 `json:"queues"` // topic -> queues
	LastSeenMs int64              `json:"last_seen_ms"`
}

type groupQueueOut struct {
	Topic     string `json:"topic"`
	Queue     int32  `json:"queue"`
	Committed int64  `json:"committed"` // -1: none
	MaxOffset uint64 `json:"max_offset"`
	Lag       uint64 `json:"lag"`
	Member    string `json:"member_id"`
}

func groupJSON(g *api.DescribeGroupResponse) groupOut {
	out := groupOut{Group: g.Group, Generation: g.Generation, Members: []groupMemberOut{}, Queues: []groupQueueOut{},
		MaxReconsumeTimes: g.GetSettings().GetMaxReconsumeTimes(), Broadcast: g.GetSettings().GetBroadcast()}
	for _, m := range g.Members {
		mo := groupMemberOut{ID: m.MemberId, LastSeenMs: m.LastSeenMs, Queues: map[string][]int32{}}
		for _, a := range m.Assignments {
			mo.Queues[a.Topic] = append(mo.Queues[a.Topic], a.Queues...)
		}
		out.Members = append(out.Members, mo)
	}
	for _, q := range g.Queues {
		out.Queues = append(out.Queues, groupQueueOut{Topic: q.Topic, Queue: q.Queue, Committed: q.Committed, MaxOffset: q.MaxOffset, Lag: q.Lag, Member: q.MemberId})
	}
	return out
}

// consumerGroupRow is a consumer group as group list shows it.
type consumerGroupRow struct {
	Group   string   `json:"group"`
	Members int      `json:"members"`
	Topics  []string `json:"topics"`
	Lag     int64    `json:"lag"`
}

// consumerGroupRows lists the consumer groups cl's group knows, each with
// its members, topics and total lag (-1: it vanished while listed).
func consumerGroupRows(ctx context.Context, cl *client.Client) ([]consumerGroupRow, error) {
	gs, err := cl.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	rows := []consumerGroupRow{}
	for _, name := range gs {
		r := consumerGroupRow{Group: name, Topics: []string{}}
		if g, err := cl.DescribeGroup(ctx, name); err == nil {
			r.Members = len(g.Members)
			r.Topics = append(r.Topics, groupTopics(g)...)
			for _, q := range g.Queues {
				r.Lag += int64(q.Lag)
			}
		} else {
			r.Lag = -1
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func groupCommand() *cli.Command {
	return &cli.Command{
		Name:  "group",
		Usage: "list, describe, reset, update and delete consumer groups",
		Subcommands: []*cli.Command{
			groupUpdateCommand(),
			groupDeleteCommand(),
			{
				Name:  "list",
				Usage: "list consumer groups with their members and total lag (with --namesrv: every group's, one row per consumer group and group)",
				Flags: clientFlags(jsonFlag(), namesrvFlag()),
				Action: func(c *cli.Context) error {
					if ok, err := viaNamesrv(c); err != nil || ok {
						if err != nil {
							return err
						}
						return runGroupListCluster(c)
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						rows, err := consumerGroupRows(ctx, cl)
						if err != nil {
							return clean(err)
						}
						if c.Bool("json") {
							return printJSON(c.App.Writer, rows)
						}
						w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
						fmt.Fprintln(w, "GROUP\tMEMBERS\tLAG\tTOPICS")
						for _, r := range rows {
							fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", r.Group, r.Members, r.Lag, strings.Join(r.Topics, ","))
						}
						return w.Flush()
					})
				},
			},
			{
				Name:      "describe",
				Usage:     "show a group's members, assigned queues, committed offsets and lag (with --namesrv: on every broker group that knows it)",
				ArgsUsage: "GROUP",
				Flags:     clientFlags(jsonFlag(), namesrvFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError(c, "want exactly one GROUP")
					}
					if ok, err := viaNamesrv(c); err != nil || ok {
						if err != nil {
							return err
						}
						return runGroupDescribeCluster(c)
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						g, err := cl.DescribeGroup(ctx, c.Args().First())
						if err != nil {
							return clean(err)
						}
						if c.Bool("json") {
							return printJSON(c.App.Writer, groupJSON(g))
						}
						w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
						fmt.Fprintf(w, "group %s, generation %d (term %d), %d member(s)%s\n", g.Group, g.Generation&0xffffffff, g.Generation>>32, len(g.Members), broadcastNote(g.GetSettings().GetBroadcast()))
						fmt.Fprintf(w, "max reconsume times %d\n", g.GetSettings().GetMaxReconsumeTimes())
						fmt.Fprintln(w, "TOPIC\tQUEUE\tCOMMITTED\tMAX\tLAG\tMEMBER")
						for _, q := range g.Queues {
							fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%s\n", q.Topic, q.Queue, committedCell(q.Committed), q.MaxOffset, q.Lag, q.MemberId)
						}
						return w.Flush()
					})
				},
			},
			{
				Name:      "reset",
				Usage:     "move a group's offsets (only while it has no members; with --namesrv: on every group that holds the topic)",
				ArgsUsage: "GROUP",
				Description: "With --namesrv (and no --broker-name) the reset runs on every group that holds the topic, one\n" +
					"after the other, each group's offsets under a \"group G:\" line; a group that refuses (members still\n" +
					"connected there) is reported, the others are still reset, and the command exits 1. --dry-run first\n" +
					"shows what every group would do.",
				Flags: clientFlags(&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "topic (default: the one topic the group has offsets of)"},
					&cli.StringFlag{Name: "to", Value: "earliest", Usage: "earliest, latest, an offset, or @TIME: the first message stored at or after it (@2026-12-04T10:00:00Z, @-1h for an hour ago, @<unix ms>)"},
					&cli.IntSliceFlag{Name: "queue", Aliases: []string{"q"}, Usage: "reset only this queue (repeatable; default: every queue)"},
					&cli.BoolFlag{Name: "dry-run", Usage: "show the offsets the reset would set and change nothing"},
					namesrvFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError(c, "want exactly one GROUP")
					}
					all, err := viaNamesrv(c)
					if err != nil {
						return err
					}
					if all && len(c.IntSlice("queue")) > 0 {
						return usageError(c, "--queue numbers one group's queues: name the group with --broker-name")
					}
					topic := c.String("topic")
					if topic == "" && !all {
						// A group that reads one topic needs no --topic.
						var err error
						if topic, err = groupsOnlyTopic(c, c.Args().First()); err != nil {
							return err
						}
					}
					to := c.String("to")
					if spec, ok := strings.CutPrefix(to, "@"); ok {
						t, err := parseWhen(spec, time.Now())
						if err != nil {
							return usageError(c, "--to %s: %v", to, err)
						}
						to = "@" + strconv.FormatInt(t.UnixMilli(), 10)
					}
					req := &api.ResetGroupRequest{Group: c.Args().First(), Topic: topic, To: to, DryRun: c.Bool("dry-run")}
					for _, q := range c.IntSlice("queue") {
						req.Queues = append(req.Queues, int32(q))
					}
					return onGroups(c, resetGroups(c, req), func(ctx context.Context, _ string, cl *client.Client) error {
						return resetGroupOn(ctx, c.App.Writer, cl, req)
					})
				},
			},
		},
	}
}

// resetGroupOn runs req on cl's group and prints the offsets it set (or,
// for a dry run, would set, from the committed ones).
func resetGroupOn(ctx context.Context, w io.Writer, cl *client.Client, req *api.ResetGroupRequest) error {
	var before map[int32]int64
	if req.DryRun {
		if g, err := cl.DescribeGroup(ctx, req.Group); err == nil {
			before = map[int32]int64{}
			for _, q := range g.Queues {
				if q.Topic == req.Topic {
					before[q.Queue] = q.Committed
				}
			}
		}
	}
	offs, err := cl.ResetGroup(ctx, req)
	if err != nil {
		return err
	}
	for _, o := range offs {
		if req.DryRun {
			from := "none"
			if b, ok := before[o.Queue]; ok && b >= 0 {
				from = strconv.FormatInt(b, 10)
			}
			fmt.Fprintf(w, "%s queue %d: %s -> %d (dry run: not changed)\n", o.Topic, o.Queue, from, o.Offset)
			continue
		}
		fmt.Fprintf(w, "%s queue %d -> %d\n", o.Topic, o.Queue, o.Offset)
	}
	return nil
}

// groupsOnlyTopic is the topic of a group that has offsets of exactly one;
// otherwise a usage error naming them.
func groupsOnlyTopic(c *cli.Context, group string) (string, error) {
	var topics []string
	err := withClient(c, func(ctx context.Context, cl *client.Client) error {
		g, err := cl.DescribeGroup(ctx, group)
		if err != nil {
			return clean(err)
		}
		topics = groupTopics(g)
		return nil
	})
	if err != nil {
		return "", err
	}
	return onlyTopic(c, group, topics)
}

// onlyTopic is the one topic of topics (a consumer group's, without
// repeats); otherwise a usage error naming them.
func onlyTopic(c *cli.Context, group string, topics []string) (string, error) {
	switch len(topics) {
	case 1:
		return topics[0], nil
	case 0:
		return "", usageError(c, "group %s has no offsets of any topic: give --topic", group)
	}
	sort.Strings(topics)
	return "", usageError(c, "group %s reads %s: give --topic", group, strings.Join(topics, ", "))
}

// committedCell is how a table shows a committed offset (-1: none yet).
func committedCell(committed int64) string {
	if committed < 0 {
		return "-"
	}
	return strconv.FormatInt(committed, 10)
}

// groupTopics are the topics of a group's queues, in the order they come.
func groupTopics(g *api.DescribeGroupResponse) []string {
	var topics []string
	seen := map[string]bool{}
	for _, q := range g.Queues {
		if !seen[q.Topic] {
			seen[q.Topic] = true
			topics = append(topics, q.Topic)
		}
	}
	return topics
}
