package main

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"
)

// A server's configuration file is TOML whose keys are the server's flag
// names without dashes (`data = "/var/lib/raftmq"`, `heartbeat-timeout =
// "250ms"`, `auto-create-topics = false`). A flag on the command line, or
// its RAFTMQ_SERVER_ variable, wins over the file; the file wins over the
// defaults. `--print-config` prints the configuration in effect, in the
// same form, and exits.

// configFlags are the flags that say where the configuration comes from;
// they are not part of it.
var configFlags = map[string]bool{"config": true, "print-config": true, "help": true}

func configFileFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", EnvVars: []string{"RAFTMQ_SERVER_CONFIG"}, Usage: "TOML file of flag values (keys are flag names: data = \"/var/lib/raftmq\"); flags and their variables win over it"},
		&cli.BoolFlag{Name: "print-config", Usage: "print the configuration in effect (defaults, file, variables and flags) as TOML and exit"},
	}
}

// applyConfigFile sets every flag of c that the file names and neither the
// command line nor a variable set.
func applyConfigFile(c *cli.Context) error {
	path := c.String("config")
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var values map[string]any
	if _, err := toml.Decode(string(b), &values); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	known := map[string]cli.Flag{}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			known[n] = f
		}
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := known[k]; !ok || configFlags[k] {
			if s := closest(flagNames(c.Command.Flags), k); s != "" {
				return fmt.Errorf("--config %s: unknown setting %q (did you mean %q?)", path, k, s)
			}
			return fmt.Errorf("--config %s: unknown setting %q (the settings are the server's flag names)", path, k)
		}
		if c.IsSet(k) {
			continue
		}
		v, err := configValue(values[k])
		if err != nil {
			return fmt.Errorf("--config %s: %s: %w", path, k, err)
		}
		if err := c.Set(k, v); err != nil {
			return fmt.Errorf("--config %s: %s = %v: %w", path, k, values[k], err)
		}
	}
	return nil
}

// configValue is a TOML value as a flag's text.
func configValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := configValue(e)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return "", fmt.Errorf("a %T is not a flag value", v)
}

func flagNames(fs []cli.Flag) []string {
	var out []string
	for _, f := range fs {
		if !configFlags[f.Names()[0]] {
			out = append(out, f.Names()[0])
		}
	}
	return out
}

// printConfig writes the value of every flag of c as TOML.
func printConfig(c *cli.Context) error {
	var buf bytes.Buffer
	fmt.Fprintln(&buf, "# raftmq server configuration in effect (raftmq server --print-config)")
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if configFlags[name] || isHidden(f) {
			continue
		}
		var line string
		switch v := c.Value(name).(type) {
		case string:
			line = strconv.Quote(v)
		case bool:
			line = strconv.FormatBool(v)
		case int, int64, uint, uint64:
			line = fmt.Sprint(v)
		case float64:
			line = strconv.FormatFloat(v, 'g', -1, 64)
		case time.Duration:
			line = strconv.Quote(v.String())
		default:
			line = strconv.Quote(fmt.Sprint(v))
		}
		fmt.Fprintf(&buf, "%s = %s\n", name, line)
	}
	_, err := c.App.Writer.Write(buf.Bytes())
	return err
}

// isHidden reports a flag kept out of help (test and fault-injection
// settings): not part of a printed configuration.
func isHidden(f cli.Flag) bool {
	h, ok := f.(interface{ IsVisible() bool })
	return ok && !h.IsVisible()
}
