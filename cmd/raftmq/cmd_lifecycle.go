package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client"
)

// permName is how topic lists show RocketMQ's permission bits.
func permName(p uint32) string {
	switch p {
	case client.PermRead:
		return "4 (read)"
	case client.PermWrite:
		return "2 (write)"
	case client.PermReadWrite:
		return "6 (read, write)"
	}
	return fmt.Sprint(p)
}

func topicDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a topic: its messages are no longer served and every group's offsets of it are dropped",
		ArgsUsage: "NAME",
		Description: "Refused while members of consumer groups subscribed to the topic are connected, unless --force.\n" +
			"The messages stay on disk until retention deletes their log segments. A topic created again\n" +
			"under the name starts empty (with auto-create on, the next produce creates it).",
		Flags: clientFlags(&cli.BoolFlag{Name: "force", Usage: "delete even while consumers of the topic are connected"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError(c, "want exactly one NAME")
			}
			return withClient(c, func(ctx context.Context, cl *client.Client) error {
				if err := cl.DeleteTopic(ctx, c.Args().First(), c.Bool("force")); err != nil {
					return clean(err)
				}
				fmt.Fprintf(c.App.Writer, "deleted topic %s\n", c.Args().First())
				return nil
			})
		},
	}
}

func topicUpdateCommand() *cli.Command {
	return &cli.Command{
		Name:      "update",
		Usage:     "change a topic's permission: 6 read and write, 4 read only, 2 write only (RocketMQ's perm)",
		ArgsUsage: "NAME",
		Flags:     clientFlags(&cli.UintFlag{Name: "perm", Usage: "2, 4 or 6 (required)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 || !c.IsSet("perm") {
				return usageError(c, "want NAME and --perm")
			}
			perm := c.Uint("perm")
			if perm != 2 && perm != 4 && perm != 6 {
				return usageError(c, "--perm %d: want 2 (write only), 4 (read only) or 6 (read and write)", perm)
			}
			return withClient(c, func(ctx context.Context, cl *client.Client) error {
				ti, err := cl.UpdateTopic(ctx, c.Args().First(), uint32(perm))
				if err != nil {
					return clean(err)
				}
				fmt.Fprintf(c.App.Writer, "topic %s: perm %s\n", ti.Name, permName(ti.Perm))
				return nil
			})
		},
	}
}

func groupDeleteCommand() *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a consumer group: its committed offsets, its broadcasting members' offsets and its retry and dead-letter topics",
		ArgsUsage: "GROUP",
		Flags:     clientFlags(&cli.BoolFlag{Name: "force", Usage: "delete even while members are connected"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError(c, "want exactly one GROUP")
			}
			return withClient(c, func(ctx context.Context, cl *client.Client) error {
				if err := cl.DeleteGroup(ctx, c.Args().First(), c.Bool("force")); err != nil {
					return clean(err)
				}
				fmt.Fprintf(c.App.Writer, "deleted consumer group %s\n", c.Args().First())
				return nil
			})
		},
	}
}

func broadcastNote(broadcast bool) string {
	if broadcast {
		return ", broadcasting (each member's own offsets)"
	}
	return ""
}
