package grpcapi

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

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
	_, err := forward(ctx, s.b, s.peers, func() (struct{}, error) {
		return struct{}{}, s.b.EndTransaction(ctx, c.ID, c.ProducerGroup, c.Decision)
	}, func(ctx context.Context, cc grpc.ClientConnInterface) (struct{}, error) {
		return struct{}{}, EndTransaction(ctx, cc, c)
	})
	return err
}

var txnServiceDesc = grpc.ServiceDesc{
	ServiceName: txnServiceName,
	HandlerType: (*txnServer)(nil),
	Methods: []grpc.MethodDesc{jsonMethod("EndTransaction", TxnEndMethod, "end transaction", func(srv any, ctx context.Context, c EndTransactionCall) (any, error) {
		return &emptypb.Empty{}, srv.(txnServer).endTransaction(ctx, c)
	})},
	Metadata: "broker/grpcapi/txn.go",
}

// EndTransaction asks the node at cc to decide a half message (forwarding
// it to its leader when it is not).
func EndTransaction(ctx context.Context, cc grpc.ClientConnInterface, c EndTransactionCall) error {
	return invokeJSON(ctx, cc, TxnEndMethod, "end transaction", c, new(emptypb.Empty))
}
