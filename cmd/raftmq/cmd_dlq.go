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
					"each dead letter's \"group\"); ids are a group's own, so show and resend take --broker-name.",
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
				Flags:     clientFlags(formatFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() != 2 {
						return usageError(c, "want GROUP and ID")
					}
					format, err := checkFormat(c)
					if err != nil {
						return err
					}
					group, id := c.Args().Get(0), c.Args().Get(1)
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
				Flags:     clientFlags(formatFlag()),
				Action: func(c *cli.Context) error {
					if c.NArg() < 2 {
						return usageError(c, "want GROUP and at least one ID")
					}
					format, err := checkFormat(c)
					if err != nil {
						return err
					}
					group := c.Args().First()
					return withClient(c, func(ctx context.Context, cl *client.Client) error {
						var failed int
						for _, id := range c.Args().Slice()[1:] {
							r, err := cl.ResendDeadLetter(ctx, group, id)
							if err != nil {
								failed++
								fmt.Fprintf(c.App.ErrWriter, "raftmq: resend %s: %v\n", id, clean(err))
								continue
							}
							if format == "json" {
								printJSON(c.App.Writer, map[string]any{"dead_letter": id, "topic": r.Topic, "id": r.Ack.Id, "queue": r.Ack.Queue, "offset": r.Ack.Offset})
							} else {
								fmt.Fprintf(c.App.Writer, "%s -> %s %d:%d id %s\n", id, r.Topic, r.Ack.Queue, r.Ack.Offset, r.Ack.Id)
							}
						}
						if failed > 0 {
							return fmt.Errorf("%d of %d dead letters not resent", failed, c.NArg()-1)
						}
						return nil
					})
				},
			},
		},
	}
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
