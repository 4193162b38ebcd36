package grpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/raftmq/raftmq/broker"
)

// The Txn service carries a transaction decision from the node a RocketMQ
// client sent END_TRANSACTION to (a follower, or a follower's write path)
// to the leader. It is node-to-node, like Peer, and has one method; its
// request is a JSON document in a BytesValue, so it needs no generated
// code.
const (
	txnServiceName = "raftmq.v1.Txn"
	// TxnEndMethod is the full name of the decision call.
	TxnEndMethod = "/" + txnServiceName + "/EndTransaction"
)

// EndTransactionCall is the decision a node forwards.
type EndTransactionCall struct {
	ID            string             `json:"id"` // the half message's id
	ProducerGroup string             `json:"producer_group,omitempty"`
	Decision      broker.TxnDecision `json:"decision"`
}

type txnServer interface {
	endTransaction(ctx context.Context, c EndTransactionCall) error
}

type txnService struct {
	b     *broker.Broker
	peers *Peers
}

func (s *txnService) endTransaction(ctx context.Context, c EndTransactionCall) error {
	_, err := forward(ctx, s.b.ID(), s.peers, func() (struct{}, error) {
		return struct{}{}, s.b.EndTransaction(ctx, c.ID, c.ProducerGroup, c.Decision)
	}, func(ctx context.Context, cc grpc.ClientConnInterface) (struct{}, error) {
		return struct{}{}, EndTransaction(ctx, cc, c)
	})
	return err
}

var txnServiceDesc = grpc.ServiceDesc{
	ServiceName: txnServiceName,
	HandlerType: (*txnServer)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "EndTransaction", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.BytesValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			var c EndTransactionCall
			if err := json.Unmarshal(req.(*wrapperspb.BytesValue).Value, &c); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "end transaction: %v", err)
			}
			return &emptypb.Empty{}, srv.(txnServer).endTransaction(ctx, c)
		}
		if icpt == nil {
			return h(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: TxnEndMethod}, h)
	}}},
	Metadata: "broker/grpcapi/txn.go",
}

// EndTransaction asks the node at cc to decide a half message (forwarding
// it to its leader when it is not).
func EndTransaction(ctx context.Context, cc grpc.ClientConnInterface, c EndTransactionCall) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	return cc.Invoke(ctx, TxnEndMethod, wrapperspb.Bytes(b), new(emptypb.Empty))
}
