package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"
)

// version and commit are set at link time (make build: -ldflags "-X
// main.version=... -X main.buildCommit=..."); a build without them reports what
// the Go build info holds, or "dev" and "unknown".
var version, buildCommit = "", ""

// buildInfo is the version, the commit and the Go version of this binary.
func buildInfo() (ver, commit, goVersion string) {
	ver, commit = version, buildCommit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if ver == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			ver = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && commit != "" && !strings.HasSuffix(commit, "-dirty") {
			commit += "-dirty"
		}
	}
	if ver == "" {
		ver = "dev"
	}
	if commit == "" {
		commit = "unknown"
	}
	return ver, commit, runtime.Version()
}

func versionLine() string {
	ver, commit, gov := buildInfo()
	return fmt.Sprintf("raftmq %s (commit %s, %s %s/%s)", ver, commit, gov, runtime.GOOS, runtime.GOARCH)
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, commit and Go version",
		Action: func(c *cli.Context) error {
			fmt.Fprintln(c.App.Writer, versionLine())
			return nil
		},
	}
}

// usageError is a command line that cannot run as given: exit code 2, one
// line on stderr and a hint where the help is, never the whole help.
func usageError(c *cli.Context, format string, args ...any) error {
	fmt.Fprintf(c.App.ErrWriter, "raftmq: %s\nRun '%s --help' for usage.\n", fmt.Sprintf(format, args...), commandPath(c))
	return reported{code: 2}
}

// commandPath is "raftmq topic create" for the command c runs.
func commandPath(c *cli.Context) string {
	var names []string
	for _, l := range c.Lineage() {
		if l.Command != nil && l.Command.Name != "" && l.Command.Name != c.App.Name {
			names = append(names, l.Command.Name)
		}
	}
	path := "raftmq"
	for i := len(names) - 1; i >= 0; i-- {
		path += " " + names[i]
	}
	return path
}

func onUsageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		if len(name) > 1 && !strings.HasPrefix(name, "-") {
			name = "-" + name // the flag package drops one dash of --name
		}
		msg = "unknown flag -" + name
	}
	if name, ok := strings.CutPrefix(msg, "unknown flag "); ok && c.Command != nil {
		var names []string
		for _, f := range c.Command.Flags {
			for _, n := range f.Names() {
				if len(n) > 1 {
					names = append(names, n)
				}
			}
		}
		if s := closest(names, strings.TrimLeft(name, "-")); s != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", s)
		}
	}
	return usageError(c, "%s", msg)
}

// unknownCommand is the action of a command that only groups others (and of
// the app): without arguments it shows the help, with one it refuses it.
func unknownCommand(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.ShowSubcommandHelp(c)
	}
	name := c.Args().First()
	cmds := c.App.Commands
	if c.Command != nil && c.Command.Name != "" {
		cmds = c.Command.Subcommands
	}
	var names []string
	for _, sc := range cmds {
		if !sc.Hidden {
			names = append(names, sc.Name)
		}
	}
	if s := closest(names, name); s != "" {
		return usageError(c, "unknown command %q (did you mean %q?)", name, s)
	}
	return usageError(c, "unknown command %q", name)
}

// closest is the name nearest to typed, when one is near enough to be
// what was meant.
func closest(names []string, typed string) string {
	best, score := "", 0.0
	for _, n := range names {
		if d := smetrics.JaroWinkler(n, typed, 0.7, 4); d > score {
			best, score = n, d
		}
	}
	if score < 0.75 {
		return ""
	}
	return best
}

// helpArgs turns `raftmq help [command...]` into `raftmq [command...]
// --help`, and a line that asks for help anywhere (`raftmq topic create
// foo --help`) into the help of its command, whatever arguments it has.
func helpArgs(cmds []*cli.Command, args []string) []string {
	if len(args) < 2 {
		return args
	}
	if args[1] == "help" {
		return append(append([]string{args[0]}, args[2:]...), "--help")
	}
	asks := false
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if a == "--help" || a == "-h" {
			asks = true
		}
	}
	if !asks {
		return args
	}
	out := []string{args[0]}
	for _, a := range args[1:] {
		var next *cli.Command
		for _, c := range cmds {
			if c.HasName(a) {
				next = c
			}
		}
		if next == nil {
			break
		}
		out = append(out, a)
		cmds = next.Subcommands
	}
	return append(out, "--help")
}

// withFormat gives every command that prints JSON both spellings of the
// choice: `--format text|json` and `--json`, the same as `--format json`.
func withFormat(c *cli.Command) {
	has := func(name string) bool {
		for _, f := range c.Flags {
			for _, n := range f.Names() {
				if n == name {
					return true
				}
			}
		}
		return false
	}
	hasJSON, hasFormat := has("json"), has("format")
	if hasJSON && !hasFormat {
		c.Flags = append(c.Flags, &cli.StringFlag{Name: "format", Value: "text", Usage: "text or json (json: the same as --json)"})
	}
	if hasFormat && !hasJSON {
		c.Flags = append(c.Flags, &cli.BoolFlag{Name: "json", Usage: "the same as --format json"})
	}
	if hasJSON || hasFormat {
		before := c.Before
		c.Before = func(ctx *cli.Context) error {
			switch f := ctx.String("format"); {
			case f != "text" && f != "json":
				return usageError(ctx, "--format %q: want text or json", f)
			case f == "json":
				ctx.Set("json", "true")
			case ctx.Bool("json"):
				ctx.Set("format", "json")
			}
			if before != nil {
				return before(ctx)
			}
			return nil
		}
	}
	for _, sc := range c.Subcommands {
		withFormat(sc)
	}
}

// withUsage gives c and its subcommands the usage-error handling above.
func withUsage(c *cli.Command) {
	c.OnUsageError = onUsageError
	if c.Action == nil && len(c.Subcommands) > 0 {
		c.Action = unknownCommand
	}
	for _, sc := range c.Subcommands {
		withUsage(sc)
	}
}
