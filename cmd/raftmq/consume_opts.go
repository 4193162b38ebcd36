package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client"
)

// consumeOptions applies consume's filter and membership flags to cfg.
func consumeOptions(c *cli.Context, cfg *client.ConsumerConfig) error {
	cfg.Tags, cfg.SQL = c.String("tag"), c.String("sql")
	if c.IsSet("tag") && c.IsSet("sql") {
		return errors.New("consume: --tag and --sql cannot be combined (write the tag condition in SQL as TAGS = 'x')")
	}
	cfg.Broadcast = c.Bool("broadcast")
	cfg.MemberID = c.String("member")
	if cfg.MemberID == "" {
		host, _ := os.Hostname()
		cfg.MemberID = fmt.Sprintf("%s@%d", host, os.Getpid()) // RocketMQ's client id: stable for this process
	}
	if c.Bool("broadcast") && len(cfg.Queues) > 0 {
		return errors.New("consume: --broadcast reads every queue; it cannot be combined with --queue")
	}
	return nil
}
