// Command raftmq is the broker node and its command-line tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr); err != nil {
		if !errors.As(err, new(reported)) {
			fmt.Fprintln(os.Stderr, "raftmq:", err)
		}
		os.Exit(exitCode(err))
	}
}
