package main

import (
	"errors"

	"github.com/urfave/cli/v2"
)

func demoCommand() *cli.Command {
	return &cli.Command{Name: "demo", Usage: "not built yet", Action: func(*cli.Context) error { return errors.New("demo: not built yet") }}
}

func benchCommand() *cli.Command {
	return &cli.Command{Name: "bench", Usage: "not built yet", Action: func(*cli.Context) error { return errors.New("bench: not built yet") }}
}
