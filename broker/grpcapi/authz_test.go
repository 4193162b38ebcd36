package grpcapi

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// TestMethodTableComplete: every method of every service a node serves
// (and the legacy names it still answers) has an entry in methodTable, and
// every entry names a served method; a method added without a rule fails
// here.
func TestMethodTableComplete(t *testing.T) {
	served := map[string]bool{legacyNodeState: true, legacyRegister: true}
	for _, sd := range []*grpc.ServiceDesc{&api.Broker_ServiceDesc, &api.Peer_ServiceDesc, &txnServiceDesc, &usersServiceDesc, &replyServiceDesc} {
		for _, m := range sd.Methods {
			served["/"+sd.ServiceName+"/"+m.MethodName] = true
		}
		for _, s := range sd.Streams {
			served["/"+sd.ServiceName+"/"+s.StreamName] = true
		}
	}
	for m := range served {
		if _, ok := methodTable[m]; !ok {
			t.Errorf("%s has no entry in methodTable", m)
		}
	}
	for m := range methodTable {
		if !served[m] {
			t.Errorf("methodTable names %s, which no service serves", m)
		}
	}
	if len(served) < 34 {
		t.Errorf("only %d methods found: a service is missing from this test", len(served))
	}
}

// TestMethodNeeds pins the permissions of the calls the docs name.
func TestMethodNeeds(t *testing.T) {
	needs := func(method string, req any) string {
		var out []string
		for _, n := range methodTable[method].needs(req) {
			out = append(out, n.Action.String()+" "+n.Resource)
		}
		return strings.Join(out, "; ")
	}
	for _, tc := range []struct {
		method string
		req    any
		want   string
	}{
		{api.Broker_Produce_FullMethodName, &api.ProduceRequest{Topic: "orders"}, "publish topic:orders"},
		{api.Broker_Produce_FullMethodName, &api.ProduceRequest{Topic: "%RETRY%cg"}, "subscribe group:cg"},
		{api.Broker_Pull_FullMethodName, &api.PullRequest{Topic: "orders"}, "subscribe topic:orders"},
		{api.Broker_CommitOffsets_FullMethodName, &api.CommitOffsetsRequest{Group: "cg", Offsets: []*api.QueueOffset{{Topic: "a"}, {Topic: "a"}, {Topic: "b"}}},
			"subscribe group:cg; subscribe topic:a; subscribe topic:b"},
		{api.Broker_JoinGroup_FullMethodName, &api.JoinGroupRequest{Group: "cg", Topics: []string{"a"}}, "subscribe group:cg; subscribe topic:a"},
		{api.Broker_LockQueues_FullMethodName, &api.LockQueuesRequest{Group: "cg", Queues: []*api.QueueRef{{Topic: "a"}}}, "subscribe group:cg; subscribe topic:a"},
		{api.Broker_ResetGroup_FullMethodName, &api.ResetGroupRequest{Group: "cg"}, "admin group:cg"},
		{api.Broker_DeleteGroup_FullMethodName, &api.DeleteGroupRequest{Group: "cg"}, "admin group:cg"},
		{api.Broker_CreateTopic_FullMethodName, &api.CreateTopicRequest{Name: "t"}, "admin topic:t"},
		{api.Broker_DeleteTopic_FullMethodName, &api.DeleteTopicRequest{Name: "t"}, "admin topic:t"},
		{api.Broker_RemoveMember_FullMethodName, &api.RemoveMemberRequest{}, "admin cluster"},
		{api.Broker_TransferLeader_FullMethodName, &api.TransferLeaderRequest{}, "admin cluster"},
		{api.UsersCallMethod, nil, "admin cluster"},
		{api.Broker_EndTransaction_FullMethodName, &api.EndTransactionRequest{Topic: "orders"}, "publish topic:orders"},
		{api.Broker_EndTransaction_FullMethodName, &api.EndTransactionRequest{}, "admin cluster"},
		{api.Broker_ListHalfMessages_FullMethodName, &api.ListHalfMessagesRequest{Topic: "orders"}, "publish topic:orders"},
		{api.Broker_ListHalfMessages_FullMethodName, &api.ListHalfMessagesRequest{}, "admin cluster"},
	} {
		if got := needs(tc.method, tc.req); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.method, got, tc.want)
		}
	}
	for _, m := range []string{api.Peer_NodeState_FullMethodName, legacyRegister, TxnEndMethod, ReplyPushMethod} {
		if !methodTable[m].node {
			t.Errorf("%s is not a node-to-node call", m)
		}
	}
}

// dirOf is a user table a test may change while a server reads it.
type dirOf struct {
	mu    sync.Mutex
	users map[string]store.User
}

func (d *dirOf) User(name string) (store.User, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, ok := d.users[name]
	return u, ok
}

func (d *dirOf) set(u store.User) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users[u.Name] = u
}

type signer struct {
	ak     string
	secret []byte
}

func (s signer) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, _ := credentials.RequestInfoFromContext(ctx)
	return map[string]string{mq.CallCredentialKey: mq.SignCall(s.ak, s.secret, ri.Method, time.Now())}, nil
}
func (signer) RequireTransportSecurity() bool { return false }

// TestAuthInterceptor runs a real gRPC server with AuthOptions in front of
// a Broker service whose methods all answer: a call that passes reaches
// the handler, one refused gets Unauthenticated or PermissionDenied with
// what was refused.
func TestAuthInterceptor(t *testing.T) {
	sealer, err := acl.NewSealer(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := sealer.Seal("u1", []byte("s1"))
	u1user := store.User{Name: "u1", Secret: sealed, Grants: []store.Grant{{Resource: "topic:orders", Actions: uint32(auth.Publish)}}}
	dir := &dirOf{users: map[string]store.User{"u1": u1user}}
	a, err := auth.New(auth.Config{Mode: acl.Enforcing, Users: dir, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	legacy := grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error { return status.Error(codes.Unimplemented, "legacy name") })
	gs := grpc.NewServer(append(AuthOptions(a), legacy)...)
	api.RegisterBrokerServer(gs, &countingBroker{})
	api.RegisterPeerServer(gs, api.UnimplementedPeerServer{})
	go gs.Serve(lis)
	defer gs.Stop()
	var lastConn *grpc.ClientConn
	dial := func(opts ...grpc.DialOption) (api.BrokerClient, api.PeerClient) {
		cc, err := grpc.NewClient(lis.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		lastConn = cc
		return api.NewBrokerClient(cc), api.NewPeerClient(cc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want := func(what string, err error, code codes.Code, msg string) {
		t.Helper()
		if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
			t.Errorf("%s: %v, want %s %q", what, err, code, msg)
		}
	}
	u1, u1peer := dial(grpc.WithPerRPCCredentials(signer{"u1", []byte("s1")}))
	u1peerConn := lastConn
	_, err = u1.Produce(ctx, &api.ProduceRequest{Topic: "orders"})
	want("u1 produce orders", err, codes.OK, "")
	_, err = u1.Produce(ctx, &api.ProduceRequest{Topic: "payments"})
	want("u1 produce payments", err, codes.PermissionDenied, "user u1 may not publish to topic payments")
	_, err = u1.RemoveMember(ctx, &api.RemoveMemberRequest{Id: "n2"})
	want("u1 remove member", err, codes.PermissionDenied, "user u1 may not administer the cluster")
	_, err = u1peer.NodeState(ctx, &api.NodeStateRequest{})
	want("u1 node state", err, codes.PermissionDenied, "node-to-node call")

	anon, _ := dial()
	_, err = anon.ListTopics(ctx, &api.ListTopicsRequest{})
	want("no credentials", err, codes.Unauthenticated, "without credentials")
	_, err = anon.Status(ctx, &api.StatusRequest{})
	want("status without credentials (open)", err, codes.OK, "")
	wrong, _ := dial(grpc.WithPerRPCCredentials(signer{"u1", []byte("nope")}))
	_, err = wrong.ListTopics(ctx, &api.ListTopicsRequest{})
	want("wrong secret", err, codes.Unauthenticated, "access key u1: unknown, or the signature does not verify")

	// A stream of produce calls: its credential is checked when it opens,
	// each call's permission as it arrives.
	stream := func(c api.BrokerClient, topics ...string) []error {
		t.Helper()
		st, err := c.ProduceStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var errs []error
		for i, topic := range topics {
			if err := st.Send(&api.ProduceCall{Id: uint64(i), Request: &api.ProduceRequest{Topic: topic}}); err != nil {
				t.Fatal(err)
			}
			r, err := st.Recv()
			if err != nil {
				return append(errs, err)
			}
			errs = append(errs, r.Error.Err())
		}
		return errs
	}
	errs := stream(u1, "orders", "payments", "orders")
	want("u1 streams to orders", errs[0], codes.OK, "")
	want("u1 streams to payments", errs[1], codes.PermissionDenied, "user u1 may not publish to topic payments")
	want("u1 streams to orders again", errs[2], codes.OK, "")
	want("a stream without credentials", stream(anon, "orders")[0], codes.Unauthenticated, "without credentials")
	want("a stream with a wrong secret", stream(wrong, "orders")[0], codes.Unauthenticated, "signature does not verify")
	sealed2, _ := sealer.Seal("u1", []byte("s2"))
	st, err := u1.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, change := range []func(){func() {}, func() { dir.set(store.User{Name: "u1", Secret: sealed2, Grants: u1user.Grants}) }} {
		change()
		if err := st.Send(&api.ProduceCall{Id: uint64(i), Request: &api.ProduceRequest{Topic: "orders"}}); err != nil {
			t.Fatal(err)
		}
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			want("u1 streams before its secret changes", r.Error.Err(), codes.OK, "")
		} else {
			want("u1 streams after its secret changed", r.Error.Err(), codes.Unauthenticated, "given a new secret after this stream opened")
		}
	}
	// A node-to-node method reached as a stream takes the node credential.
	cs, err := u1peerConn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, legacyNodeState)
	if err == nil {
		err = cs.RecvMsg(&api.NodeStateResponse{})
	}
	want("u1 streams a node-to-node method", err, codes.PermissionDenied, "node-to-node call")

	node, nodePeer := dial(grpc.WithPerRPCCredentials(signer{mq.NodeAccessKey, sealer.NodeSecret()}))
	_, err = node.RemoveMember(ctx, &api.RemoveMemberRequest{Id: "n2"})
	want("node forwards remove member", err, codes.Unimplemented, "")
	_, err = nodePeer.NodeState(ctx, &api.NodeStateRequest{})
	want("node state", err, codes.Unimplemented, "") // passed auth, reached the (unimplemented) handler
}
