// Package grpcapi serves a broker over gRPC (api/raftmq.proto) and is the
// gRPC client nodes use to reach each other.
//
// It encodes, decodes and forwards: protobuf to broker types and back, and
// broker errors to gRPC status codes (toStatus, the one place, which reads
// the broker's table through broker.CodeOf). Which calls only the leader
// answers is the broker's decision; when the broker names another node as
// leader, the request is forwarded there, so a client may call any node. It never touches raft or the FSM directly.
package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/store"
)

// MaxMessageSize bounds one gRPC message this node sends (api.MaxMessageSize:
// a pull answers up to 64 MiB).
const MaxMessageSize = api.MaxMessageSize

// RecvLimit is the largest gRPC message a node with the given request bound
// (broker.Config.MaxRequestBytes) reads. Protobuf spends more bytes than the
// log's encoding only on field tags: at worst 7 bytes for a property the log
// stores in 3 (a one-byte name, an empty value), so 5/2 of the bound always
// lets a request within the bound through to ValidateProduce, which answers
// it with the bound's own error; anything larger is refused by gRPC
// (ResourceExhausted) before it is read into memory.
func RecvLimit(maxRequestBytes int) int { return maxRequestBytes/2*5 + 64<<10 }

const forwardedKey = "raftmq-forwarded-by"

// Server implements api.BrokerServer, the client service, over a broker.
type Server struct {
	api.UnimplementedBrokerServer
	b     *broker.Broker
	peers *Peers
}

// NewServer returns the client face of b; peers is used to forward.
func NewServer(b *broker.Broker, peers *Peers) *Server { return &Server{b: b, peers: peers} }

// RegisterServices registers the services of b on gs: Broker for clients,
// Peer and Txn (txn.go) for the other nodes, Users (users.go) for user
// management.
func RegisterServices(gs *grpc.Server, b *broker.Broker, peers *Peers) {
	api.RegisterBrokerServer(gs, NewServer(b, peers))
	api.RegisterPeerServer(gs, NewPeerServer(b, peers))
	gs.RegisterService(&txnServiceDesc, &txnService{b: b, peers: peers})
	gs.RegisterService(&usersServiceDesc, &usersService{b: b, peers: peers})
}

// streamWorkers is how many goroutines wait to run incoming calls. A call
// started on a fresh goroutine grows its stack on the way to the group
// commit, a few percent of a leader's CPU with 100-byte messages; a pooled
// goroutine keeps its stack. Calls beyond the pool (long polls, bursts)
// get a goroutine of their own, as without the pool.
const streamWorkers = 32

// ServerOptions are the options every raftmq gRPC server of b uses. A
// produce call is refused (ResourceExhausted, which the SDK retries) before
// its request is read while b holds as many produce bytes as it may, so a
// flood of producers waits on its side instead of in this node's memory.
// Calls run on a pool of goroutines (streamWorkers) rather than one new
// goroutine each.
func ServerOptions(b *broker.Broker) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(streamWorkers),
		grpc.ForceServerCodecV2(newServerCodec()),
		grpc.MaxRecvMsgSize(RecvLimit(b.Config().MaxRequestBytes)),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.StaticStreamWindowSize(api.StreamWindow), grpc.StaticConnWindowSize(api.ConnWindow),
		grpc.InTapHandle(admit(b)),
		grpc.UnknownServiceHandler(legacyHandler(NewPeerServer(b, nil))),
	}
}

// PeerCertRequired are the server options of an enforcing node: the Peer
// service (and its legacy names) answers only calls made over TLS with a
// certificate the cluster CA signed, so a host without one can neither
// register addresses with the leader nor poll the nodes' state. The Broker
// service stays open to clients without certificates. User management
// needs such a certificate too unless authEnforcing: then the call's
// credential decides (admin on the cluster, AuthOptions).
func PeerCertRequired(authEnforcing bool) []grpc.ServerOption {
	check := func(ctx context.Context, method string) error {
		if !isPeerMethod(method) || tlsconf.VerifiedPeer(ctx) || (authEnforcing && method == api.UsersCallMethod) {
			return nil
		}
		if method == api.UsersCallMethod {
			return status.Errorf(codes.PermissionDenied, "%s manages users: with --tls-mode enforcing it needs a client certificate signed by the cluster CA (--tls-cert), or nodes with --auth enforcing and an admin's credential", method)
		}
		return status.Errorf(codes.PermissionDenied, "%s is a node-to-node call: it needs a client certificate signed by the cluster CA (--tls-cert)", method)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

func isPeerMethod(m string) bool {
	return strings.HasPrefix(m, "/"+api.Peer_ServiceDesc.ServiceName+"/") || m == legacyNodeState || m == legacyRegister || m == TxnEndMethod || m == ReplyPushMethod ||
		m == api.UsersCallMethod // without enforced authentication, user management is for holders of a cluster certificate
}

// admission is what admit asks of the broker.
type admission interface {
	AdmitProduce() error
	GroupID() string
	Config() broker.Config
}

// admit refuses, before its request is read, a call that names another
// group than b's (sameGroup), and a produce call while b.AdmitProduce
// reports an error.
func admit(b admission) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if err := sameGroup(b, info.Header); err != nil {
			return ctx, err
		}
		if info.FullMethodName == api.Broker_Produce_FullMethodName {
			if err := b.AdmitProduce(); err != nil {
				return ctx, toStatus(err)
			}
		}
		return ctx, nil
	}
}

// sameGroup refuses a call whose api.GroupIDKey names another group id
// than the one b knows: the client knew this address as a node of that
// group, and another group answers here now. A call that names none
// passes, and so does every call while b knows no id (a group not named
// yet, or a node started empty that has not caught up with its group).
func sameGroup(b admission, md metadata.MD) error {
	v := md.Get(api.GroupIDKey)
	if len(v) == 0 || v[0] == "" {
		return nil
	}
	own := b.GroupID()
	if own == "" || own == v[0] {
		return nil
	}
	cfg := b.Config()
	return reasonError(codes.FailedPrecondition, api.ReasonOtherGroup,
		fmt.Sprintf("node %s belongs to group %q (id %s), not to the group with id %s this call is for", cfg.NodeID, cfg.Group, own, v[0]))
}

// toStatus answers err with the gRPC code broker.CodeOf gives it. Clients
// retry Unavailable and Aborted (the latter with the same producer sequence).
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	w := broker.CodeOf(err)
	if w.Err == broker.ErrSequenceReused {
		return sequenceReused(err)
	}
	return status.Error(w.GRPC, err.Error())
}

// sequenceReused is InvalidArgument with an ErrorInfo naming the reason, so
// that a client tells it from other invalid requests without reading the
// message: the request was refused for good and nothing of it was stored.
func sequenceReused(err error) error {
	return reasonError(codes.InvalidArgument, api.ReasonSequenceReused, err.Error())
}

// reasonError is a status error with code and msg that carries an
// ErrorInfo of raftmq's domain naming reason (api/errors.go).
func reasonError(code codes.Code, reason, msg string) error {
	st := status.New(code, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Domain: api.ErrorDomain, Reason: reason}); err == nil {
		st = d
	}
	return st.Err()
}

func forwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedKey)) > 0
}

// call is how every RPC runs: local calls the broker, which decides whether
// this node may answer. When the broker answers that another node leads
// (a *broker.NotLeaderError naming it), the same request goes to that node
// through remote (CallLeader): a forwarded call carries forwardedKey and is
// never forwarded again. When another node replaces that leader while the
// call waits on it, the call is given up there and runs again (local, then
// the new leader). Every broker error leaves through toStatus.
func call[R any](ctx context.Context, s *Server, local func() (R, error), remote func(context.Context, api.BrokerClient) (R, error)) (R, error) {
	return callConn(ctx, s, local, func(ctx context.Context, cc grpc.ClientConnInterface) (R, error) {
		return remote(ctx, api.NewBrokerClient(cc))
	})
}

// callConn is call with remote given the leader's connection.
func callConn[R any](ctx context.Context, s *Server, local func() (R, error), remote func(context.Context, grpc.ClientConnInterface) (R, error)) (R, error) {
	edge := func() (R, error) {
		r, err := local()
		return r, s.externalErr(ctx, err)
	}
	return forward(ctx, s.b, s.peers, edge, remote)
}

// forward is call for any service: remote gets the leader's connection.
func forward[R any](ctx context.Context, lc LeaderChanges, peers *Peers, local func() (R, error), remote func(context.Context, grpc.ClientConnInterface) (R, error)) (R, error) {
	var replaced error // the call as given up on a replaced leader, which may have done it
	for i := 0; ; i++ {
		r, err := local()
		if err == nil {
			return r, nil
		}
		var nl *broker.NotLeaderError
		if peers == nil || !errors.As(err, &nl) || nl.PeerAddr == "" || nl.LeaderID == lc.ID() || forwarded(ctx) {
			return r, afterReplaced(replaced, toStatus(err))
		}
		cc, cerr := peers.Conn(nl.PeerAddr)
		if cerr != nil {
			return r, afterReplaced(replaced, toStatus(err))
		}
		err = CallLeader(ctx, lc, nl.LeaderID, func(ctx context.Context) error {
			var rerr error
			r, rerr = remote(ctx, cc)
			return rerr
		})
		switch {
		case !leaderReplaced(err):
			return r, afterReplaced(replaced, err) // the leader's own answer, a status already
		case i >= replacedRetries:
			return r, toStatus(err)
		}
		replaced = err
	}
}

// afterReplaced is err, the answer to a call that this node first sent to
// a leader that was replaced meanwhile (replaced: why it gave that attempt
// up; nil if there was none). A busy refusal says that nothing of the call
// was done, which no longer holds when the replaced leader may have done
// it: the answer is then an unknown outcome, which a client retries
// without taking it for a failure.
func afterReplaced(replaced, err error) error {
	if replaced == nil || status.Code(err) != codes.ResourceExhausted {
		return err
	}
	return toStatus(fmt.Errorf("%w: %v, after %v", broker.ErrUnknownOutcome, status.Convert(err).Message(), replaced))
}

func produceRequest(req *api.ProduceRequest) broker.ProduceRequest {
	breq := broker.ProduceRequest{Topic: req.Topic, ProducerID: req.ProducerId, Seq: req.Sequence,
		Messages: make([]broker.ProduceMessage, len(req.Messages))}
	for i, m := range req.Messages {
		if m == nil {
			continue
		}
		pm := broker.ProduceMessage{Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body, Timestamp: m.TimestampMs,
			DelayLevel: int(m.DelayLevel), DeliverAt: m.DeliverAtMs}
		if m.Queue != nil {
			pm.Queue, pm.HasQueue = *m.Queue, true
		}
		breq.Messages[i] = pm
	}
	return breq
}

// Produce appends messages.
func (s *Server) Produce(ctx context.Context, req *api.ProduceRequest) (*api.ProduceResponse, error) {
	breq := produceRequest(req)
	return callConn(ctx, s, func() (*api.ProduceResponse, error) {
		res, err := s.b.ClientProduce(ctx, breq)
		if err != nil {
			return nil, err
		}
		out := &api.ProduceResponse{Duplicate: res.Duplicate, NodeId: s.b.ID()}
		if req.PackedAcks {
			if out.PackedAcks = packAcks(&res); out.PackedAcks != nil {
				return out, nil
			}
		}
		out.Acks = make([]*api.Ack, len(res.Acks))
		acks := make([]api.Ack, len(res.Acks)) // one allocation for all acks
		for i, a := range res.Acks {
			acks[i].Queue, acks[i].Offset, acks[i].Id = int32(a.Queue), a.Offset, a.ID()
			if res.DeliverAt != nil {
				acks[i].DeliverAtMs = res.DeliverAt[i]
			}
			out.Acks[i] = &acks[i]
		}
		return out, nil
	}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.ProduceResponse, error) {
		return s.peers.Produce(ctx, cc, req)
	})
}

// packAcks is res's acks as PackedAcks: queues, offsets as differences
// from the previous message's, and the delivery times of a delayed
// request. It is nil when the acks do not name consecutive messages of one
// entry, which PackedAcks cannot say (a request's acks always do).
func packAcks(res *broker.ProduceResult) *api.PackedAcks {
	if len(res.Acks) == 0 {
		return nil
	}
	first := res.Acks[0]
	p := &api.PackedAcks{EntryIndex: first.Index, FirstOrdinal: first.Ordinal, DeliverAtMs: res.DeliverAt,
		Queues: make([]uint32, len(res.Acks)), OffsetDeltas: make([]int64, len(res.Acks))}
	var prev uint64
	for i, a := range res.Acks {
		if a.Index != first.Index || a.Ordinal != first.Ordinal+uint32(i) {
			return nil
		}
		p.Queues[i] = a.Queue
		p.OffsetDeltas[i] = int64(a.Offset - prev)
		prev = a.Offset
	}
	return p
}

// Pull reads one queue.
func (s *Server) Pull(ctx context.Context, req *api.PullRequest) (*api.PullResponse, error) {
	r, err := call(ctx, s, func() (*api.PullResponse, error) {
		res, err := s.b.Pull(ctx, broker.PullRequest{
			Topic: req.Topic, Queue: req.Queue, Offset: req.Offset, MaxMessages: int(req.MaxMessages),
			MaxBytes: int(req.MaxBytes), Wait: time.Duration(req.WaitMs) * time.Millisecond, ConsumerID: req.ConsumerId,
			FilterType: req.FilterType, Filter: req.Filter,
		})
		if err != nil {
			return nil, err
		}
		return pullResponse(&res), nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.PullResponse, error) {
		return c.Pull(ctx, req)
	})
	s.externalPull(ctx, r)
	return r, err
}

func pullResponse(res *broker.PullResult) *api.PullResponse {
	out := &api.PullResponse{
		Status: api.PullStatus(res.Status), NextOffset: res.NextOffset, MinOffset: res.MinOffset, MaxOffset: res.MaxOffset,
		ServedBy: res.ServedBy, ServedByLeader: res.ServedByLeader, Filtered: uint32(res.Filtered),
		Suggestion: &api.Suggestion{NodeId: res.Suggestion.NodeID, Address: res.Suggestion.Addr,
			Reason: res.Suggestion.Reason.Text(), Code: api.SuggestionReason(res.Suggestion.Reason)},
		Messages: make([]*api.Message, len(res.Messages)),
	}
	msgs := make([]api.Message, len(res.Messages)) // one allocation for the response's messages
	for i := range res.Messages {
		m, o := &res.Messages[i], &msgs[i]
		o.Topic, o.Queue, o.Offset, o.Id, o.Key, o.Tag = m.Topic, m.Queue, m.Offset, m.ID, m.Key, m.Tag
		o.Properties, o.Body, o.TimestampMs = m.Properties, m.Body, m.Timestamp
		out.Messages[i] = o
	}
	return out
}

// CommitOffsets stores a group's offsets.
func (s *Server) CommitOffsets(ctx context.Context, req *api.CommitOffsetsRequest) (*api.CommitOffsetsResponse, error) {
	offs := make([]store.OffsetEntry, len(req.Offsets))
	for i, o := range req.Offsets {
		offs[i] = store.OffsetEntry{Topic: o.Topic, Queue: o.Queue, Offset: o.Offset}
	}
	return call(ctx, s, func() (*api.CommitOffsetsResponse, error) {
		if req.MemberId != "" {
			return &api.CommitOffsetsResponse{}, s.b.CommitMemberOffsets(ctx, req.Group, req.MemberId, offs)
		}
		return &api.CommitOffsetsResponse{}, s.b.CommitOffsets(ctx, req.Group, offs)
	}, func(ctx context.Context, c api.BrokerClient) (*api.CommitOffsetsResponse, error) {
		return c.CommitOffsets(ctx, req)
	})
}

// FetchOffsets returns a group's committed offsets.
func (s *Server) FetchOffsets(ctx context.Context, req *api.FetchOffsetsRequest) (*api.FetchOffsetsResponse, error) {
	return call(ctx, s, func() (*api.FetchOffsetsResponse, error) {
		fetch := s.b.FetchOffsets
		if req.MemberId != "" {
			fetch = func(group, topic string) (map[int32]uint64, error) {
				return s.b.FetchMemberOffsets(group, req.MemberId, topic)
			}
		}
		offs, err := fetch(req.Group, req.Topic)
		if err != nil {
			return nil, err
		}
		out := &api.FetchOffsetsResponse{}
		for q, o := range offs {
			out.Offsets = append(out.Offsets, &api.QueueOffset{Topic: req.Topic, Queue: q, Offset: o})
		}
		return out, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.FetchOffsetsResponse, error) {
		return c.FetchOffsets(ctx, req)
	})
}

func topicInfo(ti store.TopicInfo) *api.TopicInfo {
	out := &api.TopicInfo{Name: ti.Name, Queues: int32(len(ti.Queues)), Perm: ti.Perm}
	if out.Perm == 0 {
		out.Perm = store.PermReadWrite
	}
	for i, q := range ti.Queues {
		out.QueueInfo = append(out.QueueInfo, &api.QueueInfo{Queue: int32(i), MinOffset: q.Min, MaxOffset: q.Max})
	}
	return out
}

// CreateTopic creates a topic.
func (s *Server) CreateTopic(ctx context.Context, req *api.CreateTopicRequest) (*api.CreateTopicResponse, error) {
	return call(ctx, s, func() (*api.CreateTopicResponse, error) {
		ti, err := s.b.ClientCreateTopic(ctx, req.Name, req.Queues, req.IfNotExists)
		if err != nil {
			return nil, err
		}
		return &api.CreateTopicResponse{Topic: topicInfo(ti)}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.CreateTopicResponse, error) {
		return c.CreateTopic(ctx, req)
	})
}

// NumberProducer hands out the group's next producer number.
func (s *Server) NumberProducer(ctx context.Context, req *api.NumberProducerRequest) (*api.NumberProducerResponse, error) {
	return call(ctx, s, func() (*api.NumberProducerResponse, error) {
		n, err := s.b.NumberProducer(ctx)
		if err != nil {
			return nil, err
		}
		return &api.NumberProducerResponse{Number: n}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.NumberProducerResponse, error) {
		return c.NumberProducer(ctx, req)
	})
}

// ListTopics lists the topics.
func (s *Server) ListTopics(ctx context.Context, req *api.ListTopicsRequest) (*api.ListTopicsResponse, error) {
	return call(ctx, s, func() (*api.ListTopicsResponse, error) {
		tis, err := s.b.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		out := &api.ListTopicsResponse{}
		for _, ti := range tis {
			out.Topics = append(out.Topics, topicInfo(ti))
		}
		return out, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.ListTopicsResponse, error) {
		return c.ListTopics(ctx, req)
	})
}

// DescribeTopic describes one topic.
func (s *Server) DescribeTopic(ctx context.Context, req *api.DescribeTopicRequest) (*api.DescribeTopicResponse, error) {
	return call(ctx, s, func() (*api.DescribeTopicResponse, error) {
		ti, err := s.b.DescribeTopic(ctx, req.Name)
		if err != nil {
			return nil, err
		}
		return &api.DescribeTopicResponse{Topic: topicInfo(ti)}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.DescribeTopicResponse, error) {
		return c.DescribeTopic(ctx, req)
	})
}

func assignments(as []broker.Assignment) []*api.Assignment {
	out := make([]*api.Assignment, len(as))
	for i, a := range as {
		out[i] = &api.Assignment{Topic: a.Topic, Queues: a.Queues}
	}
	return out
}

// JoinGroup registers a member and returns its queues.
func (s *Server) JoinGroup(ctx context.Context, req *api.JoinGroupRequest) (*api.JoinGroupResponse, error) {
	return call(ctx, s, func() (*api.JoinGroupResponse, error) {
		join := s.b.JoinGroup
		if req.Broadcast {
			join = s.b.JoinBroadcastGroup
		}
		r, err := join(ctx, req.Group, req.MemberId, req.Topics)
		if err != nil {
			return nil, err
		}
		return &api.JoinGroupResponse{Generation: r.Generation, Assignments: assignments(r.Assignments),
			HeartbeatIntervalMs: uint32(r.HeartbeatInterval.Milliseconds()), SessionTimeoutMs: uint32(r.SessionTimeout.Milliseconds())}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.JoinGroupResponse, error) {
		return c.JoinGroup(ctx, req)
	})
}

// LeaveGroup removes a member.
func (s *Server) LeaveGroup(ctx context.Context, req *api.LeaveGroupRequest) (*api.LeaveGroupResponse, error) {
	return call(ctx, s, func() (*api.LeaveGroupResponse, error) {
		return &api.LeaveGroupResponse{}, s.b.LeaveGroup(ctx, req.Group, req.MemberId)
	}, func(ctx context.Context, c api.BrokerClient) (*api.LeaveGroupResponse, error) {
		return c.LeaveGroup(ctx, req)
	})
}

// ListGroups lists the consumer groups.
func (s *Server) ListGroups(ctx context.Context, req *api.ListGroupsRequest) (*api.ListGroupsResponse, error) {
	return call(ctx, s, func() (*api.ListGroupsResponse, error) {
		gs, err := s.b.ListGroups(ctx)
		if err != nil {
			return nil, err
		}
		return &api.ListGroupsResponse{Groups: gs}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.ListGroupsResponse, error) {
		return c.ListGroups(ctx, req)
	})
}

// DescribeGroup describes one consumer group.
func (s *Server) DescribeGroup(ctx context.Context, req *api.DescribeGroupRequest) (*api.DescribeGroupResponse, error) {
	return call(ctx, s, func() (*api.DescribeGroupResponse, error) {
		g, err := s.b.DescribeGroup(ctx, req.Group)
		if err != nil {
			return nil, err
		}
		out := &api.DescribeGroupResponse{Group: g.Group, Generation: g.Generation, Settings: groupSettings(g.Settings)}
		out.Settings.Broadcast = g.Broadcast
		for _, m := range g.Members {
			out.Members = append(out.Members, &api.GroupMember{MemberId: m.ID, Assignments: assignments(m.Assignments), LastSeenMs: m.LastSeen.UnixMilli()})
		}
		for _, q := range g.Queues {
			out.Queues = append(out.Queues, &api.GroupQueue{Topic: q.Topic, Queue: q.Queue, Committed: q.Committed, MaxOffset: q.MaxOffset, Lag: q.Lag, MemberId: q.Member})
		}
		return out, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.DescribeGroupResponse, error) {
		return c.DescribeGroup(ctx, req)
	})
}

// ResetGroup moves a group's offsets.
func (s *Server) ResetGroup(ctx context.Context, req *api.ResetGroupRequest) (*api.ResetGroupResponse, error) {
	return call(ctx, s, func() (*api.ResetGroupResponse, error) {
		offs, err := s.b.ResetGroup(ctx, broker.ResetRequest{Group: req.Group, Topic: req.Topic, To: req.To, Queues: req.Queues, DryRun: req.DryRun})
		if err != nil {
			return nil, err
		}
		out := &api.ResetGroupResponse{}
		for _, o := range offs {
			out.Offsets = append(out.Offsets, &api.QueueOffset{Topic: o.Topic, Queue: o.Queue, Offset: o.Offset})
		}
		return out, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.ResetGroupResponse, error) {
		return c.ResetGroup(ctx, req)
	})
}

// SearchOffsets finds, per queue, the first offset stored at or after a
// time, from this node's log.
func (s *Server) SearchOffsets(ctx context.Context, req *api.SearchOffsetsRequest) (*api.SearchOffsetsResponse, error) {
	return call(ctx, s, func() (*api.SearchOffsetsResponse, error) {
		offs, err := s.b.SearchOffsets(ctx, req.Topic, req.TimestampMs, req.Queues)
		if err != nil {
			return nil, err
		}
		out := &api.SearchOffsetsResponse{}
		for _, o := range offs {
			out.Offsets = append(out.Offsets, &api.QueueOffset{Topic: o.Topic, Queue: o.Queue, Offset: o.Offset})
		}
		return out, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.SearchOffsetsResponse, error) {
		return c.SearchOffsets(ctx, req)
	})
}

// Status reports the group as this node sees it.
func (s *Server) Status(ctx context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	r, err := call(ctx, s, func() (*api.StatusResponse, error) {
		st, err := s.b.Status()
		if err != nil {
			return nil, err
		}
		return statusResponse(&st), nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.StatusResponse, error) {
		return c.Status(ctx, req)
	})
	s.externalStatus(ctx, r)
	return r, err
}

func statusResponse(st *broker.Status) *api.StatusResponse {
	out := &api.StatusResponse{Group: st.Group, GroupId: st.GroupID, Term: st.Term, LeaderId: st.LeaderID, LeaderAddress: st.LeaderAddr,
		AnsweredBy: st.AnsweredBy, LeaderChanges: st.LeaderChanges}
	for _, n := range st.Nodes {
		ns := &api.NodeStatus{Id: n.ID, Role: n.Role, RaftAddress: n.RaftAddr, ClientAddress: n.ClientAddr, HttpAddress: n.HTTPAddr,
			AppliedIndex: n.Applied, CommitIndex: n.Commit, LastIndex: n.Last, FirstIndex: n.First, Healthy: n.Healthy,
			Voter: n.Voter, Term: n.Term, Load: n.Load, Lag: n.Lag, Error: n.Error,
			Damaged: n.Damaged, DamagedIndex: n.DamagedIndex, DamagedReason: n.DamagedReason,
			ServedAsLeader: n.ServedAsLeader, ServedAsFollower: n.ServedAsFollower}
		if !n.LastSeen.IsZero() {
			ns.LastSeenMs = n.LastSeen.UnixMilli()
		}
		out.Nodes = append(out.Nodes, ns)
	}
	return out
}

// statusOf is statusResponse's inverse.
func statusOf(r *api.StatusResponse) broker.Status {
	st := broker.Status{Group: r.Group, Term: r.Term, LeaderID: r.LeaderId, LeaderAddr: r.LeaderAddress,
		AnsweredBy: r.AnsweredBy, LeaderChanges: r.LeaderChanges}
	for _, n := range r.Nodes {
		ns := broker.NodeStatus{ID: n.Id, Role: n.Role, RaftAddr: n.RaftAddress, ClientAddr: n.ClientAddress, HTTPAddr: n.HttpAddress,
			Applied: n.AppliedIndex, Commit: n.CommitIndex, Last: n.LastIndex, First: n.FirstIndex, Healthy: n.Healthy,
			Voter: n.Voter, Term: n.Term, Load: n.Load, Lag: n.Lag, Error: n.Error,
			Damaged: n.Damaged, DamagedIndex: n.DamagedIndex, DamagedReason: n.DamagedReason,
			ServedAsLeader: n.ServedAsLeader, ServedAsFollower: n.ServedAsFollower}
		if n.LastSeenMs != 0 {
			ns.LastSeen = time.UnixMilli(n.LastSeenMs)
		}
		st.Nodes = append(st.Nodes, ns)
	}
	return st
}

// TransferLeader moves leadership.
func (s *Server) TransferLeader(ctx context.Context, req *api.TransferLeaderRequest) (*api.TransferLeaderResponse, error) {
	return call(ctx, s, func() (*api.TransferLeaderResponse, error) {
		id, took, err := s.b.TransferLeader(ctx, req.To)
		if err != nil {
			return nil, err
		}
		return &api.TransferLeaderResponse{LeaderId: id, TookUs: took.Microseconds()}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.TransferLeaderResponse, error) {
		return c.TransferLeader(ctx, req)
	})
}

// AddMember adds a node as non-voter and promotes it once caught up.
func (s *Server) AddMember(ctx context.Context, req *api.AddMemberRequest) (*api.AddMemberResponse, error) {
	return call(ctx, s, func() (*api.AddMemberResponse, error) {
		voter, err := s.b.AddMember(ctx, req.Id, req.RaftAddress)
		if err != nil {
			return nil, err
		}
		return &api.AddMemberResponse{Voter: voter}, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.AddMemberResponse, error) {
		return c.AddMember(ctx, req)
	})
}

// RemoveMember removes a node.
func (s *Server) RemoveMember(ctx context.Context, req *api.RemoveMemberRequest) (*api.RemoveMemberResponse, error) {
	return call(ctx, s, func() (*api.RemoveMemberResponse, error) {
		return &api.RemoveMemberResponse{}, s.b.RemoveMember(ctx, req.Id, req.Force)
	}, func(ctx context.Context, c api.BrokerClient) (*api.RemoveMemberResponse, error) {
		return c.RemoveMember(ctx, req)
	})
}
