package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftmq/raftmq/internal/composegroup"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// attachCompose finds the running compose group of file (default:
// docker-compose.yml here or in a parent directory) and checks it has a
// leader.
func attachCompose(ctx context.Context, file string, tc *tls.Config) (*composegroup.Group, error) {
	var more []string
	if files := strings.Split(file, ","); len(files) > 1 {
		file, more = files[0], files[1:]
	}
	if file == "" {
		f, err := findUp("docker-compose.yml")
		if err != nil {
			return nil, fmt.Errorf("--docker: %w; run from the repository or pass --compose-file", err)
		}
		file = f
	}
	g, err := composegroup.Attach(ctx, composegroup.Config{File: file, Files: more, ClientTLS: tc})
	if err != nil {
		return nil, fmt.Errorf("--docker: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := (localgroup.Prober{TLS: tc}).LeaderStatus(sctx, g.Addrs(), 2*time.Second); err != nil {
		return nil, fmt.Errorf("--docker: the compose group at %s has no leader (run `make up` first): %w", strings.Join(g.Addrs(), ","), err)
	}
	return g, nil
}

// findUp looks for name in the working directory and its parents.
func findUp(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found here or in a parent directory", name)
		}
		dir = parent
	}
}
