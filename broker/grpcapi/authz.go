package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/mq"
)

// methodAuth is what a gRPC method needs of its caller.
type methodAuth struct {
	// open: served without a credential, as /readyz is (nothing checked).
	open bool
	// node: a node-to-node call; it takes the group's node credential or
	// (over TLS) a client certificate the cluster CA signed, never a user.
	node bool
	// needs returns the permissions a request needs beyond a valid
	// credential of a known user (nil: none). req is nil for a stream.
	needs func(req any) []auth.Need
}

func topicNeed(a auth.Action, topic string) auth.Need {
	if mq.IsRetryTopic(topic) {
		return auth.Need{Action: auth.Subscribe, Resource: auth.Group(topic)}
	}
	return auth.Need{Action: a, Resource: auth.Topic(topic)}
}

func groupNeed(a auth.Action, group string) auth.Need {
	return auth.Need{Action: a, Resource: auth.Group(group)}
}

var clusterAdmin = auth.Need{Action: auth.Admin, Resource: auth.ClusterResource}

// Entries of methodTable.
var (
	openCall    = methodAuth{open: true}
	nodeCall    = methodAuth{node: true}
	anyUser     = methodAuth{}
	adminOfAll  = methodAuth{needs: func(any) []auth.Need { return []auth.Need{clusterAdmin} }}
	topicAction = func(a auth.Action, name func(any) string) methodAuth {
		return methodAuth{needs: func(r any) []auth.Need { return []auth.Need{topicNeed(a, name(r))} }}
	}
	groupAction = func(a auth.Action, name func(any) string) methodAuth {
		return methodAuth{needs: func(r any) []auth.Need { return []auth.Need{groupNeed(a, name(r))} }}
	}
)

// queueNeeds is subscribe on group and on every topic of refs.
func queueNeeds(group string, topics ...string) []auth.Need {
	needs := []auth.Need{groupNeed(auth.Subscribe, group)}
	seen := map[string]bool{}
	for _, t := range topics {
		if !seen[t] {
			seen[t] = true
			needs = append(needs, topicNeed(auth.Subscribe, t))
		}
	}
	return needs
}

// publishOrAdmin is publish on topic, or admin on the cluster without one.
func publishOrAdmin(topic string) []auth.Need {
	if topic == "" {
		return []auth.Need{clusterAdmin}
	}
	return []auth.Need{topicNeed(auth.Publish, topic)}
}

func refTopics(qs []*api.QueueRef) []string {
	var ts []string
	for _, q := range qs {
		ts = append(ts, q.GetTopic())
	}
	return ts
}

// methodTable says, for every method a node serves, what its caller needs
// (docs/security.md has it as a table). A method without an entry needs
// admin on the cluster; TestMethodTableComplete fails for one.
var methodTable = map[string]methodAuth{
	api.Broker_Produce_FullMethodName: topicAction(auth.Publish, func(r any) string { return as[api.ProduceRequest](r).GetTopic() }),
	api.Broker_Pull_FullMethodName:    topicAction(auth.Subscribe, func(r any) string { return as[api.PullRequest](r).GetTopic() }),
	// A stream of Produce calls: opening it takes a valid credential, each
	// call what Produce needs (authorizeStreamed).
	api.Broker_ProduceStream_FullMethodName: anyUser,
	api.Broker_CommitOffsets_FullMethodName: {needs: func(r any) []auth.Need {
		req := as[api.CommitOffsetsRequest](r)
		var ts []string
		for _, o := range req.GetOffsets() {
			ts = append(ts, o.GetTopic())
		}
		return queueNeeds(req.GetGroup(), ts...)
	}},
	api.Broker_FetchOffsets_FullMethodName: {needs: func(r any) []auth.Need {
		req := as[api.FetchOffsetsRequest](r)
		return queueNeeds(req.GetGroup(), req.GetTopic())
	}},
	api.Broker_CreateTopic_FullMethodName: topicAction(auth.Admin, func(r any) string { return as[api.CreateTopicRequest](r).GetName() }),
	api.Broker_ListTopics_FullMethodName:  anyUser,
	// A number for a producer id: it grants nothing (the id is any
	// producer's to choose); a user sending its first request asks.
	api.Broker_NumberProducer_FullMethodName: anyUser,
	api.Broker_DescribeTopic_FullMethodName:  anyUser, // producers read a topic's queues
	api.Broker_JoinGroup_FullMethodName: {needs: func(r any) []auth.Need {
		req := as[api.JoinGroupRequest](r)
		return queueNeeds(req.GetGroup(), req.GetTopics()...)
	}},
	api.Broker_LeaveGroup_FullMethodName:    groupAction(auth.Subscribe, func(r any) string { return as[api.LeaveGroupRequest](r).GetGroup() }),
	api.Broker_ListGroups_FullMethodName:    anyUser,
	api.Broker_DescribeGroup_FullMethodName: groupAction(auth.Subscribe, func(r any) string { return as[api.DescribeGroupRequest](r).GetGroup() }),
	api.Broker_ResetGroup_FullMethodName:    groupAction(auth.Admin, func(r any) string { return as[api.ResetGroupRequest](r).GetGroup() }),
	api.Broker_SearchOffsets_FullMethodName: topicAction(auth.Subscribe, func(r any) string { return as[api.SearchOffsetsRequest](r).GetTopic() }),
	// How clients find the leader and health checks see a node (the
	// counterpart of /readyz): roles, addresses and indexes, no data.
	api.Broker_Status_FullMethodName:         openCall,
	api.Broker_TransferLeader_FullMethodName: adminOfAll,
	api.Broker_AddMember_FullMethodName:      adminOfAll,
	api.Broker_RemoveMember_FullMethodName:   adminOfAll,
	api.Broker_SendBack_FullMethodName:       groupAction(auth.Subscribe, func(r any) string { return as[api.SendBackRequest](r).GetGroup() }),
	// A message by id: its topic is known only once it is read; as
	// RocketMQ's VIEW_MESSAGE_BY_ID, a valid credential suffices.
	api.Broker_LookupMessage_FullMethodName:    anyUser,
	api.Broker_FindMessages_FullMethodName:     topicAction(auth.Subscribe, func(r any) string { return as[api.FindMessagesRequest](r).GetTopic() }),
	api.Broker_ResendDeadLetter_FullMethodName: groupAction(auth.Subscribe, func(r any) string { return as[api.ResendDeadLetterRequest](r).GetGroup() }),
	api.Broker_UpdateTopic_FullMethodName:      topicAction(auth.Admin, func(r any) string { return as[api.UpdateTopicRequest](r).GetName() }),
	api.Broker_DeleteTopic_FullMethodName:      topicAction(auth.Admin, func(r any) string { return as[api.DeleteTopicRequest](r).GetName() }),
	api.Broker_UpdateGroup_FullMethodName:      groupAction(auth.Admin, func(r any) string { return as[api.UpdateGroupRequest](r).GetGroup() }),
	api.Broker_DeleteGroup_FullMethodName:      groupAction(auth.Admin, func(r any) string { return as[api.DeleteGroupRequest](r).GetGroup() }),
	api.Broker_LockQueues_FullMethodName: {needs: func(r any) []auth.Need {
		req := as[api.LockQueuesRequest](r)
		return queueNeeds(req.GetGroup(), refTopics(req.GetQueues())...)
	}},
	api.Broker_UnlockQueues_FullMethodName: {needs: func(r any) []auth.Need {
		req := as[api.UnlockQueuesRequest](r)
		return queueNeeds(req.GetGroup(), refTopics(req.GetQueues())...)
	}},
	// A decision needs publish on the half message's topic (the broker
	// refuses one whose half message is bound elsewhere); without a topic,
	// admin on the cluster, as listing every topic's half messages does.
	api.Broker_EndTransaction_FullMethodName: {needs: func(r any) []auth.Need {
		return publishOrAdmin(as[api.EndTransactionRequest](r).GetTopic())
	}},
	api.Broker_ListHalfMessages_FullMethodName: {needs: func(r any) []auth.Need {
		return publishOrAdmin(as[api.ListHalfMessagesRequest](r).GetTopic())
	}},
	api.Peer_NodeState_FullMethodName: nodeCall,
	api.Peer_Register_FullMethodName:  nodeCall,
	legacyNodeState:                   nodeCall,
	legacyRegister:                    nodeCall,
	TxnEndMethod:                      nodeCall,
	ReplyPushMethod:                   nodeCall,
	api.UsersCallMethod:               adminOfAll,
}

// as returns r as a *T, nil when it is not one (a stream has no request).
func as[T any](r any) *T {
	t, _ := r.(*T)
	return t
}

// AuthOptions are the server options that authenticate every call with a,
// by its credential (mq.CallCredentialKey) and methodTable; none when a is
// disabled.
func AuthOptions(a *auth.Authorizer) []grpc.ServerOption {
	if a.Mode() == acl.Disabled {
		return nil
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := authorizeCall(ctx, a, info.FullMethod, req); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			sa, err := authorizeStream(ss.Context(), a, info.FullMethod)
			if err != nil {
				return err
			}
			if sa != nil {
				ss = &authedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), streamAuthKey{}, sa)}
			}
			return h(srv, ss)
		}),
	}
}

// streamAuth checks the calls that arrive on a stream whose credential
// was verified when it opened.
type streamAuth struct {
	a      *auth.Authorizer
	caller *auth.Caller
	from   string
}

type streamAuthKey struct{}

// authedStream is a stream whose context carries its streamAuth.
type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

// authorizeStream checks the credential a stream opens with, as
// authorizeCall does a call's, and returns what checks the stream's calls
// (nil when nothing needs checking).
func authorizeStream(ctx context.Context, a *auth.Authorizer, method string) (*streamAuth, error) {
	m := authOf(method)
	if m.node || m.needs != nil { // node-to-node, or more than a valid user: checked as a call
		return nil, authorizeCall(ctx, a, method, nil)
	}
	if m.open {
		return nil, nil
	}
	from := callerAddr(ctx)
	caller, err := a.OpenStream(callCredential(ctx), method, from)
	if err != nil {
		return nil, authStatus(err)
	}
	return &streamAuth{a: a, caller: caller, from: from}, nil
}

// authorizeStreamed checks req, a call of method (the unary method it
// stands for) that arrived on the stream of ctx; nil on a node that does
// not authenticate.
func authorizeStreamed(ctx context.Context, method string, req any) error {
	sa, _ := ctx.Value(streamAuthKey{}).(*streamAuth)
	if sa == nil {
		return nil
	}
	var needs []auth.Need
	if m := methodTable[method]; m.needs != nil {
		needs = m.needs(req)
	}
	return authStatus(sa.a.CheckStreamed(sa.caller, method, needs, sa.from))
}

func callCredential(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(mq.CallCredentialKey); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func callerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// authOf is what method needs of its caller: its methodTable entry, or
// admin on the cluster for a method without one.
func authOf(method string) methodAuth {
	if m, ok := methodTable[method]; ok {
		return m
	}
	return adminOfAll
}

// authorizeCall checks one call; its error is the gRPC status to answer.
func authorizeCall(ctx context.Context, a *auth.Authorizer, method string, req any) error {
	m := authOf(method)
	if m.open || (m.node && tlsconf.VerifiedPeer(ctx)) {
		return nil
	}
	var needs []auth.Need
	if m.needs != nil {
		needs = m.needs(req)
	}
	return authStatus(a.CheckCall(callCredential(ctx), method, needs, m.node, callerAddr(ctx)))
}

// authStatus answers a refusal: PermissionDenied for a known caller
// without the permission, Unauthenticated for a caller not known.
func authStatus(err error) error {
	var d *auth.Denied
	if !errors.As(err, &d) {
		return err
	}
	switch {
	case d.Reason == auth.ReasonNoPermission, d.Reason == auth.ReasonNotNode:
		return status.Error(codes.PermissionDenied, d.Message)
	case d.Retryable():
		return status.Error(codes.Unavailable, d.Message)
	}
	return status.Error(codes.Unauthenticated, d.Message)
}
