package localgroup

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Launcher is what a driver of a broker group offers to the code that
// faults it and checks it: the demo and the process and compose tests.
// Local processes (Group.AsLauncher) and docker compose services
// (internal/composegroup) implement it. Node ids name the nodes; every
// action returns a few words on how it was done ("pid 1234", "compose
// kill n2") for the caller's log.
type Launcher interface {
	// Describe says in one line what runs where.
	Describe() string
	// Addrs are the client addresses of every node, AddrOf one node's
	// ("" if unknown).
	Addrs() []string
	AddrOf(id string) string
	// Start starts node id again with its data; Kill crashes it.
	Start(ctx context.Context, id string) (string, error)
	Kill(ctx context.Context, id string) (string, error)
	// Pause freezes node id (it keeps its connections and answers
	// nothing); Resume lets it go on.
	Pause(ctx context.Context, id string) (string, error)
	Resume(ctx context.Context, id string) (string, error)
	// Leader is the id of the node the group says leads.
	Leader(ctx context.Context) (string, error)
	// DataDir is node id's data directory on this host, "" where it is
	// not reachable from here (a container volume).
	DataDir(id string) string
	// LogTail is the end of node id's log, for error reports.
	LogTail(id string) string
	// Close stops what the launcher started, or restarts what it killed.
	Close() error
}

// Cutter is what a Launcher offers when it can cut a node off the network
// (Group with Config.Partitionable).
type Cutter interface {
	Cut(id string) (string, error)
	Heal(id string) (string, error)
}

var (
	_ Launcher = (*groupLauncher)(nil)
	_ Cutter   = (*groupLauncher)(nil)
)

// AsLauncher is g as a Launcher (and a Cutter).
func (g *Group) AsLauncher() Launcher { return &groupLauncher{g} }

// GroupOf returns the Group behind a Launcher made by AsLauncher.
func GroupOf(l Launcher) (*Group, bool) {
	gl, ok := l.(*groupLauncher)
	if !ok {
		return nil, false
	}
	return gl.g, true
}

type groupLauncher struct{ g *Group }

func (l *groupLauncher) Describe() string {
	var parts []string
	for _, n := range l.g.Nodes() {
		parts = append(parts, fmt.Sprintf("%s pid %d client %s raft %s", n.ID, n.PID(), n.Client, n.Raft))
	}
	logs := filepath.Join(l.g.Dir(), "n*.log")
	if l.g.cfg.NodeDirs {
		logs = filepath.Join(l.g.Dir(), "n*", "server.log")
	}
	return "nodes: " + strings.Join(parts, "; ") + " (logs: " + logs + ")"
}

func (l *groupLauncher) Addrs() []string { return strings.Split(l.g.ClientAddrs(), ",") }

func (l *groupLauncher) AddrOf(id string) string {
	if n := l.g.Node(id); n != nil {
		return n.Client
	}
	return ""
}

func (l *groupLauncher) Kill(_ context.Context, id string) (string, error) {
	pid, err := l.g.Kill(id)
	return fmt.Sprintf("pid %d", pid), err
}

func (l *groupLauncher) Start(ctx context.Context, id string) (string, error) {
	if err := l.g.Start(ctx, id); err != nil {
		return "", err
	}
	return fmt.Sprintf("pid %d", l.g.Node(id).PID()), nil
}

func (l *groupLauncher) Pause(_ context.Context, id string) (string, error) {
	pid, err := l.g.Pause(id)
	return fmt.Sprintf("pid %d", pid), err
}

func (l *groupLauncher) Resume(_ context.Context, id string) (string, error) {
	pid, err := l.g.Resume(id)
	return fmt.Sprintf("pid %d", pid), err
}

func (l *groupLauncher) Leader(ctx context.Context) (string, error) {
	n, _, err := l.g.Leader(ctx)
	if err != nil {
		return "", err
	}
	return n.ID, nil
}

func (l *groupLauncher) DataDir(id string) string {
	if n := l.g.Node(id); n != nil {
		return n.Data
	}
	return ""
}

func (l *groupLauncher) LogTail(id string) string {
	if n := l.g.Node(id); n != nil {
		return n.LogTail(15)
	}
	return ""
}

func (l *groupLauncher) Close() error { return l.g.Close() }

func (l *groupLauncher) Cut(id string) (string, error) {
	return "its Raft links both ways and its client API", l.g.Cut(id)
}

func (l *groupLauncher) Heal(id string) (string, error) {
	return "every link passes again", l.g.Heal(id)
}

// LeaderOf asks addrs for the leader, as Launcher.Leader does for a group
// reached by its client addresses only.
func LeaderOf(ctx context.Context, addrs []string) (string, error) {
	return Prober{}.LeaderOf(ctx, addrs)
}

// LeaderOf is LeaderOf over p's TLS.
func (p Prober) LeaderOf(ctx context.Context, addrs []string) (string, error) {
	st, err := p.LeaderStatus(ctx, addrs, 2*time.Second)
	if err != nil {
		return "", err
	}
	return st.LeaderId, nil
}
