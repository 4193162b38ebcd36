package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
)

func groupUpdateCommand() *cli.Command {
	return &cli.Command{
		Name:      "update",
		Usage:     "change a group's settings (replicated; with --namesrv: on every group of the cluster)",
		ArgsUsage: "GROUP",
		Flags: clientFlags(&cli.IntFlag{Name: "max-reconsume", Value: -1,
			Usage: fmt.Sprintf("how often a message is retried before it goes to %%DLQ%%<group>: 0..%d (RocketMQ's default %d)", mq.MaxMaxReconsumeTimes, mq.DefaultMaxReconsume)},
			everyGroupFlag()),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError(c, "want exactly one GROUP")
			}
			if !c.IsSet("max-reconsume") {
				return usageError(c, "nothing to change (--max-reconsume N)")
			}
			return onGroups(c, nil, func(ctx context.Context, _ string, cl *client.Client) error {
				s, err := cl.SetMaxReconsumeTimes(ctx, c.Args().First(), int32(c.Int("max-reconsume")))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "group %s: max reconsume times %d\n", c.Args().First(), s.GetMaxReconsumeTimes())
				return nil
			})
		},
	}
}
