package grpcapi

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/mq"
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
	Topic         string             `json:"topic,omitempty"`
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
		return struct{}{}, s.b.EndTransaction(ctx, broker.TxnEnd{ID: c.ID, Topic: c.Topic, ProducerGroup: c.ProducerGroup, Decision: c.Decision})
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

// txnDecision maps the API's decision to the broker's.
func txnDecision(d api.TransactionDecision) (broker.TxnDecision, error) {
	switch d {
	case api.TransactionDecision_TRANSACTION_DECISION_COMMIT:
		return broker.TxnCommit, nil
	case api.TransactionDecision_TRANSACTION_DECISION_ROLLBACK:
		return broker.TxnRollback, nil
	}
	return 0, fmt.Errorf("%w: transaction decision %v: want COMMIT or ROLLBACK", broker.ErrInvalidArgument, d)
}

// EndTransaction decides a half message a client produced.
func (s *Server) EndTransaction(ctx context.Context, req *api.EndTransactionRequest) (*api.EndTransactionResponse, error) {
	d, err := txnDecision(req.Decision)
	if err != nil {
		return nil, toStatus(err)
	}
	return call(ctx, s, func() (*api.EndTransactionResponse, error) {
		return &api.EndTransactionResponse{}, s.b.EndTransaction(ctx, broker.TxnEnd{ID: req.Id, Topic: req.Topic, ProducerGroup: req.ProducerGroup, Decision: d})
	}, func(ctx context.Context, c api.BrokerClient) (*api.EndTransactionResponse, error) {
		return c.EndTransaction(ctx, req)
	})
}

// defaultListHalf is the answer's bound when a ListHalfMessages request
// names none.
const defaultListHalf = 100

// ListHalfMessages answers undecided half messages as the leader holds them.
func (s *Server) ListHalfMessages(ctx context.Context, req *api.ListHalfMessagesRequest) (*api.ListHalfMessagesResponse, error) {
	n := int(req.MaxMessages)
	if n == 0 {
		n = defaultListHalf
	}
	return call(ctx, s, func() (*api.ListHalfMessagesResponse, error) {
		hs, pending, err := s.b.ListHalf(ctx, broker.HalfFilter{Topic: req.Topic, ProducerGroup: req.ProducerGroup,
			OlderThan: time.Duration(req.OlderThanMs) * time.Millisecond, Max: n, From: req.FromOffset})
		if err != nil {
			return nil, err
		}
		out := &api.ListHalfMessagesResponse{Pending: pending, ServedBy: s.b.ID(), Messages: make([]*api.HalfMessage, len(hs))}
		for i := range hs {
			m := &hs[i]
			h := &api.HalfMessage{ProducerGroup: m.Properties[mq.PropProducerGroup], Message: &api.Message{Topic: m.Topic, Queue: m.Queue, Offset: m.Offset,
				Id: m.ID, Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body, TimestampMs: m.Timestamp}}
			if !m.StoredAt.IsZero() {
				h.StoredAtMs = m.StoredAt.UnixMilli()
			}
			out.Messages[i] = h
		}
		return out, nil
	}, func(ctx context.Context, c api.BrokerClient) (*api.ListHalfMessagesResponse, error) {
		return c.ListHalfMessages(ctx, req)
	})
}
