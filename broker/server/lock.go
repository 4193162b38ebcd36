package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dirLock is an exclusive flock on the LOCK file of a data directory, held
// for as long as the node runs. Without it a second process on the same
// directory bound its client port and then waited forever, silently, for
// the stable store's bolt lock. The kernel drops the lock when the holder
// exits, however it exits, so a stale LOCK file never blocks a restart.
type dirLock struct{ f *os.File }

// lockRetry is how often lockDataDir tries again while the lock is held.
const lockRetry = 50 * time.Millisecond

// lockDataDir takes the lock of dir (creating dir), waiting up to timeout
// for a holder that is exiting. It writes this process's id and command line
// into the file, and names the holder's when it gives up.
func lockDataDir(dir string, timeout time.Duration) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	p := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		if time.Now().After(deadline) {
			holder := lockHolder(f)
			f.Close()
			return nil, fmt.Errorf("data directory %s is in use by %s; stop it first or use another --data (waited %v for %s)",
				dir, holder, timeout, p)
		}
		time.Sleep(lockRetry)
	}
	self := fmt.Sprintf("%d\n%s\n", os.Getpid(), commandLine(os.Args))
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(self), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", p, err)
	}
	return &dirLock{f: f}, nil
}

// lockHolder describes the process named in a held LOCK file:
// "process 1234 (raftmq server --id n1 ...)".
func lockHolder(f *os.File) string {
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	pid, cmd, _ := strings.Cut(strings.TrimSpace(string(b[:n])), "\n")
	if _, err := strconv.Atoi(pid); err != nil {
		return "another process (its LOCK file names none yet)"
	}
	if cmd = strings.TrimSpace(cmd); cmd == "" {
		return "process " + pid
	}
	return fmt.Sprintf("process %s (%s)", pid, cmd)
}

// commandLine is args as one line, the program by its base name.
func commandLine(args []string) string {
	if len(args) == 0 {
		return ""
	}
	out := append([]string{filepath.Base(args[0])}, args[1:]...)
	return strings.ReplaceAll(strings.Join(out, " "), "\n", " ")
}

// release drops the lock; it is idempotent.
func (l *dirLock) release() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the only descriptor releases the flock
		l.f = nil
	}
}
