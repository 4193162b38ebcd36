// Package testbin builds the raftmq binary for the tests that run it as
// real processes (integration, integration/chaos) and for the images the
// compose tests build: one `go build ./cmd/raftmq` per test process, with
// CGO_ENABLED=0, whoever asks first.
//
// It never runs the binary and never builds anything but ./cmd/raftmq.
package testbin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EnvBinary names a prebuilt binary to use instead of building one.
const EnvBinary = "RAFTMQ_IT_BINARY"

var (
	once    sync.Once
	binPath string
	binErr  error
)

// Path returns the raftmq binary for this test process: $RAFTMQ_IT_BINARY
// when set, else ./cmd/raftmq built on the first call. The binary lives in
// a per-user directory under the temp dir, named after this process;
// binaries of test processes that are gone are removed first, so runs
// leave at most one behind.
func Path() (string, error) {
	once.Do(func() {
		if p := os.Getenv(EnvBinary); p != "" {
			binPath = p
			return
		}
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("raftmq-it-bin-%d", os.Getuid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			binErr = err
			return
		}
		old, _ := filepath.Glob(filepath.Join(dir, "raftmq-*"))
		for _, f := range old {
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(f), "raftmq-"))
			if err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
				os.Remove(f)
			}
		}
		out := filepath.Join(dir, fmt.Sprintf("raftmq-%d", os.Getpid()))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		if binErr = Build(ctx, out, runtime.GOOS, runtime.GOARCH, false); binErr == nil {
			binPath = out
			fmt.Fprintf(os.Stderr, "testbin: built %s in %v\n", out, time.Since(start).Round(time.Millisecond))
		}
	})
	return binPath, binErr
}

// Build compiles ./cmd/raftmq for goos/goarch into out, static
// (CGO_ENABLED=0); stripped also builds it -trimpath and without symbols,
// as for an image. A failed build is tried twice more, 10 seconds apart: a
// file half written by an editor fails it for a moment.
func Build(ctx context.Context, out, goos, goarch string, stripped bool) error {
	root, err := Root()
	if err != nil {
		return err
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		args := []string{"build", "-o", out}
		if stripped {
			args = append(args, "-trimpath", "-ldflags=-s -w")
		}
		cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/raftmq")...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		msg, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		last = fmt.Errorf("go build ./cmd/raftmq (%s/%s): %w\n%s", goos, goarch, err, msg)
		select {
		case <-ctx.Done():
			return last
		case <-time.After(10 * time.Second):
		}
	}
	return last
}

// Root is the module's root directory (where go.mod is), found from this
// source file.
func Root() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testbin: runtime.Caller failed")
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("testbin: no go.mod in %s: %w", root, err)
	}
	return root, nil
}
