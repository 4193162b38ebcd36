package election

import (
	"context"
	"fmt"
	"net"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// Server is one member of the configuration.
type Server struct {
	ID    string
	Addr  string
	Voter bool
}

// Servers returns the current configuration, sorted by id.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, translate(err)
	}
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Transfer hands leadership to the server with the given id, or to the most
// caught-up follower when id is empty. It returns once a new leader exists.
func (n *Node) Transfer(id string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	var f raft.Future
	if id == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		srv, err := n.server(id)
		if err != nil {
			return err
		}
		if !srv.Voter {
			return fmt.Errorf("%w: %s is not a voter", ErrRefused, id)
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(srv.Addr))
	}
	if err := f.Error(); err != nil {
		return fmt.Errorf("leadership transfer: %w", translate(err))
	}
	return nil
}

func (n *Node) server(id string) (Server, error) {
	servers, err := n.Servers()
	if err != nil {
		return Server{}, err
	}
	for _, s := range servers {
		if s.ID == id {
			return s, nil
		}
	}
	return Server{}, fmt.Errorf("%w: %q", ErrNoSuchServer, id)
}

// Reachable dials the raft address this node would use for server id at
// addr (a dial override first), as the transport does, and hangs up. It
// tells whether anything listens there, bounded by ctx and two seconds.
func (n *Node) Reachable(ctx context.Context, id, addr string) error {
	if a, ok := n.cfg.DialOverrides[id]; ok {
		addr = a
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// AddNonvoter adds a server that receives the log but does not vote.
func (n *Node) AddNonvoter(id, addr string) error {
	return n.grow(n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second))
}

// Promote turns a (caught-up) non-voter into a voter.
func (n *Node) Promote(id, addr string) error {
	return n.grow(n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, 10*time.Second))
}

// grow waits for a change that appends to the log, after ending the holds
// of appends to the followers (quiet.go) as an Apply does.
func (n *Node) grow(f raft.Future) error {
	n.trans.quiet.applied()
	return translate(f.Error())
}

// Remove removes a server. Unless force is set it refuses to remove the
// leader itself or to leave fewer voters than a quorum of the current ones
// needs to stay available.
func (n *Node) Remove(id string, force bool) error {
	servers, err := n.Servers()
	if err != nil {
		return err
	}
	var target *Server
	voters := 0
	for i, s := range servers {
		if s.Voter {
			voters++
		}
		if s.ID == id {
			target = &servers[i]
		}
	}
	if target == nil {
		return fmt.Errorf("%w: %q", ErrNoSuchServer, id)
	}
	if !force {
		if id == n.cfg.ID {
			return fmt.Errorf("%w: %s is the leader; run `raftmq leader transfer` first or pass --force", ErrRefused, id)
		}
		if target.Voter && voters-1 < 3 {
			return fmt.Errorf("%w: removing %s leaves %d voter(s), which cannot survive any failure; pass --force to do it anyway", ErrRefused, id, voters-1)
		}
	}
	return n.grow(n.raft.RemoveServer(raft.ServerID(id), 0, 10*time.Second))
}
