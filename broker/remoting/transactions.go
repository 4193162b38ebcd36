package remoting

import (
	"context"
	"fmt"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/grpcapi"
	rmq "github.com/raftmq/raftmq/remoting"
)

// RocketMQ's END_TRANSACTION commitOrRollback values
// (MessageSysFlag.TRANSACTION_*_TYPE).
const (
	txnNotType      = 0
	txnCommitType   = 8
	txnRollbackType = 12
)

// endTransaction serves END_TRANSACTION: the half message is the one at
// the header's commitLogOffset (what the send's msgId, the offsetMsgId,
// encodes); commit stores it in its real topic, rollback drops it, an
// unknown decision (0) leaves it to the check-back. A node that is not the
// leader forwards the decision to it. The Go client sends it oneway
// without the oneway flag; the answer is then harmless.
func (a *Adapter) endTransaction(ctx context.Context, req *rmq.Command) *rmq.Command {
	decision, err := req.ExtInt("commitOrRollback", -1)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, err.Error())
	}
	phys, err := req.ExtInt("commitLogOffset", -1)
	if err != nil || phys < 0 {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("END_TRANSACTION: commitLogOffset %q", req.Ext["commitLogOffset"]))
	}
	c := grpcapi.EndTransactionCall{ID: messageID(phys), ProducerGroup: req.Ext["producerGroup"]}
	switch decision {
	case txnCommitType:
		c.Decision = broker.TxnCommit
	case txnRollbackType:
		c.Decision = broker.TxnRollback
	case txnNotType:
		a.log.Debug("END_TRANSACTION: unknown local state, left to the check-back", "id", c.ID, "producerGroup", c.ProducerGroup, "remark", req.Remark)
		return rmq.Response(req, rmq.Success, "")
	default:
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("END_TRANSACTION: commitOrRollback %d, want 0, 8 or 12", decision))
	}
	ctx, cancel := context.WithTimeout(ctx, a.b.Config().WriteTimeout)
	defer cancel()
	err = a.b.EndTransaction(ctx, broker.TxnEnd{ID: c.ID, ProducerGroup: c.ProducerGroup, Decision: c.Decision})
	err = a.forward(ctx, err, func(ctx context.Context, addr string) error {
		cc, cerr := a.peers.Conn(addr)
		if cerr != nil {
			return fmt.Errorf("%w: %w", broker.ErrUnavailable, cerr)
		}
		return grpcapi.EndTransaction(ctx, cc, c)
	})
	if err != nil {
		a.log.Warn("END_TRANSACTION failed", "id", c.ID, "decision", decision, "producerGroup", c.ProducerGroup, "error", err)
		return callErrResponse(req, err)
	}
	return rmq.Response(req, rmq.Success, "")
}
