package main

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"
)

// logLevelFlag and logFormatFlag are the long-running commands' log
// settings.
func logLevelFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-level", Value: "info", Usage: "trace, debug, info, warn or error"}
}

func logFormatFlag() cli.Flag {
	return &cli.StringFlag{Name: "log-format", Value: "text", Usage: "text, or json: one object per line with @timestamp, @level, @module and @message"}
}

// newLogger is the log of a server or name server: RFC 3339 times with
// milliseconds and the zone, as text or JSON lines, on stderr.
func newLogger(c *cli.Context, name string) (hclog.Logger, error) {
	level := hclog.LevelFromString(c.String("log-level"))
	if level == hclog.NoLevel {
		return nil, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", c.String("log-level"))
	}
	var asJSON bool
	switch f := c.String("log-format"); f {
	case "text":
	case "json":
		asJSON = true
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", f)
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: c.App.ErrWriter,
		TimeFormat: "2006-01-02T15:04:05.000Z07:00", JSONFormat: asJSON, TimeFn: time.Now}), nil
}
