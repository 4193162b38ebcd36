package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client"
)

// messageFindCommand is `message find`.
func messageFindCommand() *cli.Command {
	return &cli.Command{
		Name:  "find",
		Usage: "find a topic's messages by key (a word of the message key, or its UNIQ_KEY), newest first, with the node that served them",
		Description: "Every node indexes the keys of its own log on disk; the answer comes from one node.\n" +
			"--begin and --end (RFC 3339 or a duration back from now, e.g. 1h) bound the messages' timestamps.\n" +
			"With --namesrv (and no --broker-name): in every group that holds the topic, each group's answer\n" +
			"under a \"group G:\" line (in JSON, each message's \"group\").",
		Flags: clientFlags(
			&cli.StringFlag{Name: "topic", Aliases: []string{"t"}, Usage: "topic (required)"},
			&cli.StringFlag{Name: "key", Aliases: []string{"k"}, Usage: "key (required)"},
			&cli.UintFlag{Name: "max", Aliases: []string{"n"}, Value: 32, Usage: "at most this many messages (1..1024)"},
			&cli.StringFlag{Name: "begin", Usage: "only messages at or after this time"},
			&cli.StringFlag{Name: "end", Usage: "only messages at or before this time"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json (one object per message)"},
			everyGroupFlag(),
		),
		Action: func(c *cli.Context) error {
			if c.String("topic") == "" || c.String("key") == "" {
				return errors.New("message find: --topic and --key are required")
			}
			if f := c.String("format"); f != "text" && f != "json" {
				return fmt.Errorf("--format %q: want text or json", f)
			}
			begin, err := timeFlag(c, "begin")
			if err != nil {
				return err
			}
			end, err := timeFlag(c, "end")
			if err != nil {
				return err
			}
			return onGroups(c, holdersOf(c.String("topic")), func(ctx context.Context, group string, cl *client.Client) error {
				r, err := cl.FindMessages(ctx, c.String("topic"), c.String("key"), uint32(c.Uint("max")), begin, end)
				if err != nil {
					return err
				}
				for _, m := range r.Messages {
					if c.String("format") == "json" {
						body, enc := jsonBody(c, m.Body)
						b, _ := json.Marshal(msgJSON{Topic: m.Topic, Queue: m.Queue, Offset: m.Offset, ID: m.Id, Key: m.Key, Tag: m.Tag,
							Properties: m.Properties, Body: body, BodyEncoding: enc, Timestamp: m.TimestampMs, Node: r.ServedBy, Group: group})
						fmt.Fprintln(c.App.Writer, string(b))
						continue
					}
					fmt.Fprintf(c.App.Writer, "%s\t%s %d:%d\tkey=%s\t%s\t%s\tserved by %s\n", m.Id, m.Topic, m.Queue, m.Offset, m.Key,
						time.UnixMilli(m.TimestampMs).UTC().Format(time.RFC3339Nano), m.Body, r.ServedBy)
				}
				if len(r.Messages) == 0 {
					fmt.Fprintf(c.App.ErrWriter, "no message of %s with key %s (answered by %s)\n", c.String("topic"), c.String("key"), r.ServedBy)
				}
				return nil
			})
		},
	}
}

// timeFlag reads an RFC 3339 time or a duration back from now as unix ms
// (0 when unset).
func timeFlag(c *cli.Context, name string) (int64, error) {
	v := c.String(name)
	if v == "" {
		return 0, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d).UnixMilli(), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return 0, fmt.Errorf("--%s %q: want an RFC 3339 time or a duration back from now (e.g. 1h)", name, v)
	}
	return t.UnixMilli(), nil
}
