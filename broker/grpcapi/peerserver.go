package grpcapi

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/store"
)

// PeerServer implements api.PeerServer, the node-to-node service, over a
// broker.
type PeerServer struct {
	api.UnimplementedPeerServer
	b     *broker.Broker
	peers *Peers // nil: a Register this node cannot answer is not forwarded
}

// NewPeerServer returns the node-to-node face of b; peers is used to
// forward Register to the leader.
func NewPeerServer(b *broker.Broker, peers *Peers) *PeerServer {
	return &PeerServer{b: b, peers: peers}
}

// NodeState tells another node this node's role, applied index and load.
func (s *PeerServer) NodeState(ctx context.Context, req *api.NodeStateRequest) (*api.NodeStateResponse, error) {
	st := s.b.NodeState()
	return &api.NodeStateResponse{Id: st.ID, Role: st.Role, Term: st.Term, AppliedIndex: st.Applied, CommitIndex: st.Commit,
		LastIndex: st.Last, FirstIndex: st.First, Load: st.Load, Loaded: st.Loaded, LeaderId: st.LeaderID,
		Damaged: st.Damaged, DamagedIndex: st.DamagedIndex, DamagedReason: st.DamagedReason,
		ServedAsLeader: st.ServedAsLeader, ServedAsFollower: st.ServedAsFollower, BatchReadVersion: st.BatchReadVersion}, nil
}

// Register records a node's addresses.
func (s *PeerServer) Register(ctx context.Context, req *api.RegisterRequest) (*api.RegisterResponse, error) {
	n := store.NodeInfo{ID: req.Id, ClientAddr: req.ClientAddress, HTTPAddr: req.HttpAddress, PeerAddr: req.PeerAddress,
		ExternalAddr: req.ExternalAddress}
	if n.PeerAddr == "" {
		n.PeerAddr = n.ClientAddr
	}
	return forward(ctx, s.b, s.peers, func() (*api.RegisterResponse, error) {
		return &api.RegisterResponse{}, s.b.Register(ctx, n)
	}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.RegisterResponse, error) {
		return peerCall(ctx, cc, req, api.PeerClient.Register, legacyRegister)
	})
}

// The Peer methods' names on the Broker service, before the Peer service
// existed: nodes of that release call them, and answer only them.
const (
	legacyNodeState = "/raftmq.v1.Broker/NodeState"
	legacyRegister  = "/raftmq.v1.Broker/Register"
)

// legacyHandler serves the legacy names with s (gRPC calls it for methods
// no registered service has), so that nodes of the release before the Peer
// service still reach this node during a rolling upgrade.
func legacyHandler(s api.PeerServer) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		switch method {
		case legacyNodeState:
			return serveUnary(stream, s.NodeState)
		case legacyRegister:
			return serveUnary(stream, s.Register)
		}
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
}

// serveUnary answers one unary call that arrived as a stream.
func serveUnary[Q any, R any](stream grpc.ServerStream, f func(context.Context, *Q) (*R, error)) error {
	req := new(Q)
	if err := stream.RecvMsg(req); err != nil {
		return err
	}
	resp, err := f(stream.Context(), req)
	if err != nil {
		return err
	}
	return stream.SendMsg(resp)
}
