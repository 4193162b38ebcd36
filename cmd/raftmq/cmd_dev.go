package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/internal/localgroup"
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "run a local three-node group until Ctrl-C, for development",
		Description: "Starts three `raftmq server` processes on free ports of 127.0.0.1 in a new directory,\n" +
			"waits until they have a leader and are ready, prints their addresses and an\n" +
			"`export RAFTMQ_SERVERS=...` line for the other commands, and stops them (SIGTERM) on Ctrl-C.\n" +
			"The directory is removed then unless --keep.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 3, Usage: "how many nodes (1, 3 or 5)"},
			&cli.BoolFlag{Name: "keep", Usage: "leave the data directory behind on exit"},
			&cli.BoolFlag{Name: "remoting", Usage: "also serve the RocketMQ remoting protocol on a port per node"},
			&cli.IntFlag{Name: "port-base", Usage: "fixed ports instead of free ones: node k (from 0) takes N+10k (raft), +1 (client API), +2 (HTTP), +3 (remoting)"},
			&cli.BoolFlag{Name: "no-context", Usage: "do not save the group's addresses as the context named dev"},
		},
		Action: runDev,
	}
}

func runDev(c *cli.Context) error {
	n := c.Int("nodes")
	if n != 1 && n != 3 && n != 5 {
		return usageError(c, "--nodes %d: want 1, 3 or 5", n)
	}
	if b := c.Int("port-base"); b < 0 || b > 65535-10*n {
		return usageError(c, "--port-base %d: want 1..%d", b, 65535-10*n)
	}
	g, err := localgroup.New(localgroup.Config{Nodes: n, Keep: c.Bool("keep"), Remoting: c.Bool("remoting"), PortBase: c.Int("port-base")})
	if err != nil {
		return err
	}
	defer g.Close()
	out := c.App.Writer
	fmt.Fprintf(out, "starting %d nodes in %s ...\n", n, g.Dir())
	ctx, cancel := context.WithTimeout(c.Context, 60*time.Second)
	defer cancel()
	if err := g.StartAll(ctx); err != nil {
		return fmt.Errorf("start the group: %w (server logs in %s)", err, g.Dir())
	}
	leader, _, err := g.WaitLeader(ctx, "")
	if err != nil {
		return fmt.Errorf("no leader: %w (server logs in %s)", err, g.Dir())
	}
	fmt.Fprintf(out, "\nNODE  CLIENT           RAFT             HTTP%s\n", map[bool]string{true: "             REMOTING"}[c.Bool("remoting")])
	for _, nd := range g.Nodes() {
		line := fmt.Sprintf("%-5s %-16s %-16s %-16s", nd.ID, nd.Client, nd.Raft, nd.HTTP)
		if nd.Remoting != "" {
			line += " " + nd.Remoting
		}
		if nd.ID == leader.ID {
			line += "  (leader)"
		}
		fmt.Fprintln(out, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(out, "\nlogs and data in %s\n\nexport RAFTMQ_SERVERS=%s\n", g.Dir(), g.ClientAddrs())
	if !c.Bool("no-context") {
		if err := saveDevContext(g.ClientAddrs()); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "raftmq: dev: could not save the context dev: %v\n", err)
		} else {
			fmt.Fprintln(out, "saved as the context dev: `raftmq context use dev` points every command at it")
		}
	}
	fmt.Fprintln(out, "\nrunning; Ctrl-C stops the group")
	watchMembers(c.Context, g, c.App.ErrWriter)
	fmt.Fprintln(out, "stopping ...")
	if err := g.StopAll(10 * time.Second); err != nil {
		// A node that would not stop may still write there: keep it.
		g.SetKeep(true)
		return fmt.Errorf("%w; data kept in %s", err, g.Dir())
	}
	if c.Bool("keep") {
		fmt.Fprintf(out, "stopped; data kept in %s\n", g.Dir())
	} else {
		fmt.Fprintln(out, "stopped")
	}
	return nil
}

// watchMembers waits for ctx to end and says, meanwhile, when a node exits
// by itself (a crash, a failed disk write: status 70), with the end of its
// log; the others go on as a group that lost a member.
func watchMembers(ctx context.Context, g *localgroup.Group, w io.Writer) {
	told := map[string]bool{}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, nd := range g.Nodes() {
			if told[nd.ID] || nd.Running() {
				continue
			}
			told[nd.ID] = true
			fmt.Fprintf(w, "raftmq: dev: node %s exited (%v); the others go on without it. The end of its log (%s):\n%s\n",
				nd.ID, nd.WaitErr(), nd.Log, nd.LogTail(5))
		}
	}
}

// saveDevContext saves servers as the context named dev (replacing an
// earlier dev group's), without making it current.
func saveDevContext(servers string) error {
	cs, path, err := loadContexts()
	if err != nil {
		return err
	}
	cs.Contexts["dev"] = savedContext{Servers: servers}
	return cs.save(path)
}
