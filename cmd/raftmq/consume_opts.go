package main

import (
	"errors"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client"
)

// consumeOptions applies consume's filter flags to cfg.
func consumeOptions(c *cli.Context, cfg *client.ConsumerConfig) error {
	cfg.Tags, cfg.SQL = c.String("tag"), c.String("sql")
	if c.IsSet("tag") && c.IsSet("sql") {
		return errors.New("consume: --tag and --sql cannot be combined (write the tag condition in SQL as TAGS = 'x')")
	}
	return nil
}
