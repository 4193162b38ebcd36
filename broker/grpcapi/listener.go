package grpcapi

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/peer"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// A node may serve its API on two listeners, as Kafka and Redpanda brokers
// do: the internal one (the nodes' own network: the other nodes, and
// clients beside them) and an external one (a port published outside that
// network). Every address this API names, the leader's, each node's and a
// read suggestion's, is the address of the listener the client connected
// through. The broker below speaks internal addresses only; the node that
// answers the client (the edge, also when it forwarded the call) rewrites
// them by node id for a client of the external listener.

// ExternalListener marks l as the external listener: calls accepted on it
// are told the nodes' external addresses (broker.Broker.ExternalAddr).
// Serve it with the same gRPC server as the internal listener.
func ExternalListener(l net.Listener) net.Listener { return externalListener{l} }

type externalListener struct{ net.Listener }

func (l externalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return externalConn{c}, nil
}

// externalConn tags its local address, which gRPC hands to every call as
// peer.Peer.LocalAddr (through TLS too: tls.Conn passes LocalAddr on).
type externalConn struct{ net.Conn }

func (c externalConn) LocalAddr() net.Addr { return externalAddr{c.Conn.LocalAddr()} }

type externalAddr struct{ net.Addr }

// viaExternal reports whether the call came in through the external
// listener. A forwarded call came from a node, never from a client: the
// edge node rewrites its answer.
func viaExternal(ctx context.Context) bool {
	if forwarded(ctx) {
		return false
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	_, ext := p.LocalAddr.(externalAddr)
	return ext
}

// externalStatus rewrites a status answer for a client of the external
// listener.
func (s *Server) externalStatus(ctx context.Context, r *api.StatusResponse) {
	if r == nil || !viaExternal(ctx) {
		return
	}
	if r.LeaderId != "" {
		if a := s.b.ExternalAddr(r.LeaderId); a != "" {
			r.LeaderAddress = a
		}
	}
	for _, n := range r.Nodes {
		if a := s.b.ExternalAddr(n.Id); a != "" {
			n.ClientAddress = a
		}
	}
}

// externalPull rewrites a pull answer's suggestion for a client of the
// external listener.
func (s *Server) externalPull(ctx context.Context, r *api.PullResponse) {
	if r == nil || r.Suggestion == nil || r.Suggestion.NodeId == "" || !viaExternal(ctx) {
		return
	}
	if a := s.b.ExternalAddr(r.Suggestion.NodeId); a != "" {
		r.Suggestion.Address = a
	}
}

// externalErr names the leader's external address in a not-leader error
// told to a client of the external listener.
func (s *Server) externalErr(ctx context.Context, err error) error {
	var nl *broker.NotLeaderError
	if err == nil || !errors.As(err, &nl) || nl.LeaderID == "" || !viaExternal(ctx) {
		return err
	}
	if a := s.b.ExternalAddr(nl.LeaderID); a != "" {
		nl.ClientAddr = a
	}
	return err
}
