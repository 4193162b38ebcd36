package localgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one server process at a time: started, signalled and waited
// for by PID, its output appended to a log file across restarts. The zero
// value is a process never started.
type Process struct {
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current process has been reaped
	waitErr  error
	paused   bool
	logStart int64
}

// errNotRunning is what signalling a process that is not running returns.
var errNotRunning = errors.New("not running")

// Launch starts exe with args, with this process's environment minus
// RAFTMQ_* variables (Env). Its stdout and stderr are appended to logPath
// after a line "=== TIME EXE ARGS"; logStart is the log's size before that
// line, where this run's output begins. The server gets its own process
// group (a Ctrl-C of the terminal reaches only the parent, which decides
// what happens to the servers) and is killed when the parent dies.
func (p *Process) Launch(exe string, args []string, logPath string) (logStart int64, err error) {
	if p.Running() {
		return 0, fmt.Errorf("already running (pid %d)", p.PID())
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("open log: %w", err)
	}
	if st, err := logf.Stat(); err == nil {
		logStart = st.Size()
	}
	fmt.Fprintf(logf, "=== %s %s %s\n", time.Now().Format("15:04:05.000"), exe, strings.Join(args, " "))
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return 0, err
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.waitErr, p.paused, p.logStart = cmd, exited, nil, false, logStart
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	return logStart, nil
}

// Env is this process's environment without RAFTMQ_* variables, so
// that a user's settings for the client commands do not reach the servers.
func Env() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "RAFTMQ_") {
			env = append(env, e)
		}
	}
	return env
}

// Signal sends sig to the current process and returns its PID; it does not
// wait. SIGSTOP and SIGCONT are remembered for Paused.
func (p *Process) Signal(sig syscall.Signal) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.exited) {
		return 0, errNotRunning
	}
	pid := p.cmd.Process.Pid
	if err := syscall.Kill(pid, sig); err != nil {
		return pid, fmt.Errorf("signal %v to pid %d: %w", sig, pid, err)
	}
	if sig == syscall.SIGSTOP || sig == syscall.SIGCONT {
		p.paused = sig == syscall.SIGSTOP
	}
	return pid, nil
}

// SignalAndWait sends sig (first SIGCONT to a paused process, which cannot
// act on anything but SIGKILL while stopped) and waits up to timeout for the
// process to exit. It returns the PID.
func (p *Process) SignalAndWait(sig syscall.Signal, timeout time.Duration) (int, error) {
	paused := p.Paused()
	pid, err := p.Signal(sig)
	if err != nil {
		return pid, err
	}
	if sig != syscall.SIGKILL && paused {
		p.Signal(syscall.SIGCONT)
	}
	if !p.Wait(timeout) {
		return pid, fmt.Errorf("pid %d still running %s after %v", pid, timeout, sig)
	}
	return pid, nil
}

// LogStart is the size the log had when the current process started:
// where its output begins.
func (p *Process) LogStart() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logStart
}

// PID is the current process id, 0 if never started.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process was started and has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.exited)
}

// Paused reports whether the process was sent SIGSTOP and not SIGCONT.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.cmd != nil && !isClosed(p.exited)
}

// Started reports whether the process was ever started.
func (p *Process) Started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// Exited is closed when the current process has exited (nil if never
// started).
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// Wait waits up to d until the current process has exited; it reports
// whether it has (true for a process never started).
func (p *Process) Wait(d time.Duration) bool {
	ch := p.Exited()
	if ch == nil || isClosed(ch) {
		return true
	}
	if d <= 0 {
		return false
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// WaitErr is the exit status of the last process that exited.
func (p *Process) WaitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
