package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/api"
)

// Bad transaction calls are refused before anything is sent, naming what
// is wrong.
func TestTransactionRefusals(t *testing.T) {
	c, err := New(Config{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(context.Context, HalfMessage) TxnState { return TxnUnknown }
	for _, cfg := range []TransactionConfig{{Check: check}, {Group: "g"}, {Group: "g", Check: check, Timeout: -time.Second}, {Group: "g", Check: check, Topics: []string{""}}} {
		if _, err := c.NewTransactionProducer(cfg); err == nil {
			t.Errorf("config %+v: no error", cfg)
		}
	}
	tp, err := c.NewTransactionProducer(TransactionConfig{Group: "g", Check: check, CheckInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	ctx := context.Background()
	local := func(context.Context, *api.Ack) TxnState { return TxnCommit }
	if _, err := tp.SendInTransaction(ctx, "t", Message{Body: []byte("x"), DelayLevel: 3}, local); !errors.Is(err, ErrNotSent) {
		t.Errorf("delayed transactional message: %v, want ErrNotSent", err)
	}
	if _, err := tp.SendInTransaction(ctx, "t", Message{Body: []byte("x")}, nil); !errors.Is(err, ErrNotSent) {
		t.Errorf("no local transaction: %v, want ErrNotSent", err)
	}
	if err := c.EndTransaction(ctx, "t", "g", "id", TxnUnknown); err == nil {
		t.Error("end transaction with unknown: no error")
	}
	if err := c.EndTransaction(ctx, "t", "g", "", TxnCommit); err == nil {
		t.Error("end transaction without an id: no error")
	}
	if _, err := c.ListHalfMessages(ctx, "t", "g", 0, 0); err == nil {
		t.Error("list half messages of max 0: no error")
	}
	for _, s := range []string{"commit", "rollback", "unknown"} {
		st, err := ParseTxnState(s)
		if err != nil || st.String() != s {
			t.Errorf("ParseTxnState(%q) = %v, %v", s, st, err)
		}
	}
	if _, err := ParseTxnState("maybe"); err == nil {
		t.Error("ParseTxnState(maybe): no error")
	}
	tp.Close() // idempotent
}
