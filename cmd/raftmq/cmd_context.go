package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
)

// builtinServers is -s when neither the command line, RAFTMQ_SERVERS nor
// the current context says.
const builtinServers = "127.0.0.1:9001"

// defaultServers is -s's default for this run: the current context's
// servers, else builtinServers (set by Run before the commands are built).
var defaultServers = builtinServers

// contexts is the saved file: named server lists and the current one, as
// `nats context` and rpk profiles keep them.
type contexts struct {
	Current  string                  `json:"current,omitempty"`
	Contexts map[string]savedContext `json:"contexts"`
}

type savedContext struct {
	Servers string `json:"servers"`
	// AccessKey and SecretKeyFile are the credentials commands use against
	// this group (the secret stays in its file; the file is read on use).
	AccessKey     string `json:"access_key,omitempty"`
	SecretKeyFile string `json:"secret_key_file,omitempty"`
}

// currentContext is the current context of this run (set by Run; zero
// without one).
var currentContext savedContext

// contextsPath is $RAFTMQ_CONFIG, else raftmq/contexts.json in the user's
// configuration directory.
func contextsPath() (string, error) {
	if p := os.Getenv("RAFTMQ_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory for contexts (set RAFTMQ_CONFIG to a file): %w", err)
	}
	return filepath.Join(dir, "raftmq", "contexts.json"), nil
}

func loadContexts() (contexts, string, error) {
	cs := contexts{Contexts: map[string]savedContext{}}
	path, err := contextsPath()
	if err != nil {
		return cs, "", err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cs, path, nil
	}
	if err != nil {
		return cs, path, err
	}
	if err := json.Unmarshal(b, &cs); err != nil {
		return cs, path, fmt.Errorf("%s: %w (fix or remove it)", path, err)
	}
	if cs.Contexts == nil {
		cs.Contexts = map[string]savedContext{}
	}
	return cs, path, nil
}

func (cs contexts) save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(cs, "", "  ")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadCurrent is the current context (zero without one); a damaged file
// is reported once and ignored.
func loadCurrent(errw func(string)) savedContext {
	if _, err := contextsPath(); err != nil {
		return savedContext{} // no configuration directory (no HOME): no contexts
	}
	cs, _, err := loadContexts()
	if err != nil {
		errw(err.Error())
		return savedContext{}
	}
	return cs.Contexts[cs.Current]
}

func contextCommand() *cli.Command {
	name := func(c *cli.Context) (string, error) {
		if c.NArg() != 1 {
			return "", usageError(c, "want exactly one NAME")
		}
		return c.Args().First(), nil
	}
	edit := func(c *cli.Context, f func(cs *contexts, n string) (string, error)) error {
		n, err := name(c)
		if err != nil {
			return err
		}
		cs, path, err := loadContexts()
		if err != nil {
			return err
		}
		msg, err := f(&cs, n)
		if err != nil {
			return err
		}
		if err := cs.save(path); err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, msg)
		return nil
	}
	return &cli.Command{
		Name:  "context",
		Usage: "save named groups (their -s) and pick the one commands use by default",
		Description: "The current context's servers are -s's default; -s and RAFTMQ_SERVERS still win.\n" +
			"Contexts are kept in the user's configuration directory (raftmq/contexts.json) or $RAFTMQ_CONFIG.",
		Action: unknownCommand,
		Subcommands: []*cli.Command{
			{
				Name: "add", Usage: "save a context (and make it current with --use)", ArgsUsage: "NAME",
				Flags: []cli.Flag{&cli.StringFlag{Name: "servers", Aliases: []string{"s"}, Usage: "client API addresses of the group's nodes (required)"},
					&cli.BoolFlag{Name: "use", Usage: "make it the current context"},
					&cli.StringFlag{Name: "access-key", Usage: "user whose credentials commands use against this group"},
					&cli.StringFlag{Name: "secret-key-file", Usage: "file holding --access-key's secret key (its path is saved, not the secret)"}},
				Action: func(c *cli.Context) error {
					if c.String("servers") == "" {
						return usageError(c, "-s/--servers is required")
					}
					if (c.String("access-key") == "") != (c.String("secret-key-file") == "") {
						return usageError(c, "--access-key and --secret-key-file go together")
					}
					keyFile := c.String("secret-key-file")
					if keyFile != "" {
						abs, err := filepath.Abs(keyFile)
						if err != nil {
							return err
						}
						keyFile = abs
					}
					return edit(c, func(cs *contexts, n string) (string, error) {
						cs.Contexts[n] = savedContext{Servers: c.String("servers"), AccessKey: c.String("access-key"), SecretKeyFile: keyFile}
						if c.Bool("use") || cs.Current == "" {
							cs.Current = n
							return fmt.Sprintf("saved context %s (%s); it is current", n, c.String("servers")), nil
						}
						return fmt.Sprintf("saved context %s (%s)", n, c.String("servers")), nil
					})
				},
			},
			{
				Name: "use", Usage: "make a context current", ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					return edit(c, func(cs *contexts, n string) (string, error) {
						if _, ok := cs.Contexts[n]; !ok {
							return "", fmt.Errorf("no context %q (raftmq context list shows them)", n)
						}
						cs.Current = n
						return fmt.Sprintf("using context %s (%s)", n, cs.Contexts[n].Servers), nil
					})
				},
			},
			{
				Name: "remove", Usage: "delete a context", ArgsUsage: "NAME",
				Action: func(c *cli.Context) error {
					return edit(c, func(cs *contexts, n string) (string, error) {
						if _, ok := cs.Contexts[n]; !ok {
							return "", fmt.Errorf("no context %q", n)
						}
						delete(cs.Contexts, n)
						if cs.Current == n {
							cs.Current = ""
						}
						return "removed context " + n, nil
					})
				},
			},
			{
				Name: "list", Usage: "show the contexts; * marks the current one", Flags: []cli.Flag{jsonFlag()},
				Action: func(c *cli.Context) error {
					cs, _, err := loadContexts()
					if err != nil {
						return err
					}
					if c.Bool("json") {
						return printJSON(c.App.Writer, cs)
					}
					var names []string
					for n := range cs.Contexts {
						names = append(names, n)
					}
					sort.Strings(names)
					w := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
					fmt.Fprintln(w, "\tNAME\tSERVERS")
					for _, n := range names {
						mark := ""
						if n == cs.Current {
							mark = "*"
						}
						fmt.Fprintf(w, "%s\t%s\t%s\n", mark, n, cs.Contexts[n].Servers)
					}
					return w.Flush()
				},
			},
		},
	}
}
