package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// readSecret reads a secret from a file ("-": standard input), dropping
// one trailing newline; secrets never come from the command line, where
// other users of the machine see them.
func readSecret(c *cli.Context) (string, error) {
	path := c.String("secret-file")
	if path == "" {
		return "", usageError(c, "--secret-file FILE (or - for standard input) is required")
	}
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(c.App.Reader)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("--secret-file: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("--secret-file %s: empty", path)
	}
	return s, nil
}

// usersCall sends call to the group of -s, or through --namesrv to every
// group (onGroups), and hands each reply to done with its group's name:
// users and grants are kept per group, and a client of the cluster needs
// its user on every group it reaches.
func usersCall(c *cli.Context, call api.UsersCall, done func(group string, r api.UsersReply) error) error {
	return onGroups(c, nil, func(ctx context.Context, group string, cl *client.Client) error {
		r, err := cl.Users(ctx, call)
		if err != nil {
			return err
		}
		return done(group, r)
	})
}

func userCommand() *cli.Command {
	secretFlag := &cli.StringFlag{Name: "secret-file", Usage: "file holding the secret key (- : standard input); a trailing newline is dropped"}
	oneUser := func(c *cli.Context) (string, error) {
		if c.NArg() != 1 {
			return "", usageError(c, "want exactly one USER")
		}
		return c.Args().First(), nil
	}
	// withSecret is a subcommand that sends op for USER with the secret
	// read from --secret-file, and prints done about the user.
	withSecret := func(name, usage, op, done string) *cli.Command {
		return &cli.Command{Name: name, Usage: usage, ArgsUsage: "USER", Flags: clientFlags(secretFlag, everyGroupFlag()),
			Action: func(c *cli.Context) error {
				u, err := oneUser(c)
				if err != nil {
					return err
				}
				secret, err := readSecret(c)
				if err != nil {
					return err
				}
				return usersCall(c, api.UsersCall{Op: op, User: u, Secret: secret}, func(string, api.UsersReply) error {
					fmt.Fprintf(c.App.Writer, done, u)
					return nil
				})
			}}
	}
	return &cli.Command{
		Name:  "user",
		Usage: "add, remove, list users (access keys of RocketMQ clients) and change their secrets (replicated; docs/security.md)",
		Subcommands: []*cli.Command{
			withSecret("add", "add a user with a secret key", api.UsersAdd, "user %s added (no grants yet: raftmq acl grant)\n"),
			withSecret("passwd", "replace a user's secret key", api.UsersPasswd, "user %s: secret changed\n"),
			{
				Name: "remove", Usage: "remove a user and its grants", ArgsUsage: "USER", Flags: clientFlags(everyGroupFlag()),
				Action: func(c *cli.Context) error {
					u, err := oneUser(c)
					if err != nil {
						return err
					}
					return usersCall(c, api.UsersCall{Op: api.UsersRemove, User: u}, func(string, api.UsersReply) error {
						fmt.Fprintf(c.App.Writer, "user %s removed\n", u)
						return nil
					})
				},
			},
			{
				Name: "list", Usage: "list users and their grants (never their secrets)", Flags: clientFlags(jsonFlag(), everyGroupFlag()),
				Action: func(c *cli.Context) error { return listUsers(c, "") },
			},
		},
	}
}

// listUsers lists the users (only: that one) and their grants; with
// --json through --namesrv, one object of every group's list by group.
func listUsers(c *cli.Context, only string) error {
	byGroup := map[string][]api.UserInfo{}
	err := usersCall(c, api.UsersCall{Op: api.UsersList}, func(group string, r api.UsersReply) error {
		users := []api.UserInfo{}
		for _, u := range r.Users {
			if only == "" || u.Name == only {
				users = append(users, u)
			}
		}
		if c.Bool("json") && group != "" {
			byGroup[group] = users
			return nil
		}
		if c.Bool("json") {
			return printJSON(c.App.Writer, users)
		}
		for _, u := range users {
			if len(u.Grants) == 0 {
				fmt.Fprintf(c.App.Writer, "%s\t(no grants)\n", u.Name)
			}
			for _, g := range u.Grants {
				fmt.Fprintf(c.App.Writer, "%s\t%s\t%s\n", u.Name, g.Resource, g.Actions)
			}
		}
		return nil
	})
	if len(byGroup) > 0 {
		if perr := printJSON(c.App.Writer, byGroup); perr != nil {
			return perr
		}
	}
	return err
}

func aclCommand() *cli.Command {
	change := func(op, verb string) func(c *cli.Context) error {
		return func(c *cli.Context) error {
			if c.NArg() != 3 {
				return usageError(c, "want USER RESOURCE ACTIONS, e.g. u1 'topic:orders*' publish,subscribe")
			}
			a := c.Args()
			call := api.UsersCall{Op: op, User: a.Get(0), Resource: a.Get(1), Actions: a.Get(2)}
			return usersCall(c, call, func(string, api.UsersReply) error {
				fmt.Fprintf(c.App.Writer, "user %s: %s %s on %s\n", call.User, verb, call.Actions, call.Resource)
				return nil
			})
		}
	}
	const resources = "RESOURCE is topic:<name>, group:<name> (a name may end in *, a prefix: topic:orders*) or cluster;\n" +
		"ACTIONS is publish, subscribe, admin or all, comma-separated. Admin on cluster allows everything."
	return &cli.Command{
		Name:  "acl",
		Usage: "grant, revoke and list users' permissions (replicated; docs/security.md)",
		Subcommands: []*cli.Command{
			{Name: "grant", Usage: "allow a user actions on a resource", ArgsUsage: "USER RESOURCE ACTIONS", Description: resources,
				Flags: clientFlags(everyGroupFlag()), Action: change(api.UsersGrant, "granted")},
			{Name: "revoke", Usage: "take actions on a resource from a user", ArgsUsage: "USER RESOURCE ACTIONS", Description: resources,
				Flags: clientFlags(everyGroupFlag()), Action: change(api.UsersRevoke, "revoked")},
			{Name: "list", Usage: "list grants (of one USER, or all)", ArgsUsage: "[USER]", Flags: clientFlags(jsonFlag(), everyGroupFlag()),
				Action: func(c *cli.Context) error { return listUsers(c, c.Args().First()) }},
		},
	}
}
