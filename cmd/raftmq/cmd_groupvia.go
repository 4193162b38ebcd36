package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client/cluster"
)

// brokerNameFlag is --broker-name of the client commands: with --namesrv,
// the one group (RocketMQ's brokerName) the command talks to. It reads no
// variable: RAFTMQ_BROKER_NAME belongs to the server, which names its own
// group with it.
func brokerNameFlag() cli.Flag {
	return &cli.StringFlag{Name: "broker-name", Usage: "with --namesrv: the group to talk to (may be left out when only one group is registered)"}
}

// notGroupClients are the commands that reach their group through -s
// only, and could not otherwise be pointed at a group behind the name
// servers: context saves -s, demo and dev start their own nodes.
var notGroupClients = map[string]bool{"server": true, "namesrv": true, "cluster": true, "context": true, "demo": true, "dev": true, "version": true, "completion": true}

// addGroupFlags gives every client command that has -s (and its
// subcommands) --namesrv and --broker-name, so that any of them can reach
// one group of a cluster through its name servers. A command that already
// has --namesrv (produce, consume, topic create ...) reaches the whole
// cluster with it; there --broker-name narrows it to one group.
func addGroupFlags(c *cli.Command) {
	if notGroupClients[c.Name] {
		return
	}
	var hasServers, hasNamesrv, hasBroker bool
	for _, f := range c.Flags {
		switch f.Names()[0] {
		case "servers":
			hasServers = true
		case "namesrv":
			hasNamesrv = true
		case "broker-name":
			hasBroker = true
		}
	}
	if hasServers && !hasNamesrv {
		c.Flags = append(c.Flags, &cli.StringFlag{Name: "namesrv", Usage: "name servers ADDR[;ADDR...]: find the nodes of --broker-name through them instead of -s"})
	}
	if hasServers && !hasBroker {
		c.Flags = append(c.Flags, brokerNameFlag())
	}
	for _, sc := range c.Subcommands {
		addGroupFlags(sc)
	}
}

// hasFlag reports whether c's command defines flag.
func hasFlag(c *cli.Context, flag string) bool {
	return c.Command != nil && slices.ContainsFunc(c.Command.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), flag) })
}

// groupServers is where a one-group command connects: -s, or with
// --namesrv the client addresses the name servers list for --broker-name
// (the only group, when just one is registered).
func groupServers(c *cli.Context) ([]string, error) {
	if !hasFlag(c, "namesrv") {
		return []string{c.String("servers")}, nil
	}
	ns, err := namesrvGiven(c)
	if err != nil {
		return nil, err
	}
	if !ns {
		if c.String("broker-name") != "" && c.IsSet("broker-name") {
			return nil, usageError(c, "--broker-name picks a group behind the name servers: it needs --namesrv")
		}
		return []string{c.String("servers")}, nil
	}
	cfg := cluster.DefaultConfig()
	cfg.NameServers = []string{c.String("namesrv")}
	cl, err := cluster.New(cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.Context, cfg.NameServerTimeout*time.Duration(max(1, strings.Count(c.String("namesrv"), ";")+1)))
	defer cancel()
	groups, err := cl.Groups(ctx)
	if err != nil {
		return nil, &exitError{3, err}
	}
	name := c.String("broker-name")
	if name == "" {
		if len(groups) != 1 {
			return nil, usageError(c, "--namesrv %s lists %s (%s): name one with --broker-name", c.String("namesrv"), plural(len(groups), "group"), strings.Join(sortedKeys(groups), ", "))
		}
		name = sortedKeys(groups)[0]
	}
	g := groups[name]
	if g == nil || len(g.Servers) == 0 {
		return nil, &exitError{3, fmt.Errorf("group %s: %w (registered: %s)", name, cluster.ErrUnknownGroup, strings.Join(sortedKeys(groups), ", "))}
	}
	return g.Servers, nil
}
