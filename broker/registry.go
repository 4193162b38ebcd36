package broker

import (
	"context"
	"time"

	"github.com/raftmq/raftmq/election"
)

// needsRegister reports whether this follower's addresses are missing from
// the replicated node registry, or differ from its own.
func (b *Broker) needsRegister() bool {
	if b.node.Role() == election.Leader {
		return false
	}
	cur, ok := b.fsm.Node(b.cfg.NodeID)
	return !ok || cur != b.info()
}

// registerWithLeader sends this node's addresses to the leader, which
// records them in the registry through raft.
func (b *Broker) registerWithLeader() {
	id := b.node.LeaderID()
	if id == "" {
		return
	}
	leader, ok := b.fsm.Node(id)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	if err := b.peers.Register(ctx, leader.PeerAddr, b.info()); err != nil {
		b.log.Debug("register with leader", "leader", id, "error", err)
	}
}

// ExternalAddr returns the API address of node id that clients connected
// through an external listener are told: its registered external address,
// else its client address (a node with one listener), else "".
func (b *Broker) ExternalAddr(id string) string {
	if id == "" {
		return ""
	}
	if id == b.cfg.NodeID && b.cfg.ExternalAddr != "" {
		return b.cfg.ExternalAddr
	}
	n, ok := b.fsm.Node(id)
	switch {
	case ok && n.ExternalAddr != "":
		return n.ExternalAddr
	case ok:
		return n.ClientAddr
	case id == b.cfg.NodeID:
		return b.cfg.ClientAddr
	}
	return ""
}
