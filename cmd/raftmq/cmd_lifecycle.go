package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
			"under the name starts empty (with auto-create on, the next produce creates it).\n" +
			"With --namesrv: on every group that holds the topic (or the --groups named), each on its own: a\n" +
			"group that refuses keeps the topic, and the command says which did and exits 1.",
		Flags: clientFlags(&cli.BoolFlag{Name: "force", Usage: "delete even while consumers of the topic are connected"},
			namesrvFlag(),
			&cli.StringFlag{Name: "groups", Usage: "with --namesrv: the groups G1,G2 to delete it on (each must hold it)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError(c, "want exactly one NAME")
			}
			ns, err := viaNamesrv(c)
			if err != nil {
				return err
			}
			if ns {
				return runTopicDeleteCluster(c)
			}
			if c.String("groups") != "" {
				return usageError(c, "--groups names groups of a cluster: it needs --namesrv")
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
		Usage:     "change a topic's permission (--perm), or grow it onto more groups of a cluster (--add-queues)",
		ArgsUsage: "NAME",
		Description: "--perm: 6 read and write, 4 read only, 2 write only (RocketMQ's perm); with --namesrv on every\n" +
			"group that holds the topic (or the --groups named).\n" +
			"--add-queues N --namesrv ADDR [--groups G1,G2]: create the topic with N queues (in all, spread over\n" +
			"the groups) on groups that do not hold it yet (default: every group with a leader that does not);\n" +
			"the groups that hold it keep their queues and data. raftmq does not change a topic's queue count\n" +
			"within a group: a group that holds the topic is refused before anything is created. Producers and\n" +
			"consumers through the name servers use the new queues after their next route refresh.",
		Flags: clientFlags(&cli.UintFlag{Name: "perm", Usage: "2, 4 or 6"},
			&cli.IntFlag{Name: "add-queues", Usage: "with --namesrv: queues to add, on groups that do not hold the topic yet"},
			namesrvFlag(),
			&cli.StringFlag{Name: "groups", Usage: "with --namesrv: the groups G1,G2 to change or to grow onto"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 || c.IsSet("perm") == c.IsSet("add-queues") {
				return usageError(c, "want NAME and one of --perm or --add-queues")
			}
			ns, err := viaNamesrv(c)
			if err != nil {
				return err
			}
			if !ns && (c.IsSet("add-queues") || c.String("groups") != "") {
				return usageError(c, "--add-queues and --groups work on the groups of a cluster: they need --namesrv")
			}
			if c.IsSet("add-queues") {
				if q := c.Int("add-queues"); q < 1 || q > 1024 {
					return usageError(c, "--add-queues %d: want 1..1024", q)
				}
				return runTopicGrowCluster(c)
			}
			perm := c.Uint("perm")
			if perm != 2 && perm != 4 && perm != 6 {
				return usageError(c, "--perm %d: want 2 (write only), 4 (read only) or 6 (read and write)", perm)
			}
			if ns {
				return runTopicPermCluster(c, uint32(perm))
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
		Description: "With --namesrv (and no --broker-name): on every group of the cluster in turn; a group that\n" +
			"does not know the consumer group says so and counts as done.",
		Flags: clientFlags(&cli.BoolFlag{Name: "force", Usage: "delete even while members are connected"}, everyGroupFlag()),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError(c, "want exactly one GROUP")
			}
			return onGroups(c, nil, func(ctx context.Context, group string, cl *client.Client) error {
				err := cl.DeleteGroup(ctx, c.Args().First(), c.Bool("force"))
				if group != "" && status.Code(err) == codes.NotFound {
					fmt.Fprintf(c.App.Writer, "no consumer group %s here\n", c.Args().First())
					return nil
				}
				if err != nil {
					return err
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
