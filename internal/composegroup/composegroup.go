// Package composegroup drives a broker group that runs as docker compose
// services (docker-compose.yml: n1, n2, n3, node ids equal to service
// names) from the host: kill, start, pause and unpause a service, its
// published client address, the leader. It implements localgroup.Launcher,
// so `raftmq demo --docker` and the compose tests in integration drive it
// as they drive local processes.
//
// It runs `docker compose` (or docker-compose v1) and nothing else; it never
// builds images and never reads a container's data.
package composegroup

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/internal/localgroup"
)

// ClientPort is the port of a node's external client listener inside its
// container, the one the compose files publish on the host.
const ClientPort = "9100"

// Config says which compose project to drive.
type Config struct {
	// Command is the compose command, e.g. ["docker", "compose"]; default
	// Command().
	Command []string
	// File is the compose file; Project, when set, the project name (-p).
	File    string
	Project string
	// Env is the environment of every compose command (nil: this
	// process's); Dir its working directory.
	Env []string
	Dir string
	// Services are the node services; default n1, n2, n3.
	Services []string
	// Files are more compose files layered over File (-f each, in order):
	// docker-compose.secure.yml.
	Files []string
	// ClientTLS is the TLS of the group's status calls (nil: plaintext).
	ClientTLS *tls.Config
}

// Group is one compose project of raftmq nodes. Methods are safe for
// concurrent use.
type Group struct {
	cfg  Config
	base []string // compose command with -p and -f

	mu     sync.Mutex
	addr   map[string]string // service -> published client address
	killed map[string]bool
	paused map[string]bool
}

var _ localgroup.Launcher = (*Group)(nil)

// Command is the compose command that works here: ["docker", "compose"]
// when the plugin answers, else ["docker-compose"].
func Command(ctx context.Context) ([]string, error) {
	vctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if exec.CommandContext(vctx, "docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}, nil
	}
	if p, err := exec.LookPath("docker-compose"); err == nil {
		out, err := exec.CommandContext(vctx, p, "version").CombinedOutput()
		if err == nil {
			return []string{p}, nil
		}
		return nil, fmt.Errorf("docker-compose version: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil, errors.New("neither `docker compose` nor `docker-compose` works")
}

// New prepares a Group; it runs nothing. Discover finds the services'
// addresses once they run.
func New(ctx context.Context, cfg Config) (*Group, error) {
	if len(cfg.Command) == 0 {
		cmd, err := Command(ctx)
		if err != nil {
			return nil, err
		}
		cfg.Command = cmd
	}
	if len(cfg.Services) == 0 {
		cfg.Services = []string{"n1", "n2", "n3"}
	}
	g := &Group{cfg: cfg, addr: map[string]string{}, killed: map[string]bool{}, paused: map[string]bool{}}
	g.base = append([]string{}, cfg.Command...)
	if cfg.Project != "" {
		g.base = append(g.base, "-p", cfg.Project)
	}
	if cfg.File != "" {
		g.base = append(g.base, "-f", cfg.File)
	}
	for _, f := range cfg.Files {
		g.base = append(g.base, "-f", f)
	}
	return g, nil
}

// Attach is New and Discover: a Group of a project that runs.
func Attach(ctx context.Context, cfg Config) (*Group, error) {
	g, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := g.Discover(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// Discover asks compose for every service's published client port.
func (g *Group) Discover(ctx context.Context) error {
	for _, s := range g.cfg.Services {
		out, err := g.Run(ctx, "port", s, ClientPort)
		addr := strings.TrimSpace(out)
		if err != nil || addr == "" || strings.HasSuffix(addr, ":0") {
			return fmt.Errorf("service %s of %s is not running (run `make up` first): %s %v", s, g.cfg.File, addr, err)
		}
		g.mu.Lock()
		g.addr[s] = strings.Replace(addr, "0.0.0.0:", "127.0.0.1:", 1)
		g.mu.Unlock()
	}
	return nil
}

// Run runs a compose subcommand on the project (at most a minute unless
// ctx ends first) and returns its combined output.
func (g *Group) Run(ctx context.Context, args ...string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return g.RunLong(rctx, args...)
}

// RunLong is Run bounded by ctx only (compose up, down, restart).
func (g *Group) RunLong(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, g.base[0], append(append([]string{}, g.base[1:]...), args...)...)
	cmd.Env, cmd.Dir = g.cfg.Env, g.cfg.Dir
	// Do not hang on grandchildren holding the pipes after a kill.
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return out.String(), fmt.Errorf("%s %s: %w", strings.Join(g.cfg.Command, " "), strings.Join(args, " "), err)
	}
	return out.String(), nil
}

func (g *Group) Describe() string {
	var parts []string
	for _, s := range g.cfg.Services {
		parts = append(parts, s+" "+g.addrOfService(s))
	}
	return "docker compose services: " + strings.Join(parts, ", ")
}

func (g *Group) addrOfService(s string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.addr[s]
}

func (g *Group) Addrs() []string {
	var out []string
	for _, s := range g.cfg.Services {
		out = append(out, g.addrOfService(s))
	}
	return out
}

// service maps a node id to its service: by the node's client address as
// the group reports it, else by name.
func (g *Group) service(id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := (localgroup.Prober{TLS: g.cfg.ClientTLS}).LeaderStatus(ctx, g.Addrs(), 2*time.Second); err == nil {
		for _, n := range st.Nodes {
			if n.Id != id {
				continue
			}
			for _, s := range g.cfg.Services {
				if g.addrOfService(s) == n.ClientAddress {
					return s, nil
				}
			}
		}
	}
	for _, s := range g.cfg.Services {
		if s == id {
			return s, nil
		}
	}
	return "", fmt.Errorf("no compose service for node %s", id)
}

// do runs compose verb on node id's service and records it in mark.
func (g *Group) do(ctx context.Context, verb, id string, mark map[string]bool, on bool) (string, error) {
	s, err := g.service(id)
	if err != nil {
		return "", err
	}
	if out, err := g.Run(ctx, verb, s); err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
	}
	g.mu.Lock()
	if on {
		mark[s] = true
	} else {
		delete(mark, s)
	}
	g.mu.Unlock()
	return "compose " + verb + " " + s, nil
}

func (g *Group) Kill(ctx context.Context, id string) (string, error) {
	return g.do(ctx, "kill", id, g.killed, true)
}

func (g *Group) Start(ctx context.Context, id string) (string, error) {
	return g.do(ctx, "start", id, g.killed, false)
}

func (g *Group) Pause(ctx context.Context, id string) (string, error) {
	return g.do(ctx, "pause", id, g.paused, true)
}

func (g *Group) Resume(ctx context.Context, id string) (string, error) {
	return g.do(ctx, "unpause", id, g.paused, false)
}

func (g *Group) Leader(ctx context.Context) (string, error) {
	return localgroup.Prober{TLS: g.cfg.ClientTLS}.LeaderOf(ctx, g.Addrs())
}

// DataDir is "": the data lives in a container volume.
func (g *Group) DataDir(string) string { return "" }

func (g *Group) AddrOf(id string) string {
	if s, err := g.service(id); err == nil {
		return g.addrOfService(s)
	}
	return ""
}

func (g *Group) LogTail(id string) string {
	s, err := g.service(id)
	if err != nil {
		return ""
	}
	out, _ := g.Run(context.Background(), "logs", "--tail", "15", s)
	var sb strings.Builder
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		sb.WriteString("    " + sc.Text() + "\n")
	}
	return sb.String()
}

// Close unpauses and starts every service this Group paused or killed and
// did not bring back.
func (g *Group) Close() error {
	g.mu.Lock()
	var paused, killed []string
	for s := range g.paused {
		paused = append(paused, s)
	}
	for s := range g.killed {
		killed = append(killed, s)
	}
	g.mu.Unlock()
	var errs []error
	for _, s := range paused {
		if _, err := g.Run(context.Background(), "unpause", s); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range killed {
		if _, err := g.Run(context.Background(), "start", s); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
