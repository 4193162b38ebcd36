package election

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/tlsconf"
)

// Peer is one voter of the initial configuration.
type Peer struct {
	ID   string
	Addr string
}

// FormatPeers is peers as ParsePeers reads them: "id@host:port,...".
func FormatPeers(peers []Peer) string {
	parts := make([]string, len(peers))
	for i, p := range peers {
		parts[i] = p.ID + "@" + p.Addr
	}
	return strings.Join(parts, ",")
}

// ParsePeers parses "id@host:port,id@host:port".
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "@")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want ID@HOST:PORT", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: address: %w", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %q appears twice", id)
		}
		seen[id] = true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	return out, nil
}

// CheckAddr checks that addr is a HOST:PORT another node can dial: the port
// a number in 1..65535, the host non-empty and resolvable (bounded by ctx
// and two seconds).
func CheckAddr(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want HOST:PORT: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q: no host; other nodes cannot dial it", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("address %q: port %q: want 1 to 65535", addr, port)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
		return fmt.Errorf("address %q: host %q does not resolve: %w", addr, host, err)
	}
	return nil
}

// Config is the Raft side of a node.
type Config struct {
	ID            string
	BindAddr      string // raft TCP listen address; unused with Transport
	AdvertiseAddr string // address the other nodes dial; defaults to BindAddr
	// Transport, when set, carries this node's raft traffic instead of a TCP
	// transport on BindAddr (tests: raft.InmemTransport). The node closes it
	// when it shuts down, as it does its own; a restarted node needs a new
	// one. DialOverrides do not apply to it.
	Transport raft.Transport
	// Peers is the initial voter set. It is used only to bootstrap a node
	// with no state; it must contain this node. A node with no state and
	// neither Peers nor Join begins a group of one, itself.
	Peers []Peer
	// Join makes a node with no state wait to be added to a group by its
	// leader (member add) instead of beginning a group of its own. A node
	// with state ignores it: it restarts as the member it is. It excludes
	// Peers and NewGroup.
	Join bool
	// NewGroup starts the node's existing state (a copy of a node's data
	// directory) as a new group whose only voter is this node, at ID and
	// AdvertiseAddr: its log, every message in it, is kept (newgroup.go).
	// Start fails with ErrNothingToRecover when the stores hold no state.
	// It excludes Peers.
	NewGroup bool
	// NewGroupDone, with NewGroup, says this state was recovered as a new
	// group before: Start then refuses with ErrRecoveredBefore when the
	// group has other members since, instead of leaving them out again.
	NewGroupDone bool
	// DialOverrides maps server ids to the address this node dials for them
	// instead of the configured one. Fault-injection tests put a proxy per
	// direction between nodes this way; production leaves it empty.
	DialOverrides map[string]string
	// TLS, when on, carries raft traffic over TLS (internal/tlsconf): the
	// raft port requires a certificate the cluster CA signed from every
	// node that dials it, and this node dials its peers with its own. A
	// permissive node also takes plaintext. Nil: plaintext.
	TLS *tlsconf.Node

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	MaxAppendEntries   int
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	// RecoveryTimeout: after an unclean start, the node votes and campaigns
	// again once it has heard from no leader for this long (recover.go);
	// 0 means DefaultRecoveryTimeout.
	RecoveryTimeout time.Duration
	// CommitBound, when set, bounds the commit index this node sends its
	// followers as leader: the last index its own log has fsynced, when
	// the log returns a leader's appends before their fsync (raftlog's
	// Stores.OverlapWhen and Stores.Stored). A follower then never applies
	// an entry whose only copies beyond its own may still be lost.
	CommitBound func() uint64

	Logger hclog.Logger
}

// DefaultConfig holds the timeouts measured to fail over in well under a
// second on loopback and in containers.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout: 250 * time.Millisecond,
		ElectionTimeout:  250 * time.Millisecond,
		// A lease as long as the heartbeat timeout: at half of it, leaders on
		// a loaded 2-core machine stepped down dozens of times a minute
		// (docs/BENCHMARKS.md). A dead leader is replaced just as fast.
		LeaderLeaseTimeout: 250 * time.Millisecond,
		// How long the leader waits, when nothing new is to be sent, before
		// it tells the followers the commit index anyway: a follower
		// applies the last entry of a burst up to this late. 50 ms halves
		// an idle group's CPU (docs/BENCHMARKS.md) but left followers
		// behind long enough that a group under steady small writes was
		// rarely seen with every node at the same index; kept at 5 ms.
		CommitTimeout:    5 * time.Millisecond,
		MaxAppendEntries: 128,
		// Snapshots hold metadata only, so they are cheap. One every
		// 8,192 entries, looked for every 250-500 ms (so that a node
		// restarted far behind its last snapshot takes one while it
		// catches up), bounds what a restart reads and replays before the
		// node is in sync: raft scans every entry after the snapshot for
		// configuration changes, and the log's tail is verified.
		SnapshotThreshold: 8192,
		SnapshotInterval:  250 * time.Millisecond,
	}
}

// Validate names the field and value of the first problem.
func (c *Config) Validate() error {
	if c.ID == "" {
		return errors.New("id: empty; every node needs a unique id")
	}
	if c.NewGroup && len(c.Peers) > 0 {
		return errors.New("peers: a node recovered as a new group is its only voter; add the others with member add")
	}
	if c.Join && len(c.Peers) > 0 {
		return fmt.Errorf("--join with --peers %s: a joining node waits to be added with member add; give one or the other", FormatPeers(c.Peers))
	}
	if c.Join && c.NewGroup {
		return errors.New("--join with --recover-as-new-group: a recovered node is the only voter of a new group, a joining one waits to be added to a group; give one or the other")
	}
	if c.Transport == nil {
		if _, _, err := net.SplitHostPort(c.BindAddr); err != nil {
			return fmt.Errorf("raft address %q: %w", c.BindAddr, err)
		}
	}
	if c.HeartbeatTimeout < 5*time.Millisecond {
		return fmt.Errorf("heartbeat-timeout %s: must be at least 5ms", c.HeartbeatTimeout)
	}
	if c.ElectionTimeout < c.HeartbeatTimeout {
		return fmt.Errorf("election-timeout %s: must be at least heartbeat-timeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout <= 0 || c.LeaderLeaseTimeout > c.HeartbeatTimeout {
		return fmt.Errorf("leader lease %s: must be in (0, heartbeat-timeout %s]", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.CommitTimeout < time.Millisecond {
		return fmt.Errorf("commit-timeout %s: must be at least 1ms", c.CommitTimeout)
	}
	if c.MaxAppendEntries < 1 || c.MaxAppendEntries > 1024 {
		return fmt.Errorf("max-append-entries %d: must be 1..1024", c.MaxAppendEntries)
	}
	if len(c.Peers) > 0 {
		found := false
		for _, p := range c.Peers {
			if p.ID == c.ID {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("--peers %s: this node's id %q is not in it (give every member as ID@RAFTADDR, this one included)", FormatPeers(c.Peers), c.ID)
		}
	}
	return nil
}

type dialOverrides map[string]string

func (d dialOverrides) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if a, ok := d[string(id)]; ok {
		return raft.ServerAddress(a), nil
	}
	return "", fmt.Errorf("no dial override for %s", id) // the transport then dials the configured address
}

// ParseDialOverrides parses "id=host:port,id=host:port".
func ParseDialOverrides(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("dial override %q: want ID=HOST:PORT", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("dial override %q: %w", part, err)
		}
		out[id] = addr
	}
	return out, nil
}
