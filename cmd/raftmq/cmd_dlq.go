package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
	"github.com/raftmq/raftmq/mq"
)

func dlqCommand() *cli.Command {
	return &cli.Command{
		Name:  "dlq",
		Usage: "list, show and resend a consumer group's dead letters (%DLQ%<group>)",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list a group's dead letters: id, original topic, reconsume count, reason, born time",
				ArgsUsage: "GROUP",
				Description: "With --namesrv (and no --broker-name): every group's, each under a \"group G:\" line (in JSON,\n" +
					"each dead letter's \"group\").",
				Flags: clientFlags(formatFlag(), &cli.IntFlag{Name: "max", Aliases: []string{"n"}, Usage: "list at most this many (0: all; per group)"}, everyGroupFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageError(c, "want exactly one GROUP")
					}
					format, err := checkFormat(c)
					if err != nil {
						return err
					}
					return onGroups(c, nil, func(ctx context.Context, group string, cl *client.Client) error {
						msgs, err := cl.ListDeadLetters(ctx, c.Args().First(), c.Int("max"))
						if err != nil {
							return err
						}
						if format == "json" {
							for _, m := range msgs {
								d := deadLetterJSON(c, m)
								d.Group = group
								if err := printJSON(c.App.Writer, d); err != nil {
									return err
								}
							}
							return nil
						}
						w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
						fmt.Fprintln(w, "ID\tTOPIC\tRECONSUMED\tBORN\tREASON")
						for _, m := range msgs {
							d := deadLetterJSON(c, m)
							fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", d.ID, d.Topic, d.Reconsumed, time.UnixMilli(d.Timestamp).UTC().Format(time.RFC3339), d.Reason)
						}
						if err := w.Flush(); err != nil {
							return err
						}
						if len(msgs) == 0 {
							fmt.Fprintf(c.App.ErrWriter, "group %s has no dead letters\n", c.Args().First())
						}
						return nil
					})
				},
			},
			{
				Name:      "show",
				Usage:     "show one dead letter of a group",
				ArgsUsage: "GROUP ID",
				Description: "With --namesrv (and no --broker-name) every group is asked: an id is a group's own, so each\n" +
					"group that holds a dead letter of GROUP under it shows it, under a \"group G:\" line.",
				Flags: clientFlags(formatFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return usageError(c, "want GROUP and ID")
					}
					format, err := checkFormat(c)
					if err != nil {
						return err
					}
					group, id := c.Args().Get(0), c.Args().Get(1)
					if all, err := viaNamesrv(c); err != nil {
						return err
					} else if all {
						return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
							l, err := lookupEveryGroup(ctx, c, cl, id, deadLetterOf(group))
							if err != nil {
								return err
							}
							if len(l.hits) == 0 {
								return l.none(id, "a dead letter of consumer group "+group+" with id")
							}
							return showHits(c, format, l.hits)
						})
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						r, err := cl.LookupMessage(ctx, id)
						if err != nil {
							return clean(err)
						}
						if r.Message.Topic != mq.DeadLetterTopic(group) {
							return fmt.Errorf("message %s is in topic %s, not a dead letter of group %s", id, r.Message.Topic, group)
						}
						if format == "json" {
							return printJSON(c.App.Writer, shownJSON(c, r.Message, r.ServedBy))
						}
						printMessage(c.App.Writer, r.Message)
						fmt.Fprintf(c.App.Writer, "served by   %s\n", r.ServedBy)
						return nil
					})
				},
			},
			{
				Name:      "resend",
				Usage:     "send dead letters back to their original topic, with the retry properties cleared",
				ArgsUsage: "GROUP ID...",
				Description: "With --namesrv (and no --broker-name) each id is looked up on every group and resent on the\n" +
					"one that holds a dead letter of GROUP under it (an id is a group's own; when several do, name\n" +
					"the group with --broker-name).",
				Flags: clientFlags(formatFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() < 2 {
						return usageError(c, "want GROUP and at least one ID")
					}
					format, err := checkFormat(c)
					if err != nil {
						return err
					}
					group, ids := c.Args().First(), c.Args().Slice()[1:]
					all, err := viaNamesrv(c)
					if err != nil {
						return err
					}
					// resend resends each id on the group its client reaches, and
					// reports how many failed.
					resend := func(ctx context.Context, clientOf func(ctx context.Context, id string) (string, *client.Client, error)) error {
						var failed int
						for _, id := range ids {
							g, cl, err := clientOf(ctx, id)
							var r *api.ResendDeadLetterResponse
							if err == nil {
								r, err = cl.ResendDeadLetter(ctx, group, id)
							}
							if err != nil {
								failed++
								fmt.Fprintf(c.App.ErrWriter, "raftmq: resend %s: %v\n", id, clean(err))
								continue
							}
							printResent(c, format, g, id, r)
						}
						if failed > 0 {
							return fmt.Errorf("%d of %d dead letters not resent", failed, len(ids))
						}
						return nil
					}
					if all {
						return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
							return resend(ctx, func(ctx context.Context, id string) (string, *client.Client, error) {
								l, err := lookupEveryGroup(ctx, c, cl, id, deadLetterOf(group))
								if err != nil {
									return "", nil, err
								}
								h, err := l.only(id, "a dead letter of consumer group "+group+" with id")
								return h.group, h.cl, err
							})
						})
					}
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						return resend(ctx, func(context.Context, string) (string, *client.Client, error) { return "", cl, nil })
					})
				},
			},
		},
	}
}

// deadLetterOf accepts the dead letters of consumer group group.
func deadLetterOf(group string) func(*api.Message) bool {
	return func(m *api.Message) bool { return m.Topic == mq.DeadLetterTopic(group) }
}

// printResent reports dead letter id resent as r (group: its group, when
// found through the name servers).
func printResent(c *cli.Context, format, group, id string, r *api.ResendDeadLetterResponse) {
	if format == "json" {
		out := map[string]any{"dead_letter": id, "topic": r.Topic, "id": r.Ack.Id, "queue": r.Ack.Queue, "offset": r.Ack.Offset}
		if group != "" {
			out["group"] = group
		}
		printJSON(c.App.Writer, out)
		return
	}
	if group != "" {
		fmt.Fprintf(c.App.Writer, "group %s: ", group)
	}
	fmt.Fprintf(c.App.Writer, "%s -> %s %d:%d id %s\n", id, r.Topic, r.Ack.Queue, r.Ack.Offset, r.Ack.Id)
}

type deadLetter struct {
	ID           string `json:"id"`
	Topic        string `json:"topic"`
	OriginID     string `json:"origin_id"`
	Reconsumed   int    `json:"reconsume_times"`
	Reason       string `json:"reason"`
	Timestamp    int64  `json:"timestamp_ms"`
	Key          string `json:"key,omitempty"`
	Body         string `json:"body"`
	BodyEncoding string `json:"body_encoding,omitempty"` // base64 for a body that is not valid UTF-8
	Group        string `json:"group,omitempty"`         // its group, when listed through the name servers
}

func deadLetterJSON(c *cli.Context, m *api.Message) deadLetter {
	body, enc := jsonBody(c, m.Body)
	n, _ := strconv.Atoi(m.Properties[mq.PropReconsumeTime])
	return deadLetter{ID: m.Id, Topic: m.Properties[mq.PropRetryTopic], OriginID: m.Properties[mq.PropOriginMessageID],
		Reconsumed: n, Reason: m.Properties[mq.PropDeadLetterReason],
		Timestamp: m.TimestampMs, Key: m.Key, Body: body, BodyEncoding: enc}
}
