package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

func formatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Value: "text", Usage: "text or json"}
}

func checkFormat(c *cli.Context) (string, error) {
	f := c.String("format")
	if f != "text" && f != "json" {
		return "", usageError(c, "--format %q: want text or json", f)
	}
	return f, nil
}

func messageCommand() *cli.Command {
	return &cli.Command{
		Name:  "message",
		Usage: "look messages up by id or key",
		Subcommands: []*cli.Command{messageFindCommand(), {
			Name:      "show",
			Usage:     "show one message by id, with its topic, queue, offset and the node that served it",
			ArgsUsage: "ID",
			Description: "The id (24 hex digits, from a produce ack or a consume) names the log entry that stored the\n" +
				"message, so any node that holds that entry answers; a node that does not passes the request to\n" +
				"the leader. With --namesrv (and no --broker-name) every group is asked: an id is a group's own,\n" +
				"so each group that holds a message under it shows it, under a \"group G:\" line (in JSON, its\n" +
				"\"group\").",
			Flags: clientFlags(formatFlag()),
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return usageError(c, "want exactly one ID")
				}
				format, err := checkFormat(c)
				if err != nil {
					return err
				}
				id := c.Args().First()
				if all, err := viaNamesrv(c); err != nil {
					return err
				} else if all {
					return withCluster(c, func(ctx context.Context, cl *cluster.Cluster) error {
						l, err := lookupEveryGroup(ctx, c, cl, id, nil)
						if err != nil {
							return err
						}
						if len(l.hits) == 0 {
							return l.none(id, "message")
						}
						return showHits(c, format, l.hits)
					})
				}
				return withClient(c, func(ctx context.Context, cl *client.Client) error {
					r, err := cl.LookupMessage(ctx, c.Args().First())
					if err != nil {
						return clean(err)
					}
					if format == "json" {
						return printJSON(c.App.Writer, shownJSON(c, r.Message, r.ServedBy))
					}
					printMessage(c.App.Writer, r.Message)
					fmt.Fprintf(c.App.Writer, "served by   %s\n", r.ServedBy)
					return nil
				})
			},
		}},
	}
}

type shownMessage struct {
	ID         string            `json:"id"`
	Topic      string            `json:"topic"`
	Queue      int32             `json:"queue"`
	Offset     uint64            `json:"offset"`
	Key        string            `json:"key,omitempty"`
	Tag        string            `json:"tag,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
	Body       string            `json:"body"`
	// BodyEncoding: base64 for a body that is not valid UTF-8.
	BodyEncoding string `json:"body_encoding,omitempty"`
	Timestamp    int64  `json:"timestamp_ms"`
	Node         string `json:"node,omitempty"`  // the node that served it
	Group        string `json:"group,omitempty"` // its group, when looked up through the name servers
}

func shownJSON(c *cli.Context, m *api.Message, servedBy string) shownMessage {
	body, enc := jsonBody(c, m.Body)
	return shownMessage{ID: m.Id, Topic: m.Topic, Queue: m.Queue, Offset: m.Offset, Key: m.Key, Tag: m.Tag,
		Properties: m.Properties, Body: body, BodyEncoding: enc, Timestamp: m.TimestampMs, Node: servedBy}
}

func printMessage(w io.Writer, m *api.Message) {
	fmt.Fprintf(w, "id          %s\n", m.Id)
	fmt.Fprintf(w, "topic       %s\n", m.Topic)
	fmt.Fprintf(w, "queue       %d\n", m.Queue)
	fmt.Fprintf(w, "offset      %d\n", m.Offset)
	if m.Key != "" {
		fmt.Fprintf(w, "key         %s\n", m.Key)
	}
	if m.Tag != "" {
		fmt.Fprintf(w, "tag         %s\n", m.Tag)
	}
	fmt.Fprintf(w, "born        %s\n", time.UnixMilli(m.TimestampMs).UTC().Format(time.RFC3339Nano))
	keys := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "property    %s=%s\n", k, m.Properties[k])
	}
	body := string(m.Body)
	if len(body) > 4096 {
		body = body[:4096] + fmt.Sprintf("... (%d bytes)", len(m.Body))
	}
	fmt.Fprintf(w, "body        %s\n", strings.TrimRight(body, "\n"))
}
