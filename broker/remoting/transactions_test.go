package remoting_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	rmq "github.com/raftmq/raftmq/remoting"
)

// A transactional half message is refused whichever way it is marked
// (TRAN_MSG, the prepared type in sysFlag, one message of a batch) and by
// the gRPC produce path too; nothing is stored. END_TRANSACTION is refused
// with the reason.
func TestTransactionalSendsRefused(t *testing.T) {
	f := newFixture(t)
	l := f.c.Leader()
	f.createTopic("tx", 1)
	const remark = "transactional messages are not supported by this broker yet; nothing was stored"
	tran := sendExt("tx", 0, map[string]string{"TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": "T1"})
	prepared := sendExt("tx", 0, map[string]string{"UNIQ_KEY": "T2"})
	prepared["sysFlag"] = "4"
	lower := sendExt("tx", 0, map[string]string{"TRAN_MSG": "True"})
	batch := rmq.EncodeBatch([]rmq.BatchMessage{{Body: []byte("b0")}, {Body: []byte("b1"), Properties: map[string]string{"TRAN_MSG": "true"}}})
	for name, c := range map[string]struct {
		addr string
		code int32
		ext  map[string]string
		body []byte
	}{
		"TRAN_MSG":                    {f.addr(l), rmq.SendMessage, tran, []byte("half")},
		"TRAN_MSG through a follower": {f.addr(f.follower()), rmq.SendMessage, tran, []byte("half")},
		"prepared sysFlag":            {f.addr(l), rmq.SendMessage, prepared, []byte("half")},
		"TRAN_MSG=True":               {f.addr(l), rmq.SendMessage, lower, []byte("half")},
		"V2 header":                   {f.addr(l), rmq.SendMessageV2, map[string]string{"a": "pg", "b": "tx", "e": "0", "f": "4", "i": ""}, []byte("half")},
		"batch member":                {f.addr(l), rmq.SendBatchMessage, map[string]string{"a": "pg", "b": "tx", "e": "0", "f": "0", "i": "", "m": "true"}, batch},
	} {
		r := f.invoke(c.addr, c.code, c.ext, c.body)
		if r.Code != rmq.NoPermission || r.Remark != remark {
			t.Errorf("%s: %d %q, want %d %q", name, r.Code, r.Remark, rmq.NoPermission, remark)
		}
	}
	// The gRPC produce path refuses the property as well.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := f.c.Node(l).Broker().ClientProduce(ctx, broker.ProduceRequest{Topic: "tx", Messages: []broker.ProduceMessage{
		{Body: []byte("ok")}, {Body: []byte("half"), Properties: map[string]string{"TRAN_MSG": "true"}}}})
	if !errors.Is(err, broker.ErrFailedPrecondition) || !strings.Contains(err.Error(), remark) {
		t.Errorf("gRPC produce of a half message: %v", err)
	}
	// TRAN_MSG=false is an ordinary message.
	if r := f.invoke(f.addr(l), rmq.SendMessage, sendExt("tx", 0, map[string]string{"TRAN_MSG": "false"}), []byte("plain")); r.Code != rmq.Success {
		t.Fatalf("TRAN_MSG=false: %d %q", r.Code, r.Remark)
	}
	if r := f.invoke(f.addr(l), rmq.GetMaxOffset, map[string]string{"topic": "tx", "queueId": "0"}, nil); r.Ext["offset"] != "1" {
		t.Fatalf("queue end %s, want 1: only the ordinary message stored", r.Ext["offset"])
	}
	end := f.invoke(f.addr(l), rmq.EndTransaction, map[string]string{"producerGroup": "pg", "commitLogOffset": "0", "commitOrRollback": "8", "msgId": "x"}, nil)
	if end.Code != rmq.RequestCodeNotSupported || !strings.Contains(end.Remark, "request code 37 (END_TRANSACTION): transactional messages are not supported") {
		t.Fatalf("END_TRANSACTION: %d %q", end.Code, end.Remark)
	}
}
